// moe_router.f32: top-k expert selection with a selection bias (DeepSeek-V3 / LongCat-Flash).
//
//   scores = softmax(logits) or sigmoid(logits)        per token, over all E + Z experts
//   chosen = top_k of (scores + bias), larger first, ties to the lower expert id; with a group
//            limit (DeepSeek-V3), only among the experts of the topk_group groups whose two
//            largest keys sum highest
//   weight = scores[chosen] (optionally / (sum + 1e-20)) * routed_scaling_factor
//
// Tokens are split across cores; one core computes a whole token in an order fixed by the
// expert count, so the result does not depend on the core count. The bias only steers the
// choice (load balancing), it never enters the weights.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu_isa.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/moe_common.h"
#include "kernels/moe_topk.h"
#include "kernels/simd.h"
#include "superkernel/attrs_moe.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "moe_router.f32";
enum { kOpLogits = 0, kOpBias = 1, kOpIds = 2, kOpWeights = 3 };

using ScoreFn = void (*)(const float* x, float* s, int64_t n);

void softmax_scalar(const float* x, float* s, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    s[i] = std::exp(x[i] - mx);
    sum += s[i];
  }
  const auto inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) s[i] *= inv;
}

void sigmoid_scalar(const float* x, float* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) s[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

#if SK_KERNELS_X86
SK_TARGET_AVX2 void softmax_avx2(const float* x, float* s, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 vmax = neg_inf;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(_mm256_loadu_ps(x + i), vmax);
  if (i < n) {
    const __m256i m = simd::mask8(n - i);
    vmax = _mm256_max_ps(_mm256_blendv_ps(neg_inf, simd::maskload_ps(x + i, m), _mm256_castsi256_ps(m)), vmax);
  }
  const __m256 mx = _mm256_set1_ps(simd::hmax8(vmax));
  __m256 acc = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = simd::exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mx));
    _mm256_storeu_ps(s + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (i < n) {
    const __m256i m = simd::mask8(n - i);
    const __m256 e = _mm256_and_ps(simd::exp8(_mm256_sub_ps(simd::maskload_ps(x + i, m), mx)), _mm256_castsi256_ps(m));
    simd::maskstore_ps(s + i, m, e);
    acc = _mm256_add_ps(acc, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / simd::hsum8(acc));
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(s + i, _mm256_mul_ps(_mm256_loadu_ps(s + i), inv));
  if (i < n) {
    const __m256i m = simd::mask8(n - i);
    simd::maskstore_ps(s + i, m, _mm256_mul_ps(simd::maskload_ps(s + i, m), inv));
  }
}

SK_TARGET_AVX2 void sigmoid_avx2(const float* x, float* s, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = simd::exp8(_mm256_sub_ps(zero, _mm256_loadu_ps(x + i)));
    _mm256_storeu_ps(s + i, _mm256_div_ps(one, _mm256_add_ps(one, e)));
  }
  if (i < n) {
    const __m256i m = simd::mask8(n - i);
    const __m256 e = simd::exp8(_mm256_sub_ps(zero, simd::maskload_ps(x + i, m)));
    simd::maskstore_ps(s + i, m, _mm256_div_ps(one, _mm256_add_ps(one, e)));
  }
}

SK_TARGET_AVX512 void softmax_avx512(const float* x, float* s, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = neg_inf;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(_mm512_loadu_ps(x + i), vmax);
  if (i < n) vmax = _mm512_max_ps(simd::masked_load_ps(neg_inf, simd::mask16(n - i), x + i), vmax);
  const __m512 mx = _mm512_set1_ps(simd::hmax16(vmax));
  __m512 acc = _mm512_setzero_ps();
  for (i = 0; i + 16 <= n; i += 16) {
    const __m512 e = simd::exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mx));
    _mm512_storeu_ps(s + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 m = simd::mask16(n - i);
    const __m512 e = _mm512_maskz_mov_ps(m, simd::exp16(_mm512_sub_ps(simd::masked_load_ps(m, x + i), mx)));
    simd::masked_store_ps(s + i, m, e);
    acc = _mm512_add_ps(acc, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / simd::hsum16(acc));
  for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(s + i, _mm512_mul_ps(_mm512_loadu_ps(s + i), inv));
  if (i < n) {
    const __mmask16 m = simd::mask16(n - i);
    simd::masked_store_ps(s + i, m, _mm512_mul_ps(simd::masked_load_ps(m, s + i), inv));
  }
}

SK_TARGET_AVX512 void sigmoid_avx512(const float* x, float* s, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 zero = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = simd::exp16(_mm512_sub_ps(zero, _mm512_loadu_ps(x + i)));
    _mm512_storeu_ps(s + i, _mm512_div_ps(one, _mm512_add_ps(one, e)));
  }
  if (i < n) {
    const __mmask16 m = simd::mask16(n - i);
    const __m512 e = simd::exp16(_mm512_sub_ps(zero, simd::masked_load_ps(m, x + i)));
    simd::masked_store_ps(s + i, m, _mm512_div_ps(one, _mm512_add_ps(one, e)));
  }
}
#endif

ScoreFn select_score_fn(int32_t scoring) {
  const bool sigmoid = scoring == SK_MOE_SCORING_SIGMOID;
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return sigmoid ? sigmoid_avx512 : softmax_avx512;
    case kIsaAvx2:
      return sigmoid ? sigmoid_avx2 : softmax_avx2;
    default:
      break;
  }
#endif
  return sigmoid ? sigmoid_scalar : softmax_scalar;
}

// The attribute blob: sk_moe_router_attrs (no group limit: one group) or
// sk_moe_router_group_attrs, told apart by size.
bool read_router_attrs(const sk_kernel_args* args, sk_moe_router_group_attrs* out) {
  if (args->attrs != nullptr && args->attrs_size == sizeof(sk_moe_router_attrs)) {
    *out = sk_moe_router_group_attrs{};
    std::memcpy(&out->base, args->attrs, sizeof out->base);
    out->n_group = 1;
    out->topk_group = 1;
    return true;
  }
  return moe::read_attrs(args, out);
}

struct Plan {
  sk_moe_router_attrs attrs{};
  int64_t groups = 1;       // n_group
  int64_t topk_groups = 1;  // topk_group
  moe::View2<const float> logits;
  const float* bias = nullptr;
  int64_t bias_stride = 0;
  moe::View2<int32_t> ids;
  moe::View2<float> weights;
  int64_t t = 0;  // tokens
  int64_t n = 0;  // experts, E + Z
  int64_t k = 0;
};

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  using moe::Layout;
  if (!check_arity(args, kName, 2, 2, err)) return false;
  const sk_tensor_arg& logits = args->inputs[kOpLogits];
  const sk_tensor_arg& bias = args->inputs[kOpBias];
  const sk_tensor_arg& ids = args->outputs[0];
  const sk_tensor_arg& weights = args->outputs[1];
  if (!moe::check_2d(logits, kName, "logits", SK_DTYPE_F32, Layout::kRowsDense, err) ||
      !check_tensor(bias, kName, "bias", SK_DTYPE_F32, 1, err) ||
      !moe::check_2d(ids, kName, "topk_ids", SK_DTYPE_I32, Layout::kOutput, err) ||
      !moe::check_2d(weights, kName, "topk_weights", SK_DTYPE_F32, Layout::kOutput, err)) {
    return false;
  }
  sk_moe_router_group_attrs ga{};
  if (!read_router_attrs(args, &ga)) {
    return invalid(err,
                   "%s: attributes must be one sk_moe_router_attrs (%zu bytes) or sk_moe_router_group_attrs (%zu "
                   "bytes), got %u bytes",
                   kName, sizeof(sk_moe_router_attrs), sizeof(sk_moe_router_group_attrs), args->attrs_size);
  }
  p->attrs = ga.base;
  const sk_moe_router_attrs& a = p->attrs;
  p->t = logits.shape[0];
  p->n = logits.shape[1];
  p->k = a.top_k;
  char s1[96];
  char s2[96];
  if (bias.rank != 1 || bias.shape[0] != p->n) {
    return invalid(err, "%s: bias shape %s is not [%lld] (the expert count of logits %s)", kName,
                   format_shape(bias, s1, sizeof s1), static_cast<long long>(p->n),
                   format_shape(logits, s2, sizeof s2));
  }
  if (p->n >= (int64_t{1} << 31))
    return invalid(err, "%s: logits has %lld experts, more than topk_ids (i32) can number", kName,
                   static_cast<long long>(p->n));
  if (a.top_k < 1 || a.top_k > p->n) {
    return invalid(err, "%s: top_k = %d is outside [1, %lld] (the expert count)", kName, a.top_k,
                   static_cast<long long>(p->n));
  }
  if (a.num_real_experts < 0 || a.num_real_experts > p->n) {
    return invalid(err, "%s: num_real_experts = %d is outside [0, %lld]", kName, a.num_real_experts,
                   static_cast<long long>(p->n));
  }
  if (a.scoring != SK_MOE_SCORING_SOFTMAX && a.scoring != SK_MOE_SCORING_SIGMOID) {
    return invalid(err, "%s: scoring = %d is neither 0 (softmax) nor 1 (sigmoid)", kName, a.scoring);
  }
  if (a.normalize != 0 && a.normalize != 1)
    return invalid(err, "%s: normalize = %d is neither 0 nor 1", kName, a.normalize);
  if (!std::isfinite(a.routed_scaling_factor)) {
    return invalid(err, "%s: routed_scaling_factor = %g is not finite", kName,
                   static_cast<double>(a.routed_scaling_factor));
  }
  if (ga.n_group < 1 || p->n % ga.n_group != 0) {
    return invalid(err, "%s: n_group = %d does not divide the %lld experts into equal groups", kName, ga.n_group,
                   static_cast<long long>(p->n));
  }
  if (ga.topk_group < 1 || ga.topk_group > ga.n_group) {
    return invalid(err, "%s: topk_group = %d is outside [1, %d] (n_group)", kName, ga.topk_group, ga.n_group);
  }
  if (static_cast<int64_t>(a.top_k) > ga.topk_group * (p->n / ga.n_group)) {
    return invalid(err, "%s: top_k = %d is more than the %lld experts of topk_group = %d groups of %lld", kName,
                   a.top_k, static_cast<long long>(ga.topk_group * (p->n / ga.n_group)), ga.topk_group,
                   static_cast<long long>(p->n / ga.n_group));
  }
  p->groups = ga.n_group;
  p->topk_groups = ga.topk_group;
  for (const sk_tensor_arg* o : {&ids, &weights}) {
    if (o->shape[0] != p->t || o->shape[1] != p->k) {
      return invalid(err, "%s: %s shape %s is not [%lld, %d] (tokens, top_k)", kName,
                     o == &ids ? "topk_ids" : "topk_weights", format_shape(*o, s1, sizeof s1),
                     static_cast<long long>(p->t), a.top_k);
    }
  }
  p->logits = moe::view2<const float>(logits);
  p->bias = static_cast<const float*>(bias.data);
  p->bias_stride = bias.stride[0];
  p->ids = moe::view2<int32_t>(ids);
  p->weights = moe::view2<float>(weights);
  return true;
}

// One core's scratch: the scores and biased keys of one token, and its top-k keys; with a group
// limit also the group scores, the chosen groups and the keys of their experts.
struct Scratch {
  float* scores = nullptr;
  float* keys = nullptr;
  uint64_t* best = nullptr;
  float* group_score = nullptr;
  uint64_t* group_best = nullptr;
  float* candidates = nullptr;
  uint64_t bytes = 0;
};

// Group limits that leave every group in play change nothing, and need no scratch.
bool group_limited(int64_t groups, int64_t topk_groups) { return topk_groups < groups; }

// For n experts (real and zero-computation), top_k = k and the group limit.
Scratch carve(int64_t n, int64_t k, int64_t groups, int64_t topk_groups, void* base) {
  ScratchCarver c(base);
  Scratch s;
  s.scores = c.take<float>(n);
  s.keys = c.take<float>(n);
  s.best = c.take<uint64_t>(k);
  if (group_limited(groups, topk_groups)) {
    s.group_score = c.take<float>(groups);
    s.group_best = c.take<uint64_t>(std::max<int64_t>(topk_groups, 2));
    s.candidates = c.take<float>(topk_groups * (n / groups));
  }
  s.bytes = c.bytes();
  return s;
}

// Top-k over the experts of the best groups: scores each group by the sum of its two largest
// keys (in ranking order), ranks the groups like experts (ties to the lower group id, NaN
// last), then selects among the chosen groups' experts laid out in increasing id order, so the
// expert ranking and its tie-break are unchanged. best[] receives keys packed with expert ids.
void select_grouped(const Plan& p, const Scratch& sc, uint64_t* best) {
  const int64_t gs = p.n / p.groups;
  for (int64_t g = 0; g < p.groups; ++g) {
    const float* kg = sc.keys + g * gs;
    topk::select(kg, gs, std::min<int64_t>(2, gs), sc.group_best);
    const float first = kg[topk::index_of(sc.group_best[0])];
    sc.group_score[g] = gs > 1 ? first + kg[topk::index_of(sc.group_best[1])] : first;
  }
  topk::select(sc.group_score, p.groups, p.topk_groups, sc.group_best);
  for (int64_t j = 0; j < p.topk_groups; ++j)
    sc.group_best[j] = static_cast<uint64_t>(topk::index_of(sc.group_best[j]));
  std::sort(sc.group_best, sc.group_best + p.topk_groups);
  for (int64_t j = 0; j < p.topk_groups; ++j) {
    std::copy_n(sc.keys + static_cast<int64_t>(sc.group_best[j]) * gs, gs, sc.candidates + j * gs);
  }
  topk::select(sc.candidates, p.topk_groups * gs, p.k, best);
  for (int64_t s = 0; s < p.k; ++s) {
    const int64_t c = topk::index_of(best[s]);
    const int64_t e = static_cast<int64_t>(sc.group_best[c / gs]) * gs + c % gs;
    best[s] = topk::pack(sc.keys[e], e);
  }
}

}  // namespace

// From shapes and attributes only (operands have no address yet). Arguments run will reject need
// no scratch: it reports them before touching any.
uint64_t moe_router_f32_workspace(const sk_kernel_args* args) {
  sk_moe_router_group_attrs a{};
  if (args->num_inputs <= kOpLogits || args->inputs[kOpLogits].rank != 2 || !read_router_attrs(args, &a) ||
      a.base.top_k < 0 || args->inputs[kOpLogits].shape[1] < 0 || a.n_group < 1 || a.topk_group < 1) {
    return 0;
  }
  return carve(args->inputs[kOpLogits].shape[1], a.base.top_k, a.n_group, a.topk_group, nullptr).bytes;
}

int32_t moe_router_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.t, core->core_id, core->num_cores, 1);
  if (r.begin >= r.end) return SK_OK;
  const Scratch sc = carve(p.n, p.k, p.groups, p.topk_groups, core_slice(args, core));
  if (sc.bytes > 0 && (args->workspace == nullptr || args->workspace_size < sc.bytes)) {
    return workspace_too_small(err, kName, args, sc.bytes);
  }
  float* scores = sc.scores;
  float* keys = sc.keys;
  uint64_t* best = sc.best;
  const ScoreFn score = select_score_fn(p.attrs.scoring);
  for (int64_t t = r.begin; t < r.end; ++t) {
    score(p.logits.row(t), scores, p.n);
    for (int64_t e = 0; e < p.n; ++e) keys[e] = scores[e] + p.bias[e * p.bias_stride];
    if (group_limited(p.groups, p.topk_groups)) {
      select_grouped(p, sc, best);
    } else {
      topk::select(keys, p.n, p.k, best);
    }
    float sum = 0.0f;
    for (int64_t s = 0; s < p.k; ++s) sum += scores[topk::index_of(best[s])];
    // DeepSeek-V3's guard: a zero sum (every chosen score underflowed) gives zeros, not NaN.
    const float denom = sum + 1e-20f;
    for (int64_t s = 0; s < p.k; ++s) {
      const int64_t e = topk::index_of(best[s]);
      float w = scores[e];
      if (p.attrs.normalize != 0) w = w / denom;
      p.ids.at(t, s) = static_cast<int32_t>(e);
      p.weights.at(t, s) = w * p.attrs.routed_scaling_factor;
    }
  }
  return SK_OK;
}

int32_t moe_router_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                              int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) return -SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.t, core_id, num_cores, 1);
  RangeList list(ranges, capacity);
  if (r.begin >= r.end) return list.finish();
  moe::add_block(list, kOpLogits, SK_ACCESS_READ, args->inputs[kOpLogits], r.begin, r.end, 0, p.n);
  moe::add_whole(list, kOpBias, SK_ACCESS_READ, args->inputs[kOpBias]);
  moe::add_block(list, kOpIds, SK_ACCESS_WRITE, args->outputs[0], r.begin, r.end, 0, p.k);
  moe::add_block(list, kOpWeights, SK_ACCESS_WRITE, args->outputs[1], r.begin, r.end, 0, p.k);
  return list.finish();
}

}  // namespace sk::kernels
