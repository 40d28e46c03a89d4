"""The torch.compile backend: `torch.compile(model, backend="graphfuse")`.

Dynamo's graph is traced to core ATen by AOTAutograd (aten_table: one entry per ATen op
overload graphfuse maps), split by torch.fx's capability-based partitioner into subgraphs of
mapped ops (support), each imported to the graph dialect (fx_import) and compiled by
graphfuse; the rest runs eagerly (backend). docs/torch-compile.md says what maps and why.
"""
