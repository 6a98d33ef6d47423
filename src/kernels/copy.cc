// copy: out = in for any dtype (element size from the dtype) and any strides on either side.
// This is how transposed or sliced views are materialised. Elements are split between cores in
// the output's memory order, so each core writes one address range of out.
//
// `in` and `out` may be the same view (a no-op); other overlaps are not supported.
#include <cstring>

#include "kernels/kernel_util.h"
#include "kernels/kernels.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "copy";
enum { kOpIn = 0, kOpOut = 1 };

struct Plan {
  Walk walk;
  int64_t elem_size = 0;
  const char* in = nullptr;
  char* out = nullptr;
};

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 1, 1, err)) return false;
  const sk_tensor_arg& in = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  const int64_t elem_size = sk_dtype_size(in.dtype);
  if (elem_size == 0) return invalid(err, "%s: in has unknown dtype %d", kName, in.dtype);
  if (!check_tensor(in, kName, "in", in.dtype, 0, err) || !check_tensor(out, kName, "out", in.dtype, 0, err)) {
    return false;
  }
  char s1[96];
  char s2[96];
  if (!same_shape(in, out)) {
    return invalid(err, "%s: out shape %s differs from in shape %s", kName, format_shape(out, s1, sizeof s1),
                   format_shape(in, s2, sizeof s2));
  }
  int64_t strides[2][SK_MAX_RANK] = {};
  for (int d = 0; d < in.rank; ++d) {
    strides[kOpIn][d] = in.stride[d];
    strides[kOpOut][d] = out.stride[d];
  }
  if (!make_walk(in.rank, in.shape, 2, strides, kOpOut, 1, &p->walk)) {
    return invalid(err, "%s: out is a view whose elements overlap in memory", kName);
  }
  p->elem_size = elem_size;
  p->in = static_cast<const char*>(in.data);
  p->out = static_cast<char*>(out.data);
  return true;
}

template <int64_t kSize>
void copy_strided(const char* src, int64_t ss, char* dst, int64_t ds, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * ds * kSize, src + i * ss * kSize, kSize);
}

void copy_elements(const char* src, int64_t ss, char* dst, int64_t ds, int64_t n, int64_t size) {
  if (ss == 1 && ds == 1) {
    // memmove: `in` and `out` may be the very same view.
    std::memmove(dst, src, static_cast<size_t>(n * size));
    return;
  }
  switch (size) {
    case 1:
      copy_strided<1>(src, ss, dst, ds, n);
      break;
    case 2:
      copy_strided<2>(src, ss, dst, ds, n);
      break;
    case 4:
      copy_strided<4>(src, ss, dst, ds, n);
      break;
    default:
      copy_strided<8>(src, ss, dst, ds, n);
      break;
  }
}

}  // namespace

int32_t copy_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const Walk& w = p.walk;
  const sk_range r = sk_split_range(w.numel, core->core_id, core->num_cores, kElementAlign);
  const int64_t ss = w.inner_stride(kOpIn);
  const int64_t ds = w.inner_stride(kOpOut);
  const int64_t size = p.elem_size;
  for_each_run(w, r.begin, r.end, [&](const int64_t* off, int64_t len) {
    copy_elements(p.in + off[kOpIn] * size, ss, p.out + off[kOpOut] * size, ds, len, size);
  });
  return SK_OK;
}

int32_t copy_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                    int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.walk.numel, core_id, num_cores, kElementAlign);
  RangeList list(ranges, capacity);
  list.add_walk(p.walk, kOpIn, kOpIn, SK_ACCESS_READ, r.begin, r.end, 1, p.elem_size);
  list.add_walk(p.walk, kOpOut, kOpOut, SK_ACCESS_WRITE, r.begin, r.end, 1, p.elem_size);
  return list.finish();
}

}  // namespace sk::kernels
