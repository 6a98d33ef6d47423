// softmax.f32 over the last dimension: y = exp(x - max(x)) / sum(exp(x - max(x))).
//
// Rows are split across cores; each row is handled by one core in an order fixed by D alone.
// Subtracting the row maximum keeps exp() in range; masked logits (-inf) give exactly 0.
// x and y may be the same buffer: every element is read before it is overwritten.
#include <cmath>
#include <limits>

#include "kernels/cpu_isa.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/simd.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "softmax.f32";
enum { kOpX = 0, kOpOut = 1 };

using RowFn = void (*)(const float* x, float* y, int64_t d);

void softmax_row_scalar(const float* x, float* y, int64_t d) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < d; ++i) mx = x[i] > mx ? x[i] : mx;
  double sum = 0.0;
  for (int64_t i = 0; i < d; ++i) {
    const float e = std::exp(x[i] - mx);
    y[i] = e;
    sum += e;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < d; ++i) y[i] *= inv;
}

#if SK_KERNELS_X86
SK_TARGET_AVX2 void softmax_row_avx2(const float* x, float* y, int64_t d) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 vmax = neg_inf;
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  if (i < d) {
    const __m256i m = simd::mask8(d - i);
    const __m256 v = _mm256_blendv_ps(neg_inf, simd::maskload_ps(x + i, m), _mm256_castsi256_ps(m));
    vmax = _mm256_max_ps(vmax, v);
  }
  const __m256 mx = _mm256_set1_ps(simd::hmax8(vmax));
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  for (i = 0; i + 16 <= d; i += 16) {
    const __m256 e0 = simd::exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mx));
    const __m256 e1 = simd::exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mx));
    _mm256_storeu_ps(y + i, e0);
    _mm256_storeu_ps(y + i + 8, e1);
    acc0 = _mm256_add_ps(acc0, e0);
    acc1 = _mm256_add_ps(acc1, e1);
  }
  for (; i + 8 <= d; i += 8) {
    const __m256 e = simd::exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mx));
    _mm256_storeu_ps(y + i, e);
    acc0 = _mm256_add_ps(acc0, e);
  }
  if (i < d) {
    const __m256i m = simd::mask8(d - i);
    const __m256 e = _mm256_and_ps(simd::exp8(_mm256_sub_ps(simd::maskload_ps(x + i, m), mx)), _mm256_castsi256_ps(m));
    simd::maskstore_ps(y + i, m, e);
    acc0 = _mm256_add_ps(acc0, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / simd::hsum8(_mm256_add_ps(acc0, acc1)));
  for (i = 0; i + 8 <= d; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
  if (i < d) {
    const __m256i m = simd::mask8(d - i);
    simd::maskstore_ps(y + i, m, _mm256_mul_ps(simd::maskload_ps(y + i, m), inv));
  }
}

SK_TARGET_AVX512 void softmax_row_avx512(const float* x, float* y, int64_t d) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = neg_inf;
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
  if (i < d) vmax = _mm512_max_ps(vmax, simd::masked_load_ps(neg_inf, simd::mask16(d - i), x + i));
  const __m512 mx = _mm512_set1_ps(simd::hmax16(vmax));
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  for (i = 0; i + 32 <= d; i += 32) {
    const __m512 e0 = simd::exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mx));
    const __m512 e1 = simd::exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), mx));
    _mm512_storeu_ps(y + i, e0);
    _mm512_storeu_ps(y + i + 16, e1);
    acc0 = _mm512_add_ps(acc0, e0);
    acc1 = _mm512_add_ps(acc1, e1);
  }
  for (; i + 16 <= d; i += 16) {
    const __m512 e = simd::exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mx));
    _mm512_storeu_ps(y + i, e);
    acc0 = _mm512_add_ps(acc0, e);
  }
  if (i < d) {
    const __mmask16 m = simd::mask16(d - i);
    const __m512 e = _mm512_maskz_mov_ps(m, simd::exp16(_mm512_sub_ps(simd::masked_load_ps(m, x + i), mx)));
    simd::masked_store_ps(y + i, m, e);
    acc0 = _mm512_add_ps(acc0, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / simd::hsum16(_mm512_add_ps(acc0, acc1)));
  for (i = 0; i + 16 <= d; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), inv));
  if (i < d) {
    const __mmask16 m = simd::mask16(d - i);
    simd::masked_store_ps(y + i, m, _mm512_mul_ps(simd::masked_load_ps(m, y + i), inv));
  }
}
#endif

RowFn select_row_fn() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return softmax_row_avx512;
    case kIsaAvx2:
      return softmax_row_avx2;
    default:
      break;
  }
#endif
  return softmax_row_scalar;
}

struct Plan {
  Walk rows;  // operands: 0 = x, 1 = out
  int64_t d = 0;
  const float* x = nullptr;
  float* out = nullptr;
};

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 1, 1, err)) return false;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(x, kName, "x", SK_DTYPE_F32, 1, err) || !check_tensor(out, kName, "out", SK_DTYPE_F32, 1, err) ||
      !make_row_walk(x, out, kName, &p->rows, err)) {
    return false;
  }
  p->d = x.shape[x.rank - 1];
  p->x = static_cast<const float*>(x.data);
  p->out = static_cast<float*>(out.data);
  return true;
}

}  // namespace

int32_t softmax_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  if (p.d == 0) return SK_OK;
  const RowFn fn = select_row_fn();
  const sk_range r = sk_split_range(p.rows.numel, core->core_id, core->num_cores, 1);
  const int64_t sx = p.rows.inner_stride(kOpX);
  const int64_t sy = p.rows.inner_stride(kOpOut);
  for_each_run(p.rows, r.begin, r.end, [&](const int64_t* off, int64_t len) {
    for (int64_t i = 0; i < len; ++i) fn(p.x + off[kOpX] + i * sx, p.out + off[kOpOut] + i * sy, p.d);
  });
  return SK_OK;
}

int32_t softmax_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                           int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.rows.numel, core_id, num_cores, 1);
  RangeList list(ranges, capacity);
  list.add_walk(p.rows, kOpX, kOpX, SK_ACCESS_READ, r.begin, r.end, p.d, sizeof(float));
  // The normalisation pass reads the output back, but only what this core wrote just before:
  // that is not a read of the buffer's previous contents, so it is not listed as one (it would
  // create a false dependency on whoever wrote the buffer before this op).
  list.add_walk(p.rows, kOpOut, kOpOut, SK_ACCESS_WRITE, r.begin, r.end, p.d, sizeof(float));
  return list.finish();
}

}  // namespace sk::kernels
