"""Testing tools shipped with graphfuse, shared by tests/ and bench/ (imported as a package).

`random_graphs` makes random graph-dialect functions and `workloads` the benchmark graphs;
`model_zoo` (Hugging Face networks) and `onnx_models` (small hand-written ones) are checked
against onnxruntime; `compare` checks compiled results against the reference interpreter;
`gpu_on_cpu` runs GPU builds on the CPU; `to_onnx` and `to_jax` translate graph functions for
the onnxruntime and XLA baselines; `fuzz` is the ONNX differential fuzzer.
"""
