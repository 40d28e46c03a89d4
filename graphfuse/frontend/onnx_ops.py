"""ONNX operators (opset 13 and later) as graph-dialect ops: the table of all converters.

A converter gets the builder, the node's inputs (SSA tensors, known arrays, or None for an
omitted optional input) and its attributes, and returns one value per node output. Ops
whose inputs are all known never get here: the importer folds them with ONNX's reference
evaluator. Semantics follow the ONNX operator specification; where graphfuse has no
equivalent (a negative Slice step, Conv with auto_pad on a non-2-D input, ...) the
converter says so naming the node.
"""

from graphfuse.frontend import (
    onnx_compound,
    onnx_elementwise,
    onnx_nn,
    onnx_quantization,
    onnx_recurrent,
    onnx_signal,
    onnx_tensor,
)
from graphfuse.frontend.onnx_convert import CONVERTERS

# Importing the families fills CONVERTERS.
__all__ = [
    "CONVERTERS",
    "onnx_compound",
    "onnx_elementwise",
    "onnx_nn",
    "onnx_quantization",
    "onnx_recurrent",
    "onnx_signal",
    "onnx_tensor",
]
