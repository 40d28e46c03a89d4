"""The ONNX differential fuzzer: random valid ONNX models, graphfuse against onnxruntime.

`onnx_graphs`, with the recipes of `onnx_recipes`, `onnx_dtypes`, `onnx_anchors` and
`onnx_attention`, generates random valid ONNX models (independent of
graphfuse/testing/random_graphs.py); `onnx_oracle` runs one through import, fusion and
the CPU build at a setting (threads, vector width) and compares with onnxruntime, and
`onnx_text` takes some through `graphfuse import` and plain `xdsl-opt -p graph-fuse`;
`onnx_reduce` shrinks a failing model by delta debugging; `onnx_fuzz` is the driver
(`python -m graphfuse.testing.fuzz.onnx_fuzz`, `tools/fuzz_onnx.py`, `make fuzz`).
"""
