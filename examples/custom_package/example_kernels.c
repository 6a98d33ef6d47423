/* An out-of-tree kernel package with two element-wise f32 kernels, written against nothing but
 * the C kernel ABI (<superkernel/kernel_abi.h>). See README.md for how to build and call it. */
#include "example_kernels.h"

#include <stdio.h>
#include <string.h>

#include <superkernel/kernel_abi.h>

/* Chunks start on 64-byte boundaries (16 floats) so that no two cores write to the same cache
 * line; the split depends only on the element count and the core count, which keeps it
 * deterministic. */
#define EXAMPLE_ALIGN_ELEMS 16

static int32_t fail(const sk_core_ctx* core, const char* kernel, const char* what) {
  if (core->error_message && core->error_capacity > 0) {
    snprintf(core->error_message, core->error_capacity, "%s: %s", kernel, what);
  }
  return SK_ERR_INVALID_ARGUMENT;
}

/* Both kernels index operands by element number, which is only right for dense tensors; views
 * are rejected instead of being read wrongly (callers materialise them with sk::copy). */
static const char* check_unary_f32(const sk_kernel_args* a) {
  if (a->num_inputs != 1 || a->num_outputs != 1) return "expects one input and one output";
  if (a->inputs[0].dtype != SK_DTYPE_F32 || a->outputs[0].dtype != SK_DTYPE_F32) {
    return "expects an f32 input and an f32 output";
  }
  if (sk_tensor_numel(&a->inputs[0]) != sk_tensor_numel(&a->outputs[0])) {
    return "input and output have different element counts";
  }
  if (!sk_tensor_is_contiguous(&a->inputs[0]) || !sk_tensor_is_contiguous(&a->outputs[0])) {
    return "needs dense row-major operands (materialise views with sk::copy first)";
  }
  return NULL;
}

/* The one place that decides which elements a core owns: run and access must agree on it, or
 * the scheduler would synchronise on ranges the kernel does not actually touch. */
static sk_range core_share(const sk_kernel_args* a, int32_t core_id, int32_t num_cores) {
  return sk_split_range(sk_tensor_numel(&a->outputs[0]), core_id, num_cores, EXAMPLE_ALIGN_ELEMS);
}

static int32_t unary_access(const sk_kernel_args* a, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                            int32_t capacity) {
  sk_range r;
  sk_access_range mine[2];
  int32_t i;
  if (check_unary_f32(a) || num_cores < 1 || core_id < 0 || core_id >= num_cores) return -SK_ERR_INVALID_ARGUMENT;
  r = core_share(a, core_id, num_cores);
  /* Operands are numbered inputs first: 0 is x, 1 is y. */
  mine[0].operand = 0;
  mine[0].mode = SK_ACCESS_READ;
  mine[0].begin = r.begin * (int64_t)sizeof(float);
  mine[0].end = r.end * (int64_t)sizeof(float);
  mine[1] = mine[0];
  mine[1].operand = 1;
  mine[1].mode = SK_ACCESS_WRITE;
  for (i = 0; i < 2 && i < capacity; ++i) ranges[i] = mine[i];
  return 2;
}

static int32_t scale2_run(const sk_kernel_args* a, const sk_core_ctx* core) {
  const char* bad = check_unary_f32(a);
  const float* x;
  float* y;
  sk_range r;
  int64_t i;
  if (bad) return fail(core, SK_EXAMPLE_SCALE2_F32, bad);
  x = (const float*)a->inputs[0].data;
  y = (float*)a->outputs[0].data;
  r = core_share(a, core->core_id, core->num_cores);
  for (i = r.begin; i < r.end; ++i) y[i] = 2.0f * x[i];
  return SK_OK;
}

static int32_t axpb_run(const sk_kernel_args* a, const sk_core_ctx* core) {
  const char* bad = check_unary_f32(a);
  sk_example_axpb_attrs p;
  const float* x;
  float* y;
  sk_range r;
  int64_t i;
  if (bad) return fail(core, SK_EXAMPLE_AXPB_F32, bad);
  if (!a->attrs || a->attrs_size != sizeof(p)) {
    return fail(core, SK_EXAMPLE_AXPB_F32, "attrs must be an sk_example_axpb_attrs {float a, b} (8 bytes)");
  }
  /* The blob is a byte vector on the runtime side, with no alignment promise for floats. */
  memcpy(&p, a->attrs, sizeof(p));
  x = (const float*)a->inputs[0].data;
  y = (float*)a->outputs[0].data;
  r = core_share(a, core->core_id, core->num_cores);
  for (i = r.begin; i < r.end; ++i) y[i] = p.a * x[i] + p.b;
  return SK_OK;
}

static const sk_kernel_desc kExampleKernels[] = {
    /* abi, name, type, flags, run, prologue, tiling, workspace_size, access, sync_all_count */
    {SK_KERNEL_ABI_VERSION, SK_EXAMPLE_SCALE2_F32, SK_KERNEL_VECTOR, SK_FUSIBLE, scale2_run, NULL, NULL, NULL,
     unary_access, 0},
    {SK_KERNEL_ABI_VERSION, SK_EXAMPLE_AXPB_F32, SK_KERNEL_VECTOR, SK_FUSIBLE, axpb_run, NULL, NULL, NULL, unary_access,
     0},
};

static const sk_kernel_package kExamplePackage = {SK_KERNEL_ABI_VERSION, "sk_example_kernels",
                                                  (uint32_t)(sizeof(kExampleKernels) / sizeof(kExampleKernels[0])),
                                                  kExampleKernels};

SK_EXPORT const sk_kernel_package* sk_kernel_package_table(void) { return &kExamplePackage; }
