"""The C interface of a library written out: a plain C entry per graph function, a
header declaring it, and the description (embedded in the library) they are made from.

`graphfuse compile model.mlir -o libmodel.so` links a small C layer (source.py) over the
MLIR entry points: `int model_main(const float *x, ..., float *out)` and its context,
packed and info variants, all named after the library (naming.py) so that two models
link into one program. A linker version script exports those and nothing else (kernels,
`_mlir_ciface_*`, weights stay local). The header (header.py) is written beside the
library; docs/c-api.md describes the ABI.
"""
