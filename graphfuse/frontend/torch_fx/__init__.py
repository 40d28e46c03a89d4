"""PyTorch's fx graphs of core ATen ops into the graph dialect (torch.compile's front end).

aten_table maps each ATen op overload graphfuse computes to a builder (aten_tensor,
aten_nn) and the calls it accepts; support answers torch.fx's partitioner from it;
partition splits a graph into supported partitions; fx_import imports one as a
graph-dialect module. Compiling and running the partitions is graphfuse.torch_backend's
(the Dynamo backend), which sits above the compiler; this package does not import it.
docs/torch-compile.md says what maps and why.
"""
