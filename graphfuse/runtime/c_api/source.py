"""The C layer linked into a library written out: plain entry points over the packed
MLIR entries (packed_entry.py), contexts that own the scratch buffers, and the library's
description in a section of its own.

Each entry gets a plan (static tables: every buffer's rank, sizes and scratch offset);
one generic routine turns a plan and the caller's data pointers into the memref
descriptors the packed entry reads (allocated and aligned pointer, offset 0, sizes,
row-major strides). The source includes the header it implements, so the compiler checks
every definition against its declaration.

    int m_main(const float *x, float *out0)        (header.py declares it)
 -> m_main_run_packed(NULL, {x, out0})
 -> gf_run: descriptors of x, out0 and the context's scratch -> graphfuse_packed_main(args)
"""

from __future__ import annotations

from graphfuse.runtime.c_api.describe import CBuffer, CEntry, CLibrary
from graphfuse.runtime.c_api.naming import DESCRIPTION_SECTION, ELEMENTS

THREADS_SETTER = "graphfuse_parallel_set_threads"
"""The parallel runtime's thread cap (parallel_runtime.c)."""

_COMMON = """\
#define GF_API __attribute__((visibility("default")))
#define GF_ALIGNMENT 64

/* Descriptors are 64-bit words: two pointers, the offset, sizes, strides. */
typedef char gf_pointers_are_64_bits[sizeof(void *) == sizeof(int64_t) ? 1 : -1];

typedef struct gf_slot {
  int32_t rank;
  int32_t dims;     /* where its sizes start in the plan's dims */
  int64_t elements;
  int64_t offset;   /* in the scratch allocation (scratch buffers only) */
} gf_slot;

typedef struct gf_plan {
  int32_t passed;   /* inputs and outputs: the caller's buffers */
  int32_t slots;    /* passed, then scratch */
  int32_t words;    /* descriptor words of all slots */
  int64_t scratch_bytes;
  const gf_slot *slot;
  const int64_t *dims;
  void (*entry)(void **);
} gf_plan;

typedef struct gf_context {
  const gf_plan *plan;
  char *memory;
  int64_t *words;
  void **args;
} gf_context;

typedef struct gf_shared {
  pthread_mutex_t lock;
  gf_context *context;
} gf_shared;

static void gf_point(int64_t *words, void *data) {
  memcpy(&words[0], &data, sizeof data);
  memcpy(&words[1], &data, sizeof data);
}

static void gf_describe(int64_t *words, const gf_slot *slot, const int64_t *dims) {
  int64_t stride = 1;
  words[2] = 0;
  for (int32_t d = slot->rank - 1; d >= 0; d--) {
    words[3 + d] = dims[slot->dims + d];
    words[3 + slot->rank + d] = stride;
    stride *= dims[slot->dims + d];
  }
}

/* Zeroed scratch (calloc: pages are touched only when used): loop-tile-matmul's
 * "weights packed" flags must start at 0. */
static gf_context *gf_create(const gf_plan *plan) {
  size_t size = sizeof(gf_context) + (size_t)plan->words * sizeof(int64_t) +
                (size_t)plan->slots * sizeof(void *);
  gf_context *context = calloc(1, size);
  if (context == NULL)
    return NULL;
  context->plan = plan;
  context->words = (int64_t *)(context + 1);
  context->args = (void **)(context->words + plan->words);
  if (plan->scratch_bytes > 0) {
    context->memory = calloc(1, (size_t)plan->scratch_bytes + GF_ALIGNMENT);
    if (context->memory == NULL) {
      free(context);
      return NULL;
    }
  }
  uintptr_t base = ((uintptr_t)context->memory + GF_ALIGNMENT - 1) & ~(uintptr_t)(GF_ALIGNMENT - 1);
  int64_t at = 0;
  for (int32_t i = 0; i < plan->slots; i++) {
    const gf_slot *slot = &plan->slot[i];
    context->args[i] = &context->words[at];
    gf_describe(&context->words[at], slot, plan->dims);
    if (i >= plan->passed)
      gf_point(&context->words[at], (void *)(base + (uintptr_t)slot->offset));
    at += 3 + 2 * (int64_t)slot->rank;
  }
  return context;
}

static void gf_destroy(gf_context *context) {
  if (context == NULL)
    return;
  free(context->memory);
  free(context);
}

static int gf_check(const gf_plan *plan, void *const *buffers) {
  if (plan->passed > 0 && buffers == NULL)
    return GRAPHFUSE_ERROR_NULL_BUFFER;
  for (int32_t i = 0; i < plan->passed; i++)
    if (buffers[i] == NULL && plan->slot[i].elements > 0)
      return GRAPHFUSE_ERROR_NULL_BUFFER;
  return GRAPHFUSE_OK;
}

static void gf_run(gf_context *context, void *const *buffers) {
  const gf_plan *plan = context->plan;
  for (int32_t i = 0; i < plan->passed; i++)
    gf_point((int64_t *)context->args[i], buffers[i]);
  plan->entry(context->args);
}

static int gf_run_packed(const gf_plan *plan, gf_shared *shared, gf_context *context,
                         void *const *buffers) {
  int status = gf_check(plan, buffers);
  if (status != GRAPHFUSE_OK)
    return status;
  if (context != NULL) {
    gf_run(context, buffers);
    return GRAPHFUSE_OK;
  }
  pthread_mutex_lock(&shared->lock);
  if (shared->context == NULL)
    shared->context = gf_create(plan);
  if (shared->context != NULL)
    gf_run(shared->context, buffers);
  else
    status = GRAPHFUSE_ERROR_OUT_OF_MEMORY;
  pthread_mutex_unlock(&shared->lock);
  return status;
}
"""


def wrapper_source(library: CLibrary, header_name: str, description: bytes) -> str:
    """The C layer of `library`, including the header `header_name` (in the same folder)
    and carrying `description` in DESCRIPTION_SECTION."""
    parts = [
        "/* The C layer of a graphfuse library (graphfuse/runtime/c_api/source.py). */",
        "#include <pthread.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>",
        f'#include "{header_name}"\n',
        _COMMON,
        _description(description),
        _library_functions(library),
        *(_entry(entry, n) for n, entry in enumerate(library.entries)),
    ]
    return "\n".join(parts)


def _description(description: bytes) -> str:
    data = [*description, 0]
    rows = [", ".join(map(str, data[at : at + 24])) for at in range(0, len(data), 24)]
    body = ",\n  ".join(rows)
    return (
        f'__attribute__((used, section("{DESCRIPTION_SECTION}")))\n'
        f"static const unsigned char gf_description[] = {{\n  {body}}};\n"
    )


def c_string(text: str) -> str:
    """`text` as a C string literal: bytes outside printable ASCII, quotes, backslashes
    and `?` (trigraphs) as octal escapes."""
    plain = set(range(0x20, 0x7F)) - {ord('"'), ord("\\"), ord("?")}
    return '"' + "".join(chr(c) if c in plain else f"\\{c:03o}" for c in text.encode()) + '"'


def _library_functions(library: CLibrary) -> str:
    prefix = library.prefix
    text = f"GF_API int {prefix}_abi_version(void) {{ return GRAPHFUSE_ABI_VERSION; }}\n\n"
    if library.threads <= 1:
        return text + (
            f"GF_API int {prefix}_set_threads(int threads) {{\n  (void)threads;\n  return 1;\n}}\n"
        )
    built = library.threads
    return text + (
        f"int {THREADS_SETTER}(int threads);\n\n"
        f"GF_API int {prefix}_set_threads(int threads) {{\n"
        f"  int cap = {THREADS_SETTER}(threads);\n"
        f"  return cap > 0 && cap < {built} ? cap : {built};\n}}\n"
    )


def _slots(entry: CEntry) -> tuple[list[str], list[int]]:
    """The plan's slot initialisers and dims, inputs, outputs, then scratch."""
    offsets, _ = entry.scratch_offsets()
    passed = [*entry.inputs, *entry.outputs]
    slots: list[str] = []
    dims: list[int] = []
    for index, buffer in enumerate([*passed, *entry.scratch]):
        offset = offsets[index - len(passed)] if index >= len(passed) else 0
        slots.append(f"{{{len(buffer.shape)}, {len(dims)}, {buffer.elements}, {offset}}}")
        dims += buffer.shape
    return slots, dims


def _infos(name: str, buffers: tuple[CBuffer, ...], dims: str, first_dim: int) -> tuple[str, str]:
    """A static graphfuse_buffer_info array `name` whose shapes point into the array
    `dims` from `first_dim` on: its definition and how to refer to it."""
    if not buffers:
        return "", "NULL"
    rows: list[str] = []
    at = first_dim
    for b in buffers:
        element = ELEMENTS[b.element]
        shape = f"&{dims}[{at}]" if b.shape else "NULL"
        rows.append(
            f"{{{c_string(b.name)}, GRAPHFUSE_{element.macro}, {element.size}, {len(b.shape)}, "
            f"{shape}, {b.elements}, {b.bytes}}}"
        )
        at += len(b.shape)
    body = ",\n  ".join(rows)
    return f"static const graphfuse_buffer_info {name}[] = {{\n  {body}}};\n", name


def _tables(entry: CEntry, n: int) -> str:
    slots, dims = _slots(entry)
    _, scratch_bytes = entry.scratch_offsets()
    words = sum(3 + 2 * len(b.shape) for b in (*entry.inputs, *entry.outputs, *entry.scratch))
    from graphfuse.runtime.packed_entry import packed_name  # xDSL: only when built

    passed = len(entry.inputs) + len(entry.outputs)
    dims_table = f"static const int64_t gf_dims_{n}[] = {{{', '.join(map(str, dims))}}};\n"
    first_output = sum(len(b.shape) for b in entry.inputs)
    inputs, inputs_ref = _infos(f"gf_inputs_{n}", entry.inputs, f"gf_dims_{n}", 0)
    outputs, outputs_ref = _infos(f"gf_outputs_{n}", entry.outputs, f"gf_dims_{n}", first_output)
    slot_rows = ",\n  ".join(slots)
    return (
        # Declared by its symbol (an MLIR name need not be a C identifier).
        f"void gf_entry_{n}(void **args) __asm__({c_string(packed_name(entry.function))});\n\n"
        + (dims_table if dims else "")
        + (f"static const gf_slot gf_slots_{n}[] = {{\n  {slot_rows}}};\n" if slots else "")
        + f"static const gf_plan gf_plan_{n} = {{{passed}, {len(slots)}, {words}, "
        + f"{scratch_bytes}, {f'gf_slots_{n}' if slots else 'NULL'}, "
        + f"{f'gf_dims_{n}' if dims else 'NULL'}, gf_entry_{n}}};\n"
        + f"static gf_shared gf_shared_{n} = {{PTHREAD_MUTEX_INITIALIZER, NULL}};\n"
        + inputs
        + outputs
        + f"static const graphfuse_entry_info gf_info_{n} = {{{c_string(entry.function)}, "
        + f"{len(entry.inputs)}, {len(entry.outputs)}, {inputs_ref}, {outputs_ref}, "
        + f"{scratch_bytes}}};\n"
    )


def _entry(entry: CEntry, n: int) -> str:
    symbol, context = entry.symbol, f"{entry.symbol}_context"
    buffers = [*entry.inputs, *entry.outputs]
    parameters = [f"const {ELEMENTS[b.element].c_type} *{b.name}" for b in entry.inputs]
    parameters += [f"{ELEMENTS[b.element].c_type} *{b.name}" for b in entry.outputs]
    names = ", ".join(b.name for b in buffers)
    array = ", ".join(f"(void *){b.name}" for b in buffers) or "NULL"
    return (
        _tables(entry, n) + f"\nGF_API {context} *{symbol}_create(void) {{\n"
        f"  return ({context} *)gf_create(&gf_plan_{n});\n}}\n\n"
        f"GF_API void {symbol}_destroy({context} *ctx) {{ gf_destroy((gf_context *)ctx); }}\n\n"
        f"GF_API int {symbol}_run_packed({context} *ctx, void *const *buffers) {{\n"
        f"  return gf_run_packed(&gf_plan_{n}, &gf_shared_{n}, (gf_context *)ctx, buffers);\n"
        "}\n\n"
        f"GF_API int {symbol}_run({', '.join([f'{context} *ctx', *parameters])}) {{\n"
        f"  void *const buffers[] = {{{array}}};\n"
        f"  return {symbol}_run_packed(ctx, buffers);\n}}\n\n"
        f"GF_API int {symbol}({', '.join(parameters) or 'void'}) {{\n"
        f"  return {symbol}_run({', '.join(['NULL', *([names] if names else [])])});\n}}\n\n"
        f"GF_API const graphfuse_entry_info *{symbol}_info(void) {{ return &gf_info_{n}; }}\n"
    )
