"""Testing tools shipped with graphfuse: a differential fuzzer of its ONNX path.

`onnx_graphs` and `onnx_recipes` generate random valid ONNX models (independent of
graphfuse/random_graphs.py), `onnx_oracle` runs one through import, fusion and the CPU
build and compares with onnxruntime, `onnx_reduce` shrinks a failing model by delta
debugging, and `onnx_fuzz` is the driver (`python -m graphfuse.testing.onnx_fuzz`).
"""
