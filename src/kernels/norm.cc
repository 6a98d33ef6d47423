// rms_norm.f32: y = x * (1 / sqrt(mean(x^2) + eps)) * weight over the last dimension.
//
// Rows are split across cores and each row is reduced by one core in an order fixed by D
// alone (lane-parallel partial sums, then one fixed tree), so results do not depend on the
// core count or on alignment. x and y may be the same buffer: a row is fully reduced before
// any of it is written.
#include <cmath>

#include "kernels/cpu_isa.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/simd.h"
#include "superkernel/attrs_core.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "rms_norm.f32";
enum { kOpX = 0, kOpWeight = 1, kOpOut = 2 };

using RowFn = void (*)(const float* x, const float* w, float* y, int64_t d, float eps);

// The fallback accumulates in double: it is the slow path anyway, and it makes the fallback
// the most accurate of the levels.
void rms_row_scalar(const float* x, const float* w, float* y, int64_t d, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
  for (int64_t i = 0; i < d; ++i) y[i] = x[i] * inv * w[i];
}

#if SK_KERNELS_X86
SK_TARGET_AVX2 void rms_row_avx2(const float* x, const float* w, float* y, int64_t d, float eps) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps();
  __m256 acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= d; i += 32) {
    const __m256 v0 = _mm256_loadu_ps(x + i);
    const __m256 v1 = _mm256_loadu_ps(x + i + 8);
    const __m256 v2 = _mm256_loadu_ps(x + i + 16);
    const __m256 v3 = _mm256_loadu_ps(x + i + 24);
    acc0 = _mm256_fmadd_ps(v0, v0, acc0);
    acc1 = _mm256_fmadd_ps(v1, v1, acc1);
    acc2 = _mm256_fmadd_ps(v2, v2, acc2);
    acc3 = _mm256_fmadd_ps(v3, v3, acc3);
  }
  for (; i + 8 <= d; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc0 = _mm256_fmadd_ps(v, v, acc0);
  }
  if (i < d) {
    const __m256 v = simd::maskload_ps(x + i, simd::mask8(d - i));
    acc0 = _mm256_fmadd_ps(v, v, acc0);
  }
  const float ss = simd::hsum8(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  const __m256 inv = _mm256_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(d) + eps));
  for (i = 0; i + 8 <= d; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), inv);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(v, _mm256_loadu_ps(w + i)));
  }
  if (i < d) {
    const __m256i m = simd::mask8(d - i);
    const __m256 v = _mm256_mul_ps(simd::maskload_ps(x + i, m), inv);
    simd::maskstore_ps(y + i, m, _mm256_mul_ps(v, simd::maskload_ps(w + i, m)));
  }
}

SK_TARGET_AVX512 void rms_row_avx512(const float* x, const float* w, float* y, int64_t d, float eps) {
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps();
  __m512 acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= d; i += 64) {
    const __m512 v0 = _mm512_loadu_ps(x + i);
    const __m512 v1 = _mm512_loadu_ps(x + i + 16);
    const __m512 v2 = _mm512_loadu_ps(x + i + 32);
    const __m512 v3 = _mm512_loadu_ps(x + i + 48);
    acc0 = _mm512_fmadd_ps(v0, v0, acc0);
    acc1 = _mm512_fmadd_ps(v1, v1, acc1);
    acc2 = _mm512_fmadd_ps(v2, v2, acc2);
    acc3 = _mm512_fmadd_ps(v3, v3, acc3);
  }
  for (; i + 16 <= d; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    acc0 = _mm512_fmadd_ps(v, v, acc0);
  }
  if (i < d) {
    const __m512 v = simd::masked_load_ps(simd::mask16(d - i), x + i);
    acc0 = _mm512_fmadd_ps(v, v, acc0);
  }
  const float ss = simd::hsum16(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
  const __m512 inv = _mm512_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(d) + eps));
  for (i = 0; i + 16 <= d; i += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), inv);
    _mm512_storeu_ps(y + i, _mm512_mul_ps(v, _mm512_loadu_ps(w + i)));
  }
  if (i < d) {
    const __mmask16 m = simd::mask16(d - i);
    const __m512 v = _mm512_mul_ps(simd::masked_load_ps(m, x + i), inv);
    simd::masked_store_ps(y + i, m, _mm512_mul_ps(v, simd::masked_load_ps(m, w + i)));
  }
}
#endif

RowFn select_row_fn() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return rms_row_avx512;
    case kIsaAvx2:
      return rms_row_avx2;
    default:
      break;
  }
#endif
  return rms_row_scalar;
}

struct Plan {
  Walk rows;  // operands: 0 = x, 1 = out
  int64_t d = 0;
  float eps = 0.0f;
  const float* x = nullptr;
  const float* weight = nullptr;
  float* out = nullptr;
};

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 2, 1, err)) return false;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& weight = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(x, kName, "x", SK_DTYPE_F32, 1, err) ||
      !check_tensor(weight, kName, "weight", SK_DTYPE_F32, 1, err) ||
      !check_tensor(out, kName, "out", SK_DTYPE_F32, 1, err)) {
    return false;
  }
  if (args->attrs == nullptr || args->attrs_size < sizeof(sk_rms_norm_attrs)) {
    return invalid(err, "%s: needs sk_rms_norm_attrs (%zu bytes), got %u bytes", kName, sizeof(sk_rms_norm_attrs),
                   args->attrs == nullptr ? 0u : args->attrs_size);
  }
  const float eps = static_cast<const sk_rms_norm_attrs*>(args->attrs)->eps;
  if (!(eps >= 0.0f) || std::isinf(eps)) {
    return invalid(err, "%s: eps %g is not a finite non-negative number", kName, static_cast<double>(eps));
  }
  const int64_t d = x.shape[x.rank - 1];
  char s1[96];
  if (weight.rank != 1 || weight.shape[0] != d) {
    return invalid(err, "%s: weight shape %s is not [%lld]", kName, format_shape(weight, s1, sizeof s1),
                   static_cast<long long>(d));
  }
  if (!last_dim_contiguous(weight)) return invalid(err, "%s: weight must have stride 1", kName);
  if (!make_row_walk(x, out, kName, &p->rows, err)) return false;
  p->d = d;
  p->eps = eps;
  p->x = static_cast<const float*>(x.data);
  p->weight = static_cast<const float*>(weight.data);
  p->out = static_cast<float*>(out.data);
  return true;
}

}  // namespace

int32_t rms_norm_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  if (p.d == 0) return SK_OK;
  const RowFn fn = select_row_fn();
  const sk_range r = sk_split_range(p.rows.numel, core->core_id, core->num_cores, 1);
  const int64_t sx = p.rows.inner_stride(0);
  const int64_t sy = p.rows.inner_stride(1);
  for_each_run(p.rows, r.begin, r.end, [&](const int64_t* off, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      fn(p.x + off[0] + i * sx, p.weight, p.out + off[1] + i * sy, p.d, p.eps);
    }
  });
  return SK_OK;
}

// Early start: warms gamma, which every row of this core reads, while the core waits for x. A
// prefetch uses no value, so gamma may even be produced later (the line is then fetched again).
int32_t rms_norm_f32_prologue(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.rows.numel, core->core_id, core->num_cores, 1);
  if (r.begin < r.end && p.d > 0) prefetch_bytes(p.weight, p.d * static_cast<int64_t>(sizeof(float)));
  return SK_OK;
}

int32_t rms_norm_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                            int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.rows.numel, core_id, num_cores, 1);
  RangeList list(ranges, capacity);
  if (r.begin < r.end && p.d > 0) {
    list.add_walk(p.rows, 0, kOpX, SK_ACCESS_READ, r.begin, r.end, p.d, sizeof(float));
    list.add(kOpWeight, SK_ACCESS_READ, 0, p.d * static_cast<int64_t>(sizeof(float)));
    list.add_walk(p.rows, 1, kOpOut, SK_ACCESS_WRITE, r.begin, r.end, p.d, sizeof(float));
  }
  return list.finish();
}

}  // namespace sk::kernels
