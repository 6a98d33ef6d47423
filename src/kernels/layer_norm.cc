// layer_norm.f32: y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta over the last dimension.
//
// Two passes over the row (mean, then the mean of squared deviations) rather than E[x^2] -
// E[x]^2, which loses every digit when the mean is large against the spread; the wide paths
// also shift the row by its first element before summing, so that an f32 mean of large values
// does not round away the small deviations either. Rows are split
// across cores and each row is reduced by one core in an order fixed by D alone (lane partial
// sums, then one fixed tree), so results do not depend on the core count or on alignment. x and y
// may be the same buffer: a row is fully reduced before any of it is written.
#include <cmath>

#include "kernels/cpu_isa.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/simd.h"
#include "superkernel/attrs_attention.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "layer_norm.f32";
enum { kOpX = 0, kOpGamma = 1, kOpBeta = 2, kOpOut = 3 };

using RowFn = void (*)(const float* x, const float* g, const float* b, float* y, int64_t d, float eps);

// The fallback reduces in double: it is the slow path anyway, and the most accurate level.
void ln_row_scalar(const float* x, const float* g, const float* b, float* y, int64_t d, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < d; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(d);
  double ss = 0.0;
  for (int64_t i = 0; i < d; ++i) ss += (x[i] - mean) * (x[i] - mean);
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
  for (int64_t i = 0; i < d; ++i) y[i] = static_cast<float>((x[i] - mean) * inv * g[i] + b[i]);
}

#if SK_KERNELS_X86
SK_TARGET_AVX2 void ln_row_avx2(const float* x, const float* g, const float* b, float* y, int64_t d, float eps) {
  const __m256 shift = _mm256_set1_ps(x[0]);
  __m256 a0 = _mm256_setzero_ps();
  __m256 a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps();
  __m256 a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= d; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_sub_ps(_mm256_loadu_ps(x + i), shift));
    a1 = _mm256_add_ps(a1, _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), shift));
    a2 = _mm256_add_ps(a2, _mm256_sub_ps(_mm256_loadu_ps(x + i + 16), shift));
    a3 = _mm256_add_ps(a3, _mm256_sub_ps(_mm256_loadu_ps(x + i + 24), shift));
  }
  for (; i + 8 <= d; i += 8) a0 = _mm256_add_ps(a0, _mm256_sub_ps(_mm256_loadu_ps(x + i), shift));
  if (i < d) {
    const __m256i m = simd::mask8(d - i);
    a0 = _mm256_add_ps(a0, _mm256_and_ps(_mm256_sub_ps(simd::maskload_ps(x + i, m), shift), _mm256_castsi256_ps(m)));
  }
  // mean = shift + mean_s; deviations are (x - shift) - mean_s.
  const float mean_s = simd::hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) / static_cast<float>(d);
  const __m256 mean = _mm256_set1_ps(mean_s);
  a0 = a1 = a2 = a3 = _mm256_setzero_ps();
  for (i = 0; i + 32 <= d; i += 32) {
    const __m256 v0 = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), shift), mean);
    const __m256 v1 = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), shift), mean);
    const __m256 v2 = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 16), shift), mean);
    const __m256 v3 = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 24), shift), mean);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
    a2 = _mm256_fmadd_ps(v2, v2, a2);
    a3 = _mm256_fmadd_ps(v3, v3, a3);
  }
  for (; i + 8 <= d; i += 8) {
    const __m256 v = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), shift), mean);
    a0 = _mm256_fmadd_ps(v, v, a0);
  }
  if (i < d) {
    // Masked-off lanes would add (shift + mean)^2: zero them after the subtraction.
    const __m256i m = simd::mask8(d - i);
    const __m256 v = _mm256_sub_ps(_mm256_sub_ps(simd::maskload_ps(x + i, m), shift), mean);
    a0 = _mm256_fmadd_ps(v, _mm256_and_ps(v, _mm256_castsi256_ps(m)), a0);
  }
  const float ss = simd::hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  const __m256 inv = _mm256_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(d) + eps));
  for (i = 0; i + 8 <= d; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), shift), mean), inv);
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(v, _mm256_loadu_ps(g + i), _mm256_loadu_ps(b + i)));
  }
  if (i < d) {
    const __m256i m = simd::mask8(d - i);
    const __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(simd::maskload_ps(x + i, m), shift), mean), inv);
    simd::maskstore_ps(y + i, m, _mm256_fmadd_ps(v, simd::maskload_ps(g + i, m), simd::maskload_ps(b + i, m)));
  }
}

SK_TARGET_AVX512 void ln_row_avx512(const float* x, const float* g, const float* b, float* y, int64_t d, float eps) {
  const __m512 shift = _mm512_set1_ps(x[0]);
  __m512 a0 = _mm512_setzero_ps();
  __m512 a1 = _mm512_setzero_ps();
  __m512 a2 = _mm512_setzero_ps();
  __m512 a3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= d; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_sub_ps(_mm512_loadu_ps(x + i), shift));
    a1 = _mm512_add_ps(a1, _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), shift));
    a2 = _mm512_add_ps(a2, _mm512_sub_ps(_mm512_loadu_ps(x + i + 32), shift));
    a3 = _mm512_add_ps(a3, _mm512_sub_ps(_mm512_loadu_ps(x + i + 48), shift));
  }
  for (; i + 16 <= d; i += 16) a0 = _mm512_add_ps(a0, _mm512_sub_ps(_mm512_loadu_ps(x + i), shift));
  if (i < d) {
    const __mmask16 m = simd::mask16(d - i);
    a0 = _mm512_add_ps(a0, _mm512_maskz_sub_ps(m, simd::masked_load_ps(m, x + i), shift));
  }
  // mean = shift + mean_s; deviations are (x - shift) - mean_s.
  const float mean_s =
      simd::hsum16(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))) / static_cast<float>(d);
  const __m512 mean = _mm512_set1_ps(mean_s);
  a0 = a1 = a2 = a3 = _mm512_setzero_ps();
  for (i = 0; i + 64 <= d; i += 64) {
    const __m512 v0 = _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), shift), mean);
    const __m512 v1 = _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), shift), mean);
    const __m512 v2 = _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i + 32), shift), mean);
    const __m512 v3 = _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i + 48), shift), mean);
    a0 = _mm512_fmadd_ps(v0, v0, a0);
    a1 = _mm512_fmadd_ps(v1, v1, a1);
    a2 = _mm512_fmadd_ps(v2, v2, a2);
    a3 = _mm512_fmadd_ps(v3, v3, a3);
  }
  for (; i + 16 <= d; i += 16) {
    const __m512 v = _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), shift), mean);
    a0 = _mm512_fmadd_ps(v, v, a0);
  }
  if (i < d) {
    // Masked-off lanes would add (shift + mean)^2: zero them after the subtraction.
    const __mmask16 m = simd::mask16(d - i);
    const __m512 v = _mm512_sub_ps(_mm512_sub_ps(simd::masked_load_ps(m, x + i), shift), mean);
    a0 = _mm512_fmadd_ps(v, _mm512_maskz_mov_ps(m, v), a0);
  }
  const float ss = simd::hsum16(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  const __m512 inv = _mm512_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(d) + eps));
  for (i = 0; i + 16 <= d; i += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), shift), mean), inv);
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(v, _mm512_loadu_ps(g + i), _mm512_loadu_ps(b + i)));
  }
  if (i < d) {
    const __mmask16 m = simd::mask16(d - i);
    const __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(simd::masked_load_ps(m, x + i), shift), mean), inv);
    simd::masked_store_ps(y + i, m, _mm512_fmadd_ps(v, simd::masked_load_ps(m, g + i), simd::masked_load_ps(m, b + i)));
  }
}
#endif

RowFn select_row_fn() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return ln_row_avx512;
    case kIsaAvx2:
      return ln_row_avx2;
    default:
      break;
  }
#endif
  return ln_row_scalar;
}

struct Plan {
  Walk rows;  // operands: 0 = x, 1 = out
  int64_t d = 0;
  float eps = 0.0f;
  const float* x = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float* out = nullptr;
};

bool check_vector(const sk_tensor_arg& t, const char* what, int64_t d, ErrorSink err) {
  char s[96];
  if (t.rank != 1 || t.shape[0] != d) {
    return invalid(err, "%s: %s shape %s is not [%lld]", kName, what, format_shape(t, s, sizeof s),
                   static_cast<long long>(d));
  }
  if (!last_dim_contiguous(t)) return invalid(err, "%s: %s must have stride 1", kName, what);
  return true;
}

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 3, 1, err)) return false;
  const sk_tensor_arg& x = args->inputs[kOpX];
  const sk_tensor_arg& gamma = args->inputs[kOpGamma];
  const sk_tensor_arg& beta = args->inputs[kOpBeta];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(x, kName, "x", SK_DTYPE_F32, 1, err) ||
      !check_tensor(gamma, kName, "gamma", SK_DTYPE_F32, 1, err) ||
      !check_tensor(beta, kName, "beta", SK_DTYPE_F32, 1, err) ||
      !check_tensor(out, kName, "out", SK_DTYPE_F32, 1, err)) {
    return false;
  }
  if (args->attrs == nullptr || args->attrs_size < sizeof(sk_layer_norm_attrs)) {
    return invalid(err, "%s: needs sk_layer_norm_attrs (%zu bytes), got %u bytes", kName, sizeof(sk_layer_norm_attrs),
                   args->attrs == nullptr ? 0u : args->attrs_size);
  }
  const float eps = static_cast<const sk_layer_norm_attrs*>(args->attrs)->eps;
  if (!(eps >= 0.0f) || std::isinf(eps)) {
    return invalid(err, "%s: eps %g is not a finite non-negative number", kName, static_cast<double>(eps));
  }
  const int64_t d = x.shape[x.rank - 1];
  if (!check_vector(gamma, "gamma", d, err) || !check_vector(beta, "beta", d, err)) return false;
  if (!make_row_walk(x, out, kName, &p->rows, err)) return false;
  p->d = d;
  p->eps = eps;
  p->x = static_cast<const float*>(x.data);
  p->gamma = static_cast<const float*>(gamma.data);
  p->beta = static_cast<const float*>(beta.data);
  p->out = static_cast<float*>(out.data);
  return true;
}

}  // namespace

int32_t layer_norm_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
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
      fn(p.x + off[0] + i * sx, p.gamma, p.beta, p.out + off[1] + i * sy, p.d, p.eps);
    }
  });
  return SK_OK;
}

int32_t layer_norm_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                              int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.rows.numel, core_id, num_cores, 1);
  RangeList list(ranges, capacity);
  if (r.begin < r.end && p.d > 0) {
    constexpr int64_t kF = sizeof(float);
    list.add_walk(p.rows, 0, kOpX, SK_ACCESS_READ, r.begin, r.end, p.d, kF);
    list.add(kOpGamma, SK_ACCESS_READ, 0, p.d * kF);
    list.add(kOpBeta, SK_ACCESS_READ, 0, p.d * kF);
    list.add_walk(p.rows, 1, kOpOut, SK_ACCESS_WRITE, r.begin, r.end, p.d, kF);
  }
  return list.finish();
}

}  // namespace sk::kernels
