// Shared machinery of the general tensor kernels (tensor_*.cc, the tensor.* kernels of
// docs/kernels_tensor.md): dtype classes and torch's type promotion, block conversion between any
// dtype and the two compute domains (f32 and i64), the element-wise engine (operands broadcast to
// the output, the output's walk split between cores, blocks of kEwBlock elements) and the byte
// bounds of index boxes for access callbacks.
//
//   EwPlan p;
//   if (!plan_ew(args, "tensor.where", 3, kRoles, &p, err)) return SK_ERR_INVALID_ARGUMENT;
//   const sk_range r = ew_split(p, core->core_id, core->num_cores);
//   ew_run_f32(p, args, r, [](const float* const* in, float* out, int64_t n) { ... });
#ifndef SUPERKERNEL_KERNELS_TENSOR_COMMON_H_
#define SUPERKERNEL_KERNELS_TENSOR_COMMON_H_

#include <superkernel/kernel_abi.h>

#include <algorithm>
#include <cstdint>

#include "kernels/kernel_util.h"

namespace sk::kernels::tensor {

// ---- Dtypes ----

inline bool is_float(int32_t d) { return d == SK_DTYPE_F32 || d == SK_DTYPE_BF16 || d == SK_DTYPE_F16; }
inline bool is_int(int32_t d) { return d == SK_DTYPE_I8 || d == SK_DTYPE_I32 || d == SK_DTYPE_I64; }
inline bool is_index(int32_t d) { return d == SK_DTYPE_I32 || d == SK_DTYPE_I64; }
inline bool is_known(int32_t d) { return sk_dtype_size(d) > 0; }

// torch's result_type of two operands where a one-element operand (0-d or [1]) counts as a
// scalar: equal dtypes, or the other side's dtype unless the one-element side is of a higher
// category (bool < integer < float). False when the dtypes differ and neither side is one element.
bool promote(int32_t a, int64_t a_numel, int32_t b, int64_t b_numel, int32_t* out);

// ---- Block conversion ----
//
// n elements starting at p, `stride` elements apart (0 repeats one element, negative walks down).
// Loads widen exactly (i64 -> f32 rounds to nearest even; bool reads any non-zero byte as 1).
// Stores round f32 to bf16 / f16 to nearest even; f32 -> integer truncates toward zero with NaN
// and out-of-range values giving the type's minimum (i8 through i32, keeping the low byte);
// -> bool is v != 0 (NaN is true); i64 -> narrower integers wraps; i64 -> bf16 / f16 goes
// through f32.
void load_f32(int32_t dtype, const void* p, int64_t stride, int64_t n, float* out);
void load_i64(int32_t dtype, const void* p, int64_t stride, int64_t n, int64_t* out);
void store_f32(int32_t dtype, const float* v, int64_t n, void* p, int64_t stride);
void store_i64(int32_t dtype, const int64_t* v, int64_t n, void* p, int64_t stride);

inline const char* elem_ptr(const sk_tensor_arg& t, int64_t offset) {
  return static_cast<const char*>(t.data) + offset * sk_dtype_size(t.dtype);
}
inline char* elem_ptr_mut(const sk_tensor_arg& t, int64_t offset) {
  return static_cast<char*>(t.data) + offset * sk_dtype_size(t.dtype);
}

// ---- Element-wise engine ----

inline constexpr int kMaxEwInputs = 3;
// Elements converted and computed together; a multiple of every vector width, and small enough
// for stack buffers. An element's value never depends on where a block starts.
inline constexpr int64_t kEwBlock = 256;

struct EwPlan {
  Walk walk;  // operands 0 .. n_in-1: the inputs (stride 0 where they broadcast); n_in: out
  int32_t n_in = 0;
  int32_t in_dtype[kMaxEwInputs] = {};
  int32_t out_dtype = 0;
  int64_t in_numel[kMaxEwInputs] = {};
};

// Checks `n_in` inputs and one output of known dtypes, each input broadcasting (right-aligned,
// each dim equal or 1) to the output's shape, and builds the walk over the output. `roles` names
// the inputs in messages.
bool plan_ew(const sk_kernel_args* args, const char* kernel, int n_in, const char* const* roles, EwPlan* p,
             ErrorSink err);

// The core's share of the output's elements (cache-line aligned chunks).
inline sk_range ew_split(const EwPlan& p, int32_t core, int32_t cores) {
  return sk_split_range(p.walk.numel, core, cores, kElementAlign);
}

// Reads of each input and the write of the output over the core's share.
int32_t ew_access(const EwPlan& p, const sk_kernel_args* args, int32_t core, int32_t cores, sk_access_range* ranges,
                  int32_t capacity);

// Host tiling of a kernel whose validated plan `P` is plain data: static modes compute it once,
// so run() skips the checks and walk construction on every call. plan_from_tiling() takes it
// back (false when the call has no tiling of that size, e.g. in a direct call).
template <class P>
int32_t tiling_of(const P& p, void* tiling, uint32_t capacity, uint32_t* size) {
  if (capacity < sizeof(P)) return SK_ERR_CAPACITY;
  __builtin_memcpy(tiling, &p, sizeof(P));
  *size = sizeof(P);
  return SK_OK;
}
template <class P>
bool plan_from_tiling(const sk_kernel_args* args, P* p) {
  if (args->tiling == nullptr || args->tiling_size != sizeof(P)) return false;
  __builtin_memcpy(p, args->tiling, sizeof(P));
  return true;
}

// Calls fn(offsets, strides, n) for blocks of at most kEwBlock elements of [r.begin, r.end):
// offsets[op] is operand op's element offset at the block's first element, strides[op] the
// element distance between consecutive elements of the block.
template <class Fn>
void ew_for_blocks(const EwPlan& p, sk_range r, Fn&& fn) {
  const Walk& w = p.walk;
  const int ops = p.n_in + 1;
  int64_t strides[kMaxWalkOperands];
  for (int op = 0; op < ops; ++op) strides[op] = w.inner_stride(op);
  for_each_run(w, r.begin, r.end, [&](const int64_t* off, int64_t len) {
    int64_t o[kMaxWalkOperands];
    for (int64_t i0 = 0; i0 < len; i0 += kEwBlock) {
      for (int op = 0; op < ops; ++op) o[op] = off[op] + i0 * strides[op];
      fn(static_cast<const int64_t*>(o), static_cast<const int64_t*>(strides), std::min(kEwBlock, len - i0));
    }
  });
}

// Runs op(in, out, n) over the core's share in the f32 domain: in[j] points at n f32 values of
// input j (read in place when it is a contiguous f32 run, converted otherwise), out at n f32
// results (the output itself when it is a contiguous f32 run, converted to its dtype after).
template <class Op>
void ew_run_f32(const EwPlan& p, const sk_kernel_args* args, sk_range r, Op&& op) {
  float buf[kMaxEwInputs][kEwBlock];
  float res[kEwBlock];
  const int n_in = p.n_in;
  const sk_tensor_arg& out = args->outputs[0];
  ew_for_blocks(p, r, [&](const int64_t* off, const int64_t* stride, int64_t n) {
    const float* in[kMaxEwInputs] = {};
    for (int j = 0; j < n_in; ++j) {
      const sk_tensor_arg& t = args->inputs[j];
      if (t.dtype == SK_DTYPE_F32 && stride[j] == 1) {
        in[j] = static_cast<const float*>(t.data) + off[j];
      } else {
        load_f32(t.dtype, elem_ptr(t, off[j]), stride[j], n, buf[j]);
        in[j] = buf[j];
      }
    }
    const bool direct = out.dtype == SK_DTYPE_F32 && stride[n_in] == 1;
    float* dst = direct ? static_cast<float*>(out.data) + off[n_in] : res;
    op(static_cast<const float* const*>(in), dst, n);
    if (!direct) store_f32(out.dtype, res, n, elem_ptr_mut(out, off[n_in]), stride[n_in]);
  });
}

// The same in the i64 domain (exact integer math); results are stored with store_i64.
template <class Op>
void ew_run_i64(const EwPlan& p, const sk_kernel_args* args, sk_range r, Op&& op) {
  int64_t buf[kMaxEwInputs][kEwBlock];
  int64_t res[kEwBlock];
  const int n_in = p.n_in;
  const sk_tensor_arg& out = args->outputs[0];
  ew_for_blocks(p, r, [&](const int64_t* off, const int64_t* stride, int64_t n) {
    const int64_t* in[kMaxEwInputs] = {};
    for (int j = 0; j < n_in; ++j) {
      const sk_tensor_arg& t = args->inputs[j];
      if (t.dtype == SK_DTYPE_I64 && stride[j] == 1) {
        in[j] = static_cast<const int64_t*>(t.data) + off[j];
      } else {
        load_i64(t.dtype, elem_ptr(t, off[j]), stride[j], n, buf[j]);
        in[j] = buf[j];
      }
    }
    op(static_cast<const int64_t* const*>(in), res, n);
    store_i64(out.dtype, res, n, elem_ptr_mut(out, off[n_in]), stride[n_in]);
  });
}

// ---- Access ranges of index boxes ----

// Adds the byte range spanned by the elements of `t` whose index lies in [lo[d], hi[d]] (both
// inclusive) for every dim d; nothing when the box is empty.
void add_box(RangeList& list, int32_t operand, int32_t mode, const sk_tensor_arg& t, const int64_t* lo,
             const int64_t* hi);

// Multi-index of flat row-major position `flat` in `shape` (rank dims).
inline void unflatten(int64_t flat, int rank, const int64_t* shape, int64_t* idx) {
  for (int d = rank - 1; d >= 0; --d) {
    idx[d] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
}

// Dense row-major strides of `shape`.
inline void dense_strides(int rank, const int64_t* shape, int64_t* strides) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d];
  }
}

// Checks an attribute blob's size and copies it.
template <class Attrs>
bool read_attrs(const sk_kernel_args* args, const char* kernel, const char* type, Attrs* out, ErrorSink err) {
  if (args->attrs == nullptr || args->attrs_size != sizeof(Attrs)) {
    return invalid(err, "%s: attributes must be one %s (%zu bytes), got %u bytes", kernel, type, sizeof(Attrs),
                   args->attrs_size);
  }
  __builtin_memcpy(out, args->attrs, sizeof(Attrs));
  return true;
}

}  // namespace sk::kernels::tensor

#endif  // SUPERKERNEL_KERNELS_TENSOR_COMMON_H_
