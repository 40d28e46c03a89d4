"""Front ends: models from other formats (ONNX) as graph-dialect modules."""
