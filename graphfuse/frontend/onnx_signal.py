"""ONNX signal-processing operators (DFT, STFT, window functions) as graph ops."""

from __future__ import annotations
