/*
 * superkernel kernel ABI — the C contract between the runtime and kernel packages.
 *
 * A kernel package is a shared object that exports one function, `sk_kernel_package_table`,
 * returning a table of kernel descriptors. The runtime loads packages with dlopen and never
 * needs their source. Kernels are SPMD: the runtime calls `run(args, core)` once on every core
 * that executes the kernel; each call handles the share of the work that belongs to
 * `core->core_id` out of `core->num_cores`.
 *
 * Example (a complete package with one kernel):
 *
 *   #include <superkernel/kernel_abi.h>
 *
 *   static int32_t scale_run(const sk_kernel_args* a, const sk_core_ctx* c) {
 *     const float* x = (const float*)a->inputs[0].data;
 *     float* y = (float*)a->outputs[0].data;
 *     int64_t n = sk_tensor_numel(&a->outputs[0]);
 *     sk_range r = sk_split_range(n, c->core_id, c->num_cores, 1);
 *     for (int64_t i = r.begin; i < r.end; ++i) y[i] = 2.0f * x[i];
 *     return SK_OK;
 *   }
 *   static const sk_kernel_desc kKernels[] = {
 *     {SK_KERNEL_ABI_VERSION, "scale2.f32", SK_KERNEL_VECTOR, SK_FUSIBLE, scale_run,
 *      NULL, NULL, NULL, NULL, 0},
 *   };
 *   static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "my_pkg", 1, kKernels};
 *   SK_EXPORT const sk_kernel_package* sk_kernel_package_table(void) { return &kPackage; }
 *
 * Rules every kernel follows:
 *  - Determinism: the value of every output element must not depend on `num_cores`. Split work
 *    so that each element is computed entirely by one core, in a fixed order. All execution
 *    modes rely on this to produce bit-identical results.
 *  - `run` must not block on anything but `core->sync_all`, and returns SK_OK or an error code. A
 *    kernel that waits for something outside the launch (a message from another process) polls
 *    it and calls `core->poll` on every round, so the launch's abort and watchdog reach it.
 *  - `access` (optional) describes, per core, the byte ranges of each operand that core reads or
 *    writes in `run`. Ranges must cover every byte touched; they may be conservative. READ means
 *    "depends on the bytes' values from before this op": reading back what this same core wrote
 *    earlier in the same call need not be listed. The runtime may call it with capacity 0 (and
 *    ranges NULL) to ask for the count.
 */
#ifndef SUPERKERNEL_KERNEL_ABI_H_
#define SUPERKERNEL_KERNEL_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of the structures below. */
#define SK_KERNEL_ABI_VERSION 1u

/* Name of the one symbol every package exports. */
#define SK_KERNEL_PACKAGE_SYMBOL "sk_kernel_package_table"

#define SK_MAX_RANK 6

#if defined(__GNUC__)
#define SK_EXPORT __attribute__((visibility("default")))
#else
#define SK_EXPORT
#endif

/* Return codes of kernel entries. Any other non-zero value is a kernel-specific error. */
enum {
  SK_OK = 0,
  SK_ERR_INVALID_ARGUMENT = 1, /* shapes, dtypes or attributes the kernel cannot handle */
  SK_ERR_INTERNAL = 2,
  SK_ERR_ABORTED = 3,  /* sync_all returned because another core failed; pass it on */
  SK_ERR_CAPACITY = 4, /* an output buffer given to a callback is too small */
  SK_ERR_TIMEOUT = 5   /* poll: a wait outside the launch saw no progress for the watchdog's time */
};

/* Element types. The numbering is part of the ABI. */
typedef enum sk_dtype {
  SK_DTYPE_F32 = 0,
  SK_DTYPE_BF16 = 1,
  SK_DTYPE_F16 = 2,
  SK_DTYPE_I8 = 3,
  SK_DTYPE_I32 = 4,
  SK_DTYPE_I64 = 5,
  SK_DTYPE_BOOL = 6 /* one byte holding 0 or 1 */
} sk_dtype;

/* Which core groups run a kernel (the CPU names of Ascend's AIC / AIV / MIX kernel types). */
typedef enum sk_kernel_type {
  SK_KERNEL_CUBE = 0,    /* matrix-heavy: runs on the cube group */
  SK_KERNEL_VECTOR = 1,  /* element-wise / reductions: runs on the vector group */
  SK_KERNEL_MIX_1_1 = 2, /* one cube core per vector core */
  SK_KERNEL_MIX_1_2 = 3  /* one cube core per two vector cores */
} sk_kernel_type;
#define SK_KERNEL_TYPE_COUNT 4

/* Descriptor flags. */
enum {
  SK_FUSIBLE = 1u << 0,            /* may run as a sub-kernel of a super kernel */
  SK_TILING_SINK = 1u << 1,        /* tiling reads input data: run it on the device side when the
                                      producer of its inputs finishes */
  SK_USES_SYNC_ALL = 1u << 2,      /* run() calls core->sync_all exactly `sync_all_count` times */
  SK_WORKSPACE_PER_CORE = 1u << 3, /* workspace_size() is per core: see sk_kernel_args.workspace */
  SK_SYNCS_CORES = 1u << 4,        /* run() may call core->sync_cores: its cores run together */
  /* The runtime may run core k of n as the m calls of cores k*m .. k*m+m-1 of n*m, on other
   * threads, and may abandon a call it started. The kernel promises: `access` lists exactly the
   * bytes each core writes (not more); it writes nothing else (no workspace, no inputs); the
   * addresses it reads and writes depend only on shapes, strides and attributes, never on input
   * values (a call whose inputs change under it computes garbage, but touches nothing else); it
   * writes its outputs only through the operands' `data` pointers, which the runtime may point
   * into scratch memory. The runtime checks with `access` that the m calls write exactly what
   * core k of n writes and read nothing more (sk_split_range splits nest that way), and runs the
   * call whole when they do not. Used to share large calls with a core the scheduler slows. */
  SK_CHUNKABLE = 1u << 5
};
#define SK_KNOWN_FLAGS \
  (SK_FUSIBLE | SK_TILING_SINK | SK_USES_SYNC_ALL | SK_WORKSPACE_PER_CORE | SK_SYNCS_CORES | SK_CHUNKABLE)

/* A strided view of one operand. Strides are in elements; shape[i] * stride[i] may exceed the
 * extent of dense storage only for views (slices, transposes). A stride may be 0 (a broadcast /
 * expand view: every index of that dim reads the same elements) or negative. */
typedef struct sk_tensor_arg {
  void* data;
  int32_t dtype; /* sk_dtype */
  int32_t rank;
  int64_t shape[SK_MAX_RANK];
  int64_t stride[SK_MAX_RANK];
} sk_tensor_arg;

/* Everything a kernel call sees. Built once per op by the runtime ("plan once, run many"). */
typedef struct sk_kernel_args {
  const sk_tensor_arg* inputs;
  const sk_tensor_arg* outputs;
  int32_t num_inputs;
  int32_t num_outputs;
  const void* attrs; /* op attributes (a POD blob whose layout the kernel defines) */
  uint32_t attrs_size;
  uint32_t tiling_size;
  const void* tiling; /* result of the kernel's tiling function, or NULL */
  /* Scratch memory owned by this call, uninitialised, `workspace_size(args)` bytes shared by all
   * cores of the call. With SK_WORKSPACE_PER_CORE there is one slice of `workspace_size` bytes
   * per core instead: core `core_id` owns bytes [core_id * workspace_size, (core_id + 1) *
   * workspace_size). Slices are 64-byte aligned when workspace_size is a multiple of 64. */
  void* workspace;
  uint64_t workspace_size;
} sk_kernel_args;

/* Per-core context of one call. */
typedef struct sk_core_ctx {
  int32_t core_id;   /* 0 .. num_cores-1 among the cores running this kernel */
  int32_t num_cores; /* cores running this kernel */
  /* Full barrier over every core of the launch (the super kernel's cores when fused). Returns
   * SK_OK, or SK_ERR_ABORTED when another core failed: the kernel must then return at once. */
  int32_t (*sync_all)(const struct sk_core_ctx* self);
  void* runtime;       /* opaque, for sync_all */
  char* error_message; /* a kernel may describe an error here (NUL-terminated) */
  uint32_t error_capacity;
  uint32_t flags; /* SK_CORE_* bits: what the runtime tells this call about its circumstances */
  /* For a kernel that waits for something outside the launch (a message from another process):
   * call it on every round of the wait, with the nanoseconds since the wait last made progress.
   * It returns SK_OK to go on waiting (after a pause, or a short sleep once `idle_ns` is past the
   * runtime's spin time, so a waiting core does not starve an oversubscribed machine),
   * SK_ERR_ABORTED when another core of the launch failed (return it at once), or SK_ERR_TIMEOUT
   * when `idle_ns` is past the runtime's watchdog (describe what the wait lacks in error_message
   * and return SK_ERR_TIMEOUT: the run fails as a deadlock). NULL where a context is built by hand
   * (tests calling a kernel directly): bound the wait yourself then. Appended to the structure
   * without a version change: the runtime builds every context, so kernels built against the
   * header before it never read past `flags`. */
  int32_t (*poll)(const struct sk_core_ctx* self, int64_t idle_ns);
  /* Barrier over the `num_cores` cores running this call, and only those: cores of a super kernel
   * that do not run the kernel never join it, so it needs no feeding and no count in the
   * descriptor. Only for kernels with SK_SYNCS_CORES, only from `run`, and every core of the call
   * must make the same number of calls (a core that stops early deadlocks the others until the
   * watchdog fires). Returns SK_OK, or SK_ERR_ABORTED when another core failed (return it at
   * once). NULL where a context is built by hand (tests calling a kernel directly, one core at a
   * time): the kernel must then do without, e.g. let core 0 do all the work. Appended like `poll`. */
  int32_t (*sync_cores)(const struct sk_core_ctx* self);
} sk_core_ctx;

/* sk_core_ctx.flags: this prologue call runs ahead of the waits for its op's inputs (early start),
 * so the core would otherwise idle: a prologue may then warm more (e.g. its whole weight slice)
 * than it would right before its run. */
#define SK_CORE_AHEAD (1u << 0)

/* Operand byte range touched by one core. `operand` numbers inputs first, then outputs. Offsets
 * are relative to the operand's `data` pointer. */
typedef struct sk_access_range {
  int32_t operand;
  int32_t mode; /* SK_ACCESS_READ or SK_ACCESS_WRITE (a read-modify-write lists both) */
  int64_t begin;
  int64_t end; /* exclusive */
} sk_access_range;
enum { SK_ACCESS_READ = 1, SK_ACCESS_WRITE = 2 };

typedef int32_t (*sk_run_fn)(const sk_kernel_args* args, const sk_core_ctx* core);
/* Input-independent part of run (weight prefetch, accumulator set-up). When present the runtime
 * calls it on every core before that core's run, in every execution mode; with early start it
 * may run before the op's inputs are ready, so it must not depend on input values (prefetching
 * weights is fine: a prefetch never uses the values) and must not write outputs. */
typedef int32_t (*sk_prologue_fn)(const sk_kernel_args* args, const sk_core_ctx* core);
/* Host tiling: writes at most `capacity` bytes to `tiling` and sets `*size`. Reads only shapes
 * and attributes, unless the kernel has SK_TILING_SINK. */
typedef int32_t (*sk_tiling_fn)(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
/* Scratch bytes a call needs (per core with SK_WORKSPACE_PER_CORE). Called once at plan time,
 * before any operand has an address (data pointers are NULL): reads only shapes and attributes. */
typedef uint64_t (*sk_workspace_fn)(const sk_kernel_args* args);
/* Writes the ranges core `core_id` of `num_cores` touches. Returns the number of ranges (which
 * may exceed `capacity`: the runtime then calls again with room for all), or a negative error. */
typedef int32_t (*sk_access_fn)(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                                int32_t capacity);

typedef struct sk_kernel_desc {
  uint32_t abi_version;           /* SK_KERNEL_ABI_VERSION */
  const char* name;               /* unique across all loaded packages, e.g. "add.f32" */
  int32_t type;                   /* sk_kernel_type */
  uint32_t flags;                 /* SK_FUSIBLE | ... */
  sk_run_fn run;                  /* required */
  sk_prologue_fn prologue;        /* optional */
  sk_tiling_fn tiling;            /* optional */
  sk_workspace_fn workspace_size; /* optional: no workspace when NULL */
  sk_access_fn access;            /* optional: reads every input, writes every output */
  uint32_t sync_all_count;        /* calls to sync_all per run, with SK_USES_SYNC_ALL */
} sk_kernel_desc;

typedef struct sk_kernel_package {
  uint32_t abi_version; /* SK_KERNEL_ABI_VERSION */
  const char* name;
  uint32_t num_kernels;
  const sk_kernel_desc* kernels;
} sk_kernel_package;

typedef const sk_kernel_package* (*sk_kernel_package_table_fn)(void);

/* ---- Small helpers for kernel authors (header-only, no runtime dependency). ---- */

typedef struct sk_range {
  int64_t begin;
  int64_t end;
} sk_range;

/* Splits [0, n) into `parts` contiguous chunks, each a multiple of `align` (except the last),
 * and returns chunk `part`: units [floor(units * part / parts), floor(units * (part + 1) / parts)).
 * Deterministic: depends only on its arguments. The splits nest: chunk k of `parts` is exactly
 * chunks k*m .. k*m+m-1 of parts*m (what SK_CHUNKABLE relies on). */
static inline sk_range sk_split_range(int64_t n, int32_t part, int32_t parts, int64_t align) {
  sk_range r;
  int64_t units, per, rem, b, e;
  if (align < 1) align = 1;
  if (parts < 1) parts = 1;
  units = (n + align - 1) / align;
  per = units / parts;
  rem = units % parts;
  /* floor(units * part / parts) without the product: rem * part < parts^2 cannot overflow. */
  b = (int64_t)part * per + rem * part / parts;
  e = (int64_t)(part + 1) * per + rem * (part + 1) / parts;
  b *= align;
  e *= align;
  r.begin = b < n ? b : n;
  r.end = e < n ? e : n;
  return r;
}

static inline int64_t sk_tensor_numel(const sk_tensor_arg* t) {
  int64_t n = 1;
  int32_t i;
  for (i = 0; i < t->rank; ++i) n *= t->shape[i];
  return n;
}

static inline int64_t sk_dtype_size(int32_t dtype) {
  switch (dtype) {
    case SK_DTYPE_F32:
      return 4;
    case SK_DTYPE_BF16:
      return 2;
    case SK_DTYPE_F16:
      return 2;
    case SK_DTYPE_I8:
      return 1;
    case SK_DTYPE_I32:
      return 4;
    case SK_DTYPE_I64:
      return 8;
    case SK_DTYPE_BOOL:
      return 1;
    default:
      return 0;
  }
}

/* True when the tensor is dense row-major (strides match its shape). */
static inline int sk_tensor_is_contiguous(const sk_tensor_arg* t) {
  int64_t expect = 1;
  int32_t i;
  for (i = t->rank - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->stride[i] != expect) return 0;
    expect *= t->shape[i];
  }
  return 1;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SUPERKERNEL_KERNEL_ABI_H_ */
