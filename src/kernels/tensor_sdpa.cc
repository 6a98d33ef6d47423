// tensor.sdpa: torch's scaled_dot_product_attention. q [B, H, Lq, D], k [B, Hkv, Lk, D],
// v [B, Hkv, Lk, Dv], optional mask [B, H, Lq, Lk] (bool: true attends; or q's dtype: added to
// the scores; any strides, 0 where it broadcasts) -> out [B, H, Lq, Dv] in q's dtype. Query head
// h reads kv head h / (H / Hkv). f32 math; bf16 / f16 operands are widened.
//
// Per query row (one core each; cores split the rows (b, h, i) in order):
//   s[j]  = dot(q_i, k_j) * scale (+ mask), the dot product of tensor_dot.h; -inf where a bool
//           mask is false, a float mask is -inf (whatever the score) or, with is_causal, for
//           j > i; keys after the last one the row lets in are not computed at all
//   m     = max_j s[j]; a row with m = -inf (every key masked) gives zeros, as torch since 2.5
//   p[j]  = exp(s[j] - m)  (simd::exp8 with masked tails at avx2, the C library's at scalar)
//   sum   = the eight-partial-sum tree over p (as tensor.reduce's sum)
//   out   = (sum over j in order of p[j] * v_j, one FMA per step, keys with p[j] = 0 skipped) / sum
// So an element's value depends on its row's operands only, not on the core split or layout.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu_isa.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/simd.h"
#include "kernels/tensor_common.h"
#include "kernels/tensor_dot.h"
#include "superkernel/attrs_tensor.h"

namespace sk::kernels {
namespace {

using namespace tensor;

constexpr const char* kName = "tensor.sdpa";
enum { kOpQ = 0, kOpK = 1, kOpV = 2, kOpMask = 3 };

struct SdpaPlan {
  int64_t b = 0, h = 0, lq = 0, d = 0;
  int64_t hkv = 0, lk = 0, dv = 0;
  int64_t group = 1;  // query heads per kv head
  float scale = 1.0f;
  bool causal = false;
  bool has_mask = false;
  bool bool_mask = false;
};

bool plan_sdpa(const sk_kernel_args* args, SdpaPlan* p, ErrorSink err) {
  if (args == nullptr || (args->num_inputs != 3 && args->num_inputs != 4) || args->num_outputs != 1 ||
      args->inputs == nullptr || args->outputs == nullptr) {
    return invalid(err, "%s: expected q, k, v and an optional mask, and one output", kName);
  }
  sk_sdpa_attrs a{};
  if (!read_attrs(args, kName, "sk_sdpa_attrs", &a, err)) return false;
  const sk_tensor_arg& q = args->inputs[kOpQ];
  const sk_tensor_arg& k = args->inputs[kOpK];
  const sk_tensor_arg& v = args->inputs[kOpV];
  const sk_tensor_arg& out = args->outputs[0];
  if (!is_float(q.dtype))
    return invalid(err, "%s: q has dtype %s, expected f32, bf16 or f16", kName, dtype_str(q.dtype));
  if (!check_tensor(q, kName, "q", q.dtype, 4, err) || !check_tensor(k, kName, "k", q.dtype, 4, err) ||
      !check_tensor(v, kName, "v", q.dtype, 4, err) || !check_tensor(out, kName, "out", q.dtype, 4, err)) {
    return false;
  }
  char s1[96];
  char s2[96];
  char s3[96];
  if (q.rank != 4 || k.rank != 4 || v.rank != 4 || out.rank != 4 || k.shape[0] != q.shape[0] ||
      v.shape[0] != q.shape[0] || v.shape[1] != k.shape[1] || v.shape[2] != k.shape[2] || k.shape[3] != q.shape[3] ||
      out.shape[0] != q.shape[0] || out.shape[1] != q.shape[1] || out.shape[2] != q.shape[2] ||
      out.shape[3] != v.shape[3]) {
    return invalid(
        err, "%s: q %s, k %s, v %s are not [B, H, Lq, D], [B, Hkv, Lk, D], [B, Hkv, Lk, Dv] (out [B, H, Lq, Dv])",
        kName, format_shape(q, s1, sizeof s1), format_shape(k, s2, sizeof s2), format_shape(v, s3, sizeof s3));
  }
  if (k.shape[1] == 0 ? q.shape[1] != 0 : q.shape[1] % k.shape[1] != 0) {
    return invalid(err, "%s: %lld query heads are not a multiple of %lld kv heads", kName,
                   static_cast<long long>(q.shape[1]), static_cast<long long>(k.shape[1]));
  }
  if (!(a.scale > 0.0f) || !std::isfinite(a.scale))
    return invalid(err, "%s: scale %g is not finite and > 0", kName, a.scale);
  if (a.is_causal != 0 && a.is_causal != 1) return invalid(err, "%s: is_causal must be 0 or 1", kName);
  p->b = q.shape[0];
  p->h = q.shape[1];
  p->lq = q.shape[2];
  p->d = q.shape[3];
  p->hkv = k.shape[1];
  p->lk = k.shape[2];
  p->dv = v.shape[3];
  p->group = p->hkv > 0 ? p->h / p->hkv : 1;
  p->scale = a.scale;
  p->causal = a.is_causal != 0;
  p->has_mask = args->num_inputs == 4;
  if (p->has_mask) {
    const sk_tensor_arg& mask = args->inputs[kOpMask];
    if (mask.dtype != SK_DTYPE_BOOL && mask.dtype != q.dtype) {
      return invalid(err, "%s: mask has dtype %s, expected bool or q's %s", kName, dtype_str(mask.dtype),
                     dtype_str(q.dtype));
    }
    if (!check_tensor(mask, kName, "mask", mask.dtype, 4, err)) return false;
    if (mask.rank != 4 || mask.shape[0] != p->b || mask.shape[1] != p->h || mask.shape[2] != p->lq ||
        mask.shape[3] != p->lk) {
      return invalid(err, "%s: mask shape %s is not [B, H, Lq, Lk] (expand it: stride 0 costs nothing)", kName,
                     format_shape(mask, s1, sizeof s1));
    }
    if (p->causal) return invalid(err, "%s: a mask and is_causal exclude each other", kName);
    p->bool_mask = mask.dtype == SK_DTYPE_BOOL;
  }
  // (Workspace sizing runs before operands have addresses: nothing to compare then.)
  if (!err.shapes_only && (views_overlap(q, out) || views_overlap(k, out) || views_overlap(v, out) ||
                           (p->has_mask && views_overlap(args->inputs[kOpMask], out)))) {
    return invalid(err, "%s: out must not alias an input", kName);
  }
  return true;
}

struct Scratch {
  float* scores;  // Lk
  float* mask;    // Lk
  float* q;       // D
  float* k;       // D
  float* v;       // Dv
  float* acc;     // Dv
};

Scratch carve(const SdpaPlan& p, void* base, uint64_t* bytes) {
  ScratchCarver c(base);
  Scratch s{c.take<float>(p.lk), c.take<float>(p.lk), c.take<float>(p.d),
            c.take<float>(p.d),  c.take<float>(p.dv), c.take<float>(p.dv)};
  if (bytes != nullptr) *bytes = c.bytes();
  return s;
}

bool use_avx2() {
#if SK_KERNELS_X86
  return current_isa_level() >= kIsaAvx2;
#else
  return false;
#endif
}

int64_t offset4(const sk_tensor_arg& t, int64_t i0, int64_t i1, int64_t i2) {
  return i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2];
}

#if SK_KERNELS_X86
SK_TARGET_AVX2 float exp_and_sum_avx2(float* s, int64_t n, float m) {
  const __m256 mv = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = simd::exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
    _mm256_storeu_ps(s + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (j < n) {
    const __m256i mask = simd::mask8(n - j);
    const __m256 e =
        _mm256_and_ps(simd::exp8(_mm256_sub_ps(simd::maskload_ps(s + j, mask), mv)), _mm256_castsi256_ps(mask));
    simd::maskstore_ps(s + j, mask, e);
    acc = _mm256_add_ps(acc, e);
  }
  return simd::hsum8(acc);
}
#endif

// exp(s - m) in place over [0, n), and the eight-partial-sum total of the results.
float exp_and_sum(float* s, int64_t n, float m) {
#if SK_KERNELS_X86
  if (use_avx2()) return exp_and_sum_avx2(s, n, m);
#endif
  float lanes[kDotLanes] = {};
  for (int64_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - m);
    lanes[j % kDotLanes] = lanes[j % kDotLanes] + s[j];
  }
  return simd::hsum_lanes(lanes, kDotLanes);
}

#if SK_KERNELS_X86
// acc[0, dv) = sum over j of p[j] * v_j (rows `sv` apart, contiguous f32), 32 outputs at a time.
SK_TARGET_AVX2 void weighted_sum_avx2(const float* p, const float* v, int64_t sv, int64_t n, float* acc, int64_t dv) {
  for (int64_t d0 = 0; d0 < dv; d0 += 32) {
    const int64_t w = std::min<int64_t>(32, dv - d0);
    __m256i masks[4];
    __m256 a[4];
    for (int c = 0; c < 4; ++c) {
      masks[c] = simd::mask8(std::clamp<int64_t>(w - 8 * c, 0, 8));
      a[c] = _mm256_setzero_ps();
    }
    for (int64_t j = 0; j < n; ++j) {
      if (p[j] == 0.0f) continue;
      const __m256 pj = _mm256_set1_ps(p[j]);
      const float* row = v + j * sv + d0;
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) a[c] = _mm256_fmadd_ps(pj, simd::maskload_ps(row + 8 * c, masks[c]), a[c]);
    }
    for (int c = 0; c < 4; ++c) simd::maskstore_ps(acc + d0 + 8 * c, masks[c], a[c]);
  }
}

// acc[0, dv) += pj * row: the same FMA per element as weighted_sum_avx2.
SK_TARGET_AVX2 void axpy_avx2(float pj, const float* row, float* acc, int64_t dv) {
  const __m256 pv = _mm256_set1_ps(pj);
  for (int64_t d = 0; d < dv; d += 8) {
    const __m256i m = simd::mask8(std::min<int64_t>(8, dv - d));
    simd::maskstore_ps(acc + d, m, _mm256_fmadd_ps(pv, simd::maskload_ps(row + d, m), simd::maskload_ps(acc + d, m)));
  }
}

SK_TARGET_AVX2 void divide_avx2(float* acc, int64_t dv, float sum) {
  const __m256 sv = _mm256_set1_ps(sum);
  for (int64_t d = 0; d < dv; d += 8) {
    const __m256i m = simd::mask8(std::min<int64_t>(8, dv - d));
    simd::maskstore_ps(acc + d, m, _mm256_div_ps(simd::maskload_ps(acc + d, m), sv));
  }
}
#endif

// One query row into out.
void attend_row(const SdpaPlan& p, const sk_kernel_args* args, const Scratch& s, int64_t b, int64_t h, int64_t i) {
  const sk_tensor_arg& q = args->inputs[kOpQ];
  const sk_tensor_arg& k = args->inputs[kOpK];
  const sk_tensor_arg& v = args->inputs[kOpV];
  const sk_tensor_arg& out = args->outputs[0];
  const int64_t kvh = h / p.group;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  int64_t keys = p.causal ? std::min(p.lk, i + 1) : p.lk;
  if (p.has_mask) {
    const sk_tensor_arg& mask = args->inputs[kOpMask];
    load_f32(mask.dtype, elem_ptr(mask, offset4(mask, b, h, i)), mask.stride[3], keys, s.mask);
    // Keys after the last one the mask lets in are not computed: a decode step's static cache
    // masks the positions not yet written. Their p would be 0, which adds nothing to the lanes of
    // the sum and is skipped by the weighted sum, so the row's bits are the same.
    const float excluded = p.bool_mask ? 0.0f : neg_inf;
    while (keys > 0 && s.mask[keys - 1] == excluded) --keys;
  }
  const bool avx2 = use_avx2();
  // q row as contiguous f32.
  const float* qr = s.q;
  const int64_t q0 = offset4(q, b, h, i);
  if (q.dtype == SK_DTYPE_F32 && (q.stride[3] == 1 || p.d <= 1)) {
    qr = static_cast<const float*>(q.data) + q0;
  } else {
    load_f32(q.dtype, elem_ptr(q, q0), q.stride[3], p.d, s.q);
  }
  // Scores.
  const int64_t k0 = offset4(k, b, kvh, 0);
  const bool k_direct = k.dtype == SK_DTYPE_F32 && (k.stride[3] == 1 || p.d <= 1);
  if (p.d == 0) {
    std::fill(s.scores, s.scores + keys, 0.0f);
  } else if (k_direct) {
    const float* kb = static_cast<const float*>(k.data) + k0;
#if SK_KERNELS_X86
    if (avx2) {
      row_dot_avx2(qr, kb, k.stride[2], s.scores, keys, p.d);
    } else {
      row_scalar(qr, kb, 1, k.stride[2], s.scores, keys, p.d);
    }
#else
    row_scalar(qr, kb, 1, k.stride[2], s.scores, keys, p.d);
#endif
  } else {
    for (int64_t j = 0; j < keys; ++j) {
      load_f32(k.dtype, elem_ptr(k, k0 + j * k.stride[2]), k.stride[3], p.d, s.k);
#if SK_KERNELS_X86
      if (avx2) {
        row_dot_avx2(qr, s.k, 0, s.scores + j, 1, p.d);
        continue;
      }
#endif
      s.scores[j] = dot_scalar(qr, s.k, 1, p.d);
    }
  }
  float m = neg_inf;
  for (int64_t j = 0; j < keys; ++j) {
    float sj = s.scores[j] * p.scale;
    // A false bool entry and a -inf float entry exclude the key, whatever its score.
    if (p.has_mask)
      sj = p.bool_mask ? (s.mask[j] != 0.0f ? sj : neg_inf) : (s.mask[j] == neg_inf ? neg_inf : sj + s.mask[j]);
    s.scores[j] = sj;
    m = sj > m ? sj : m;
  }
  const int64_t o0 = offset4(out, b, h, i);
  const bool out_direct = out.dtype == SK_DTYPE_F32 && (out.stride[3] == 1 || p.dv <= 1);
  float* acc = out_direct ? static_cast<float*>(out.data) + o0 : s.acc;
  if (!(m > neg_inf)) {
    std::fill(acc, acc + p.dv, 0.0f);  // every key masked (or no key at all): zeros, as torch
  } else {
    const float sum = exp_and_sum(s.scores, keys, m);
    const int64_t v0 = offset4(v, b, kvh, 0);
    const bool v_direct = v.dtype == SK_DTYPE_F32 && (v.stride[3] == 1 || p.dv <= 1);
#if SK_KERNELS_X86
    if (avx2 && v_direct) {
      weighted_sum_avx2(s.scores, static_cast<const float*>(v.data) + v0, v.stride[2], keys, acc, p.dv);
    } else if (avx2) {
      std::fill(acc, acc + p.dv, 0.0f);
      for (int64_t j = 0; j < keys; ++j) {
        if (s.scores[j] == 0.0f) continue;
        load_f32(v.dtype, elem_ptr(v, v0 + j * v.stride[2]), v.stride[3], p.dv, s.v);
        axpy_avx2(s.scores[j], s.v, acc, p.dv);
      }
    }
    if (avx2) {
      divide_avx2(acc, p.dv, sum);
    }
#endif
    if (!avx2) {
      std::fill(acc, acc + p.dv, 0.0f);
      for (int64_t j = 0; j < keys; ++j) {
        const float pj = s.scores[j];
        if (pj == 0.0f) continue;
        const float* row = s.v;
        if (v_direct) {
          row = static_cast<const float*>(v.data) + v0 + j * v.stride[2];
        } else {
          load_f32(v.dtype, elem_ptr(v, v0 + j * v.stride[2]), v.stride[3], p.dv, s.v);
        }
        for (int64_t d = 0; d < p.dv; ++d) acc[d] = acc[d] + pj * row[d];
      }
      for (int64_t d = 0; d < p.dv; ++d) acc[d] = acc[d] / sum;
    }
  }
  if (!out_direct) store_f32(out.dtype, s.acc, p.dv, elem_ptr_mut(out, o0), out.stride[3]);
}

sk_range row_split(const SdpaPlan& p, int32_t core, int32_t cores) {
  return sk_split_range(p.b * p.h * p.lq, core, cores, 1);
}

}  // namespace

uint64_t tensor_sdpa_workspace(const sk_kernel_args* args) {
  SdpaPlan p;
  if (!plan_sdpa(args, &p, ErrorSink{nullptr, 0, /*shapes_only=*/true})) return 0;
  uint64_t bytes = 0;
  carve(p, nullptr, &bytes);
  return bytes;
}

int32_t tensor_sdpa_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  SdpaPlan p;
  if (!check_core(core, kName, err) || !plan_sdpa(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  uint64_t need = 0;
  carve(p, nullptr, &need);
  if (args->workspace == nullptr || args->workspace_size < need) return workspace_too_small(err, kName, args, need);
  const Scratch s = carve(p, core_slice(args, core), nullptr);
  const sk_range r = row_split(p, core->core_id, core->num_cores);
  for (int64_t row = r.begin; row < r.end; ++row) {
    const int64_t i = row % p.lq;
    const int64_t h = row / p.lq % p.h;
    const int64_t b = row / (p.lq * p.h);
    attend_row(p, args, s, b, h, i);
  }
  return SK_OK;
}

int32_t tensor_sdpa_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                           int32_t capacity) {
  SdpaPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_sdpa(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = row_split(p, core_id, num_cores);
  RangeList list(ranges, capacity);
  if (r.begin >= r.end) return list.finish();
  const int32_t n_in = args->num_inputs;
  // Per (b, h) group of the core's rows: q / mask / out rows i0..i1, k and v of the kv head whole
  // (up to the last key a causal row reads). One operand after the other, so that adjacent ranges
  // merge and repeated ones (heads sharing a kv head, broadcast masks) are listed once.
  for (int operand = 0; operand < n_in + 1; ++operand) {
    const sk_tensor_arg& t = operand < n_in ? args->inputs[operand] : args->outputs[0];
    const int32_t mode = operand < n_in ? SK_ACCESS_READ : SK_ACCESS_WRITE;
    int64_t last_lo = -1;
    int64_t last_hi = -1;
    const int64_t groups_end = (r.end - 1) / p.lq;
    for (int64_t g = r.begin / p.lq; g <= groups_end; ++g) {
      const int64_t b = g / p.h;
      const int64_t h = g % p.h;
      const int64_t i0 = std::max(r.begin, g * p.lq) - g * p.lq;
      const int64_t i1 = std::min(r.end, (g + 1) * p.lq) - g * p.lq - 1;
      int64_t lo[4] = {b, h, i0, 0};
      int64_t hi[4] = {b, h, i1, t.shape[3] - 1};
      if (operand == kOpK || operand == kOpV) {
        const int64_t keys = p.causal ? std::min(p.lk, i1 + 1) : p.lk;
        lo[1] = hi[1] = h / p.group;
        lo[2] = 0;
        hi[2] = keys - 1;
        if (operand == kOpK && p.d == 0) continue;
      }
      if (operand == kOpMask && p.has_mask) hi[3] = p.lk - 1;
      // Byte bounds of the box, the same arithmetic as add_box.
      int64_t a = 0;
      int64_t z = 0;
      bool empty = false;
      for (int d = 0; d < 4; ++d) {
        if (hi[d] < lo[d]) empty = true;
        const int64_t x = lo[d] * t.stride[d];
        const int64_t y = hi[d] * t.stride[d];
        a += std::min(x, y);
        z += std::max(x, y);
      }
      if (empty) continue;
      const int64_t elem = sk_dtype_size(t.dtype);
      if (a * elem == last_lo && (z + 1) * elem == last_hi) continue;
      last_lo = a * elem;
      last_hi = (z + 1) * elem;
      list.add(operand, mode, last_lo, last_hi);
    }
  }
  return list.finish();
}

}  // namespace sk::kernels
