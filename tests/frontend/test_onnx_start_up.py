"""What the ONNX front end imports before it reads a model: ml_dtypes comes with onnx."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import BFloat16Type

from graphfuse.frontend.onnx_builder import element_type_of


def test_onnx_checks_import_leaves_ml_dtypes_unloaded() -> None:
    """The command line imports onnx_checks for every input file (its --input-shape and
    --constant parsers); ml_dtypes, the slowest import, waits for an ONNX model."""
    probe = "import sys, graphfuse.frontend.onnx_checks; print('ml_dtypes' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


def test_element_type_of_bfloat16_after_the_deferred_import() -> None:
    assert isinstance(element_type_of(np.dtype(ml_dtypes.bfloat16), "here"), BFloat16Type)
