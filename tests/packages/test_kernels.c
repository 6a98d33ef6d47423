/* Kernels that exercise the runtime's rules: failures, sync_all, non-fusible kernels and a
 * deliberate deadlock. Used by the runtime tests only. */
#include <stdio.h>
#include <string.h>

#include "superkernel/kernel_abi.h"

typedef struct {
  int32_t fail_core; /* core id (kernel-local) that fails; -1: none */
} fail_attrs;

static int64_t numel(const sk_tensor_arg* t) { return sk_tensor_numel(t); }

static int32_t access_elementwise(const sk_kernel_args* a, int32_t core, int32_t cores, sk_access_range* r,
                                  int32_t cap) {
  sk_range s = sk_split_range(numel(&a->outputs[0]), core, cores, 16);
  if (cap >= 2) {
    r[0].operand = 0;
    r[0].mode = SK_ACCESS_READ;
    r[0].begin = s.begin * 4;
    r[0].end = s.end * 4;
    r[1].operand = 1;
    r[1].mode = SK_ACCESS_WRITE;
    r[1].begin = s.begin * 4;
    r[1].end = s.end * 4;
  }
  return 2;
}

/* Lies: declares only the first half of the range each core writes (the access checker's test). */
static int32_t access_half_declared(const sk_kernel_args* a, int32_t core, int32_t cores, sk_access_range* r,
                                    int32_t cap) {
  const int32_t n = access_elementwise(a, core, cores, r, cap);
  if (cap >= 2) r[1].end = r[1].begin + (r[1].end - r[1].begin) / 2;
  return n;
}

static int32_t add1_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  const float* x = (const float*)a->inputs[0].data;
  float* y = (float*)a->outputs[0].data;
  sk_range s = sk_split_range(numel(&a->outputs[0]), c->core_id, c->num_cores, 16);
  for (int64_t i = s.begin; i < s.end; ++i) y[i] = x[i] + 1.0f;
  return SK_OK;
}

static int32_t fail_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  const fail_attrs* at = (const fail_attrs*)a->attrs;
  if (at && c->core_id == at->fail_core) {
    if (c->error_message) snprintf(c->error_message, c->error_capacity, "boom on core %d", (int)c->core_id);
    return 42;
  }
  return add1_run(a, c);
}

/* y[i] = x[n-1-i] through the workspace: every core needs what the others copied, hence a sync
 * between the copy and the reversal (and, with `sync_after`, one more at the end). */
typedef int32_t (*core_sync_fn)(const sk_core_ctx*);
static int32_t reverse_with(const sk_kernel_args* a, const sk_core_ctx* c, core_sync_fn sync, int sync_after) {
  const float* x = (const float*)a->inputs[0].data;
  float* y = (float*)a->outputs[0].data;
  float* ws = (float*)a->workspace;
  int64_t n = numel(&a->outputs[0]);
  sk_range s = sk_split_range(n, c->core_id, c->num_cores, 1);
  int32_t rc;
  if (sync == NULL) {
    /* No barrier (the cores run one at a time): read x directly. */
    for (int64_t i = s.begin; i < s.end; ++i) y[i] = x[n - 1 - i];
    return SK_OK;
  }
  for (int64_t i = s.begin; i < s.end; ++i) ws[i] = x[i];
  rc = sync(c);
  if (rc != SK_OK) return rc;
  for (int64_t i = s.begin; i < s.end; ++i) y[i] = ws[n - 1 - i];
  return sync_after ? sync(c) : SK_OK;
}
static int32_t reverse_run(const sk_kernel_args* a, const sk_core_ctx* c) { return reverse_with(a, c, c->sync_all, 0); }
static uint64_t reverse_ws(const sk_kernel_args* a) { return (uint64_t)numel(&a->outputs[0]) * 4u; }
static int32_t reverse_access(const sk_kernel_args* a, int32_t core, int32_t cores, sk_access_range* r, int32_t cap) {
  sk_range s = sk_split_range(numel(&a->outputs[0]), core, cores, 1);
  if (cap >= 2) {
    r[0].operand = 0;
    r[0].mode = SK_ACCESS_READ;
    r[0].begin = 0; /* through the workspace it depends on every core's chunk of x */
    r[0].end = numel(&a->inputs[0]) * 4;
    r[1].operand = 1;
    r[1].mode = SK_ACCESS_WRITE;
    r[1].begin = s.begin * 4;
    r[1].end = s.end * 4;
  }
  return 2;
}

/* reverse_run with sync_cores, a barrier over this call's cores only, called twice (a kernel may
 * call it any number of times): the second one keeps the workspace alive until every core read. */
static int32_t reverse_cores_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  return reverse_with(a, c, c->sync_cores, 1);
}

/* Core 0 calls sync_cores, the others never do: a deadlock the watchdog must report. */
static int32_t hang_cores_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  if (c->core_id == 0 && c->num_cores > 1 && c->sync_cores != NULL) return c->sync_cores(c);
  return add1_run(a, c);
}

/* sync_cores without SK_SYNCS_CORES: an error naming the kernel, not a barrier. */
static int32_t undeclared_cores_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  int32_t rc = c->sync_cores(c);
  return rc != SK_OK ? rc : add1_run(a, c);
}

/* A prologue that calls sync_cores: only run may (the runtime does not run prologues together). */
static int32_t sync_in_prologue(const sk_kernel_args* a, const sk_core_ctx* c) {
  (void)a;
  return c->sync_cores(c);
}

/* y[i] = x[n-1-i] + 1 without sync_all: each core reads the whole input, so a chain of these is an
 * all-to-all dependency at every step (the scheduler's sync choice tests). */
static int32_t flip_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  const float* x = (const float*)a->inputs[0].data;
  float* y = (float*)a->outputs[0].data;
  int64_t n = numel(&a->outputs[0]);
  sk_range s = sk_split_range(n, c->core_id, c->num_cores, 16);
  for (int64_t i = s.begin; i < s.end; ++i) y[i] = x[n - 1 - i] + 1.0f;
  return SK_OK;
}
static int32_t flip_access(const sk_kernel_args* a, int32_t core, int32_t cores, sk_access_range* r, int32_t cap) {
  sk_range s = sk_split_range(numel(&a->outputs[0]), core, cores, 16);
  if (cap >= 2) {
    r[0].operand = 0;
    r[0].mode = SK_ACCESS_READ;
    r[0].begin = (numel(&a->inputs[0]) - s.end) * 4;
    r[0].end = (numel(&a->inputs[0]) - s.begin) * 4;
    r[1].operand = 1;
    r[1].mode = SK_ACCESS_WRITE;
    r[1].begin = s.begin * 4;
    r[1].end = s.end * 4;
  }
  return 2;
}

/* y = x + 1 with a prologue (early start): the prologue stamps the core's workspace slice with the
 * core id, and run fails unless its own slice carries the stamp, so a prologue that did not run on
 * the same core before run, or a slice another op overwrote in between, is an error. */
static uint64_t stamped_ws(const sk_kernel_args* a) {
  (void)a;
  return 64;
}
static int32_t stamped_prologue(const sk_kernel_args* a, const sk_core_ctx* c) {
  unsigned char* slice = (unsigned char*)a->workspace + (uint64_t)c->core_id * a->workspace_size;
  memset(slice, 0x70 + c->core_id, a->workspace_size);
  return SK_OK;
}
static int32_t stamped_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  const unsigned char* slice = (const unsigned char*)a->workspace + (uint64_t)c->core_id * a->workspace_size;
  for (uint64_t i = 0; i < a->workspace_size; ++i) {
    if (slice[i] != (unsigned char)(0x70 + c->core_id)) {
      if (c->error_message)
        snprintf(c->error_message, c->error_capacity, "prologue stamp of core %d missing", (int)c->core_id);
      return SK_ERR_INTERNAL;
    }
  }
  return flip_run(a, c);
}
/* y[i] = x[n-1-i] + a, where a is 1 when this core's prologue ran ahead of its waits
 * (SK_CORE_AHEAD) and 0 otherwise: the prologue records the flag in the core's workspace slice.
 * A probe of what the backends pass to prologues; its results depend on the schedule on purpose. */
static int32_t ahead_probe_prologue(const sk_kernel_args* a, const sk_core_ctx* c) {
  float* slice = (float*)((unsigned char*)a->workspace + (uint64_t)c->core_id * a->workspace_size);
  slice[0] = (c->flags & SK_CORE_AHEAD) ? 1.0f : 0.0f;
  return SK_OK;
}
static int32_t ahead_probe_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  const float* slice = (const float*)((const unsigned char*)a->workspace + (uint64_t)c->core_id * a->workspace_size);
  const float* x = (const float*)a->inputs[0].data;
  float* y = (float*)a->outputs[0].data;
  int64_t n = numel(&a->outputs[0]);
  sk_range s = sk_split_range(n, c->core_id, c->num_cores, 16);
  for (int64_t i = s.begin; i < s.end; ++i) y[i] = x[n - 1 - i] + slice[0];
  return SK_OK;
}

/* A prologue that touches no workspace (early start level 2 may run it in the launch before). */
static int32_t no_op_prologue(const sk_kernel_args* a, const sk_core_ctx* c) {
  (void)a;
  (void)c;
  return SK_OK;
}

/* y = x + 1, through a per-core workspace: every core stamps its whole slice, waits for the others
 * to stamp theirs, and then fails if its slice was overwritten (slices overlapping) or if the
 * runtime broke the slice size or alignment it promises. */
static int32_t core_scratch_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  unsigned char* slice = (unsigned char*)a->workspace + (uint64_t)c->core_id * a->workspace_size;
  const unsigned char stamp = (unsigned char)(0x40 + c->core_id);
  int32_t rc;
  if (a->workspace_size < (uint64_t)numel(&a->outputs[0]) * 4u || a->workspace_size % 64 != 0 ||
      ((uintptr_t)slice & 63) != 0) {
    if (c->error_message) snprintf(c->error_message, c->error_capacity, "bad slice size or alignment");
    return SK_ERR_INTERNAL;
  }
  memset(slice, stamp, a->workspace_size);
  rc = add1_run(a, c);
  if (rc != SK_OK) return rc;
  rc = c->sync_all(c);
  if (rc != SK_OK) return rc;
  for (uint64_t i = 0; i < a->workspace_size; ++i) {
    if (slice[i] != stamp) {
      if (c->error_message)
        snprintf(c->error_message, c->error_capacity, "slice of core %d overwritten at byte %llu", (int)c->core_id,
                 (unsigned long long)i);
      return SK_ERR_INTERNAL;
    }
  }
  return SK_OK;
}
static uint64_t core_scratch_ws(const sk_kernel_args* a) { return (uint64_t)numel(&a->outputs[0]) * 4u; }

/* Core 0 calls sync_all, the others never do: a deadlock the watchdog must report. */
static int32_t hang_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  if (c->core_id == 0 && c->num_cores > 1) return c->sync_all(c);
  return add1_run(a, c);
}

/* Tiling sink: the tiling reads x[0] (input data), so it can only run once x is ready.
 * y[i] = x[i] * x[0]. */
static int32_t scale_first_tiling(const sk_kernel_args* a, void* tiling, uint32_t capacity, uint32_t* size) {
  if (capacity < sizeof(float)) return SK_ERR_CAPACITY;
  memcpy(tiling, a->inputs[0].data, sizeof(float));
  *size = sizeof(float);
  return SK_OK;
}
static int32_t scale_first_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  const float* x = (const float*)a->inputs[0].data;
  float* y = (float*)a->outputs[0].data;
  float scale;
  sk_range s = sk_split_range(numel(&a->outputs[0]), c->core_id, c->num_cores, 16);
  if (a->tiling_size != sizeof(float)) return SK_ERR_INTERNAL;
  memcpy(&scale, a->tiling, sizeof(float));
  for (int64_t i = s.begin; i < s.end; ++i) y[i] = x[i] * scale;
  return SK_OK;
}

/* A tiling sink with per-core scratch sized from the output's shape: the runtime must describe the
 * operands to workspace_size although the tiling runs only later. y[i] = x[i] * x[0] through the
 * scratch. */
static uint64_t scale_first_ws(const sk_kernel_args* a) {
  if (a->num_outputs != 1 || a->outputs == NULL) return 0; /* run then fails: no scratch */
  return (uint64_t)numel(&a->outputs[0]) * 4u;
}
static int32_t scale_first_scratch_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  const float* x = (const float*)a->inputs[0].data;
  float* y = (float*)a->outputs[0].data;
  float* scratch = (float*)((char*)a->workspace + (uint64_t)c->core_id * a->workspace_size);
  float scale;
  sk_range s = sk_split_range(numel(&a->outputs[0]), c->core_id, c->num_cores, 16);
  if (a->tiling_size != sizeof(float) || a->workspace_size < (uint64_t)numel(&a->outputs[0]) * 4u) {
    if (c->error_message) snprintf(c->error_message, c->error_capacity, "no tiling or scratch too small");
    return SK_ERR_INTERNAL;
  }
  memcpy(&scale, a->tiling, sizeof(float));
  for (int64_t i = s.begin; i < s.end; ++i) scratch[i] = x[i] * scale;
  for (int64_t i = s.begin; i < s.end; ++i) y[i] = scratch[i];
  return SK_OK;
}

static const sk_kernel_desc kKernels[] = {
    {SK_KERNEL_ABI_VERSION, "test.add1.f32", SK_KERNEL_VECTOR, SK_FUSIBLE, add1_run, NULL, NULL, NULL,
     access_elementwise, 0},
    {SK_KERNEL_ABI_VERSION, "test.half_declared_add1.f32", SK_KERNEL_VECTOR, SK_FUSIBLE, add1_run, NULL, NULL, NULL,
     access_half_declared, 0},
    {SK_KERNEL_ABI_VERSION, "test.fail.f32", SK_KERNEL_VECTOR, SK_FUSIBLE, fail_run, NULL, NULL, NULL,
     access_elementwise, 0},
    {SK_KERNEL_ABI_VERSION, "test.reverse_sync.f32", SK_KERNEL_VECTOR, SK_FUSIBLE | SK_USES_SYNC_ALL, reverse_run, NULL,
     NULL, reverse_ws, reverse_access, 1},
    {SK_KERNEL_ABI_VERSION, "test.reverse_cores.f32", SK_KERNEL_VECTOR, SK_FUSIBLE | SK_SYNCS_CORES, reverse_cores_run,
     NULL, NULL, reverse_ws, reverse_access, 0},
    {SK_KERNEL_ABI_VERSION, "test.hang_cores.f32", SK_KERNEL_VECTOR, SK_FUSIBLE | SK_SYNCS_CORES, hang_cores_run, NULL,
     NULL, NULL, NULL, 0},
    {SK_KERNEL_ABI_VERSION, "test.undeclared_cores.f32", SK_KERNEL_VECTOR, SK_FUSIBLE, undeclared_cores_run, NULL, NULL,
     NULL, access_elementwise, 0},
    {SK_KERNEL_ABI_VERSION, "test.prologue_cores.f32", SK_KERNEL_VECTOR, SK_FUSIBLE | SK_SYNCS_CORES, add1_run,
     sync_in_prologue, NULL, NULL, access_elementwise, 0},
    {SK_KERNEL_ABI_VERSION, "test.opaque_add1.f32", SK_KERNEL_VECTOR, 0, add1_run, NULL, NULL, NULL, access_elementwise,
     0},
    {SK_KERNEL_ABI_VERSION, "test.core_scratch.f32", SK_KERNEL_VECTOR,
     SK_FUSIBLE | SK_USES_SYNC_ALL | SK_WORKSPACE_PER_CORE, core_scratch_run, NULL, NULL, core_scratch_ws,
     access_elementwise, 1},
    {SK_KERNEL_ABI_VERSION, "test.hang.f32", SK_KERNEL_VECTOR, SK_FUSIBLE, hang_run, NULL, NULL, NULL, NULL, 0},
    {SK_KERNEL_ABI_VERSION, "test.add1_cube.f32", SK_KERNEL_CUBE, SK_FUSIBLE, add1_run, NULL, NULL, NULL,
     access_elementwise, 0},
    {SK_KERNEL_ABI_VERSION, "test.scale_by_first.f32", SK_KERNEL_VECTOR, SK_FUSIBLE | SK_TILING_SINK, scale_first_run,
     NULL, scale_first_tiling, NULL, access_elementwise, 0},
    {SK_KERNEL_ABI_VERSION, "test.scale_by_first_scratch.f32", SK_KERNEL_VECTOR,
     SK_FUSIBLE | SK_TILING_SINK | SK_WORKSPACE_PER_CORE, scale_first_scratch_run, NULL, scale_first_tiling,
     scale_first_ws, access_elementwise, 0},
    {SK_KERNEL_ABI_VERSION, "test.flip.f32", SK_KERNEL_VECTOR, SK_FUSIBLE, flip_run, NULL, NULL, NULL, flip_access, 0},
    {SK_KERNEL_ABI_VERSION, "test.flip_cube.f32", SK_KERNEL_CUBE, SK_FUSIBLE, flip_run, NULL, NULL, NULL, flip_access,
     0},
    {SK_KERNEL_ABI_VERSION, "test.flip_warm.f32", SK_KERNEL_VECTOR, SK_FUSIBLE, flip_run, no_op_prologue, NULL, NULL,
     flip_access, 0},
    {SK_KERNEL_ABI_VERSION, "test.flip_ahead_probe.f32", SK_KERNEL_VECTOR, SK_FUSIBLE | SK_WORKSPACE_PER_CORE,
     ahead_probe_run, ahead_probe_prologue, NULL, stamped_ws, flip_access, 0},
    {SK_KERNEL_ABI_VERSION, "test.flip_stamped.f32", SK_KERNEL_VECTOR, SK_FUSIBLE | SK_WORKSPACE_PER_CORE, stamped_run,
     stamped_prologue, NULL, stamped_ws, flip_access, 0},
};

static const sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "test", sizeof(kKernels) / sizeof(kKernels[0]),
                                           kKernels};

SK_EXPORT const sk_kernel_package* sk_kernel_package_table(void) { return &kPackage; }
