// tensor.reduce (sum, mean, max, min, argmax, argmin over a set of dims) and tensor.cumsum
// (running sum along one dim). x of any dtype and strides.
//
// Reduce: output elements are split between cores in the output's memory order; each is reduced
// by one core over the reduced elements in row-major order of the reduced dims (x's logical
// order, whatever its strides). Float sums keep eight partial sums, element i of that sequence
// going to sum i mod 8 with one f32 add, combined by simd::hsum_lanes' fixed tree; a vector lane
// add and a scalar add of the same values round alike, so every ISA level and layout gives the
// same bits. Max / min use the same lanes (NaN anywhere gives NaN), argmax / argmin scan for the
// first best element (NaN counts as largest for argmax and smallest for argmin). Integer and
// bool sums, max and min are exact in i64.
//
// Cumsum: the slabs x[o, :, ...] of the dims before `dim` are split between cores; each line
// along `dim` is summed in order (f32 for floats, exact i64 otherwise), each running value rounded
// to out's dtype.
#include <cmath>
#include <limits>

#include "kernels/cpu_isa.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "kernels/tensor_common.h"
#include "superkernel/attrs_tensor.h"

namespace sk::kernels {
namespace {

using namespace tensor;

constexpr const char* kReduce = "tensor.reduce";
constexpr const char* kCumsum = "tensor.cumsum";
constexpr int kLanes = 8;

// ---- The reduced sequence ----

// The reduced dims of x in logical order, adjacent ones merged where that keeps the order.
struct Sequence {
  int rank = 0;
  int64_t shape[SK_MAX_RANK] = {};
  int64_t stride[SK_MAX_RANK] = {};
  int64_t count = 1;
  int64_t span_lo = 0;  // element offsets (relative to an output's base) the sequence reaches
  int64_t span_hi = 0;
};

// Calls fn(offset, stride, n) for the runs of the sequence (innermost dim), in order.
template <class Fn>
void for_each_seq_run(const Sequence& s, int64_t base, Fn&& fn) {
  if (s.count == 0) return;
  if (s.rank == 0) {
    fn(base, 1, 1);
    return;
  }
  const int inner = s.rank - 1;
  const int64_t runs = s.count / s.shape[inner];
  int64_t idx[SK_MAX_RANK] = {};
  for (int64_t r = 0; r < runs; ++r) {
    int64_t off = base;
    for (int d = 0; d < inner; ++d) off += idx[d] * s.stride[d];
    fn(off, s.stride[inner], s.shape[inner]);
    for (int d = inner - 1; d >= 0; --d) {
      if (++idx[d] < s.shape[d]) break;
      idx[d] = 0;
    }
  }
}

struct ReducePlan {
  Walk walk;  // over the output elements: operand 0 = x (its base per output), 1 = out
  Sequence seq;
  int32_t op = 0;
  int32_t x_dtype = 0;
  int32_t out_dtype = 0;
};

int32_t expected_reduce_out(int32_t op, int32_t x) {
  if (op == SK_REDUCE_ARGMAX || op == SK_REDUCE_ARGMIN) return SK_DTYPE_I64;
  if (op == SK_REDUCE_SUM && !is_float(x)) return SK_DTYPE_I64;
  return x;
}

bool plan_reduce(const sk_kernel_args* args, ReducePlan* p, ErrorSink err) {
  sk_reduce_attrs a{};
  if (!check_arity(args, kReduce, 1, 1, err) || !read_attrs(args, kReduce, "sk_reduce_attrs", &a, err)) return false;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  if (!is_known(x.dtype) || !check_tensor(x, kReduce, "x", x.dtype, 0, err)) {
    return is_known(x.dtype) ? false : invalid(err, "%s: x has unknown dtype %d", kReduce, x.dtype);
  }
  if (a.op < 0 || a.op >= SK_REDUCE_OP_COUNT) return invalid(err, "%s: unknown op %d", kReduce, a.op);
  if ((a.dims_mask >> x.rank) != 0) {
    return invalid(err, "%s: dims_mask 0x%x names dims beyond x's rank %d", kReduce, a.dims_mask, x.rank);
  }
  const int32_t want = expected_reduce_out(a.op, x.dtype);
  if (!check_tensor(out, kReduce, "out", want, 0, err)) return false;
  if (a.op == SK_REDUCE_MEAN && !is_float(x.dtype)) return invalid(err, "%s: mean needs a float x", kReduce);
  const bool selects = a.op != SK_REDUCE_SUM && a.op != SK_REDUCE_MEAN;
  if (selects && x.dtype == SK_DTYPE_BOOL) return invalid(err, "%s: op %d of a bool x", kReduce, a.op);
  // Kept dims (out's dims, with the reduced ones as 1 under keepdim) and the sequence.
  int64_t kept_shape[SK_MAX_RANK] = {};
  int64_t strides[2][SK_MAX_RANK] = {};
  int kept = 0;
  Sequence& s = p->seq;
  s = Sequence{};
  int out_d = 0;
  for (int d = 0; d < x.rank; ++d) {
    if (a.dims_mask & (1u << d)) {
      s.shape[s.rank] = x.shape[d];
      s.stride[s.rank] = x.stride[d];
      ++s.rank;
      s.count *= x.shape[d];
      if (a.keepdim) {
        if (out_d >= out.rank || out.shape[out_d] != 1) return invalid(err, "%s: out's shape does not match", kReduce);
        ++out_d;
      }
      continue;
    }
    if (out_d >= out.rank || out.shape[out_d] != x.shape[d]) {
      char s1[96];
      char s2[96];
      return invalid(err, "%s: out shape %s does not match x shape %s reduced over dims 0x%x%s", kReduce,
                     format_shape(out, s1, sizeof s1), format_shape(x, s2, sizeof s2), a.dims_mask,
                     a.keepdim ? " (keepdim)" : "");
    }
    kept_shape[kept] = x.shape[d];
    strides[0][kept] = x.stride[d];
    strides[1][kept] = out.stride[out_d];
    ++kept;
    ++out_d;
  }
  if (out_d != out.rank) return invalid(err, "%s: out has rank %d, expected %d", kReduce, out.rank, out_d);
  if (selects && s.count == 0) return invalid(err, "%s: op %d of an empty reduction has no result", kReduce, a.op);
  // Merge sequence dims that are contiguous with their inner neighbour (order preserved).
  int merged = 0;
  for (int d = 0; d < s.rank; ++d) {
    if (s.shape[d] == 1 && s.rank > 1) continue;
    if (merged > 0 && s.stride[merged - 1] == s.stride[d] * s.shape[d]) {
      s.shape[merged - 1] *= s.shape[d];
      s.stride[merged - 1] = s.stride[d];
    } else {
      s.shape[merged] = s.shape[d];
      s.stride[merged] = s.stride[d];
      ++merged;
    }
  }
  s.rank = s.count == 0 ? 0 : merged;
  for (int d = 0; d < s.rank; ++d) {
    const int64_t span = (s.shape[d] - 1) * s.stride[d];
    s.span_lo += std::min<int64_t>(0, span);
    s.span_hi += std::max<int64_t>(0, span);
  }
  if (!make_walk(kept, kept_shape, 2, strides, 1, 1, &p->walk)) {
    return invalid(err, "%s: out is a view whose elements overlap in memory", kReduce);
  }
  p->op = a.op;
  p->x_dtype = x.dtype;
  p->out_dtype = out.dtype;
  return true;
}

// ---- Float reductions over the lanes ----

struct Lanes {
  float v[kLanes];
  int64_t pos = 0;  // sequence position of the next element
  bool nan = false;
};

enum class LaneOp { kSum, kMax, kMin };

template <LaneOp kOp>
inline float lane_step(float lane, float x) {
  if constexpr (kOp == LaneOp::kSum) return lane + x;
  if constexpr (kOp == LaneOp::kMax) return x > lane ? x : lane;  // MAXPS(x, lane)
  return x < lane ? x : lane;                                     // MINPS(x, lane)
}

template <LaneOp kOp>
void lanes_scalar(Lanes& l, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float& lane = l.v[(l.pos + i) % kLanes];
    lane = lane_step<kOp>(lane, x[i]);
    if constexpr (kOp != LaneOp::kSum) l.nan |= x[i] != x[i];
  }
  l.pos += n;
}

#if SK_KERNELS_X86
template <LaneOp kOp>
SK_TARGET_AVX2 void lanes_avx2(Lanes& l, const float* x, int64_t n) {
  // Scalar steps up to a lane-aligned position, then whole vectors (lane j of the vector is
  // sequence position = j mod 8), then the rest: the same adds / compares on the same lanes.
  int64_t i = 0;
  const int64_t head = std::min<int64_t>(n, (kLanes - l.pos % kLanes) % kLanes);
  lanes_scalar<kOp>(l, x, head);
  i = head;
  if (n - i >= kLanes) {
    __m256 acc = _mm256_loadu_ps(l.v);
    __m256 nan = _mm256_setzero_ps();
    for (; i + kLanes <= n; i += kLanes) {
      const __m256 v = _mm256_loadu_ps(x + i);
      if constexpr (kOp == LaneOp::kSum) {
        acc = _mm256_add_ps(acc, v);
      } else {
        acc = kOp == LaneOp::kMax ? _mm256_max_ps(v, acc) : _mm256_min_ps(v, acc);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
      }
    }
    _mm256_storeu_ps(l.v, acc);
    if constexpr (kOp != LaneOp::kSum) l.nan |= _mm256_movemask_ps(nan) != 0;
    l.pos += (n - head) / kLanes * kLanes;
  }
  lanes_scalar<kOp>(l, x + i, n - i);
}
#endif

template <LaneOp kOp>
void feed_lanes(Lanes& l, const float* x, int64_t n) {
#if SK_KERNELS_X86
  if (current_isa_level() >= kIsaAvx2) {
    lanes_avx2<kOp>(l, x, n);
    return;
  }
#endif
  lanes_scalar<kOp>(l, x, n);
}

template <LaneOp kOp>
float finish_lanes(const Lanes& l) {
  if constexpr (kOp == LaneOp::kSum) {
    return simd::hsum_lanes(l.v, kLanes);
  } else {
    if (l.nan) return std::numeric_limits<float>::quiet_NaN();
    float t[kLanes];
    for (int i = 0; i < kLanes; ++i) t[i] = l.v[i];
    for (int half = kLanes / 2; half >= 1; half /= 2) {
      for (int i = 0; i < half; ++i) t[i] = lane_step<kOp>(t[i], t[i + half]);
    }
    return t[0];
  }
}

// Feeds the reduced sequence of one output (x base offset `base`) as f32 runs.
template <class Feed>
void feed_sequence(const ReducePlan& p, const sk_tensor_arg& x, int64_t base, Feed&& feed) {
  float buf[kEwBlock];
  for_each_seq_run(p.seq, base, [&](int64_t off, int64_t stride, int64_t n) {
    if (x.dtype == SK_DTYPE_F32 && stride == 1) {
      feed(static_cast<const float*>(x.data) + off, n);
      return;
    }
    for (int64_t i0 = 0; i0 < n; i0 += kEwBlock) {
      const int64_t m = std::min(kEwBlock, n - i0);
      load_f32(x.dtype, elem_ptr(x, off + i0 * stride), stride, m, buf);
      feed(static_cast<const float*>(buf), m);
    }
  });
}

template <LaneOp kOp>
float reduce_lanes(const ReducePlan& p, const sk_tensor_arg& x, int64_t base) {
  Lanes l;
  const float init = kOp == LaneOp::kSum   ? 0.0f
                     : kOp == LaneOp::kMax ? -std::numeric_limits<float>::infinity()
                                           : std::numeric_limits<float>::infinity();
  for (float& v : l.v) v = init;
  feed_sequence(p, x, base, [&](const float* v, int64_t n) { feed_lanes<kOp>(l, v, n); });
  return finish_lanes<kOp>(l);
}

// ---- Arg reductions ----

struct ArgBest {
  float value = 0.0f;
  int64_t index = -1;
};

// Takes x (at sequence position `index`) when it beats `best`: strictly better, or NaN over a
// number; the first of equals stays.
template <bool kMax>
inline bool arg_better(float x, float best) {
  if (x != x) return best == best;
  return kMax ? x > best : x < best;
}

template <bool kMax>
void arg_scalar(ArgBest& b, const float* x, int64_t n, int64_t pos) {
  for (int64_t i = 0; i < n; ++i) {
    if (b.index < 0 || arg_better<kMax>(x[i], b.value)) {
      b.value = x[i];
      b.index = pos + i;
    }
  }
}

#if SK_KERNELS_X86
// Per lane: the first best element of the positions it sees; then the best lane, lowest index
// first among equals. Exact, so it agrees with arg_scalar.
template <bool kMax>
SK_TARGET_AVX2 void arg_avx2(ArgBest& b, const float* x, int64_t n, int64_t pos) {
  if (n < 2 * kLanes || pos + n > (int64_t{1} << 30)) {
    arg_scalar<kMax>(b, x, n, pos);
    return;
  }
  __m256 best = _mm256_loadu_ps(x);
  __m256i best_i = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i cur_i = best_i;
  const __m256i step = _mm256_set1_epi32(kLanes);
  int64_t i = kLanes;
  for (; i + kLanes <= n; i += kLanes) {
    cur_i = _mm256_add_epi32(cur_i, step);
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 v_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    const __m256 best_num = _mm256_cmp_ps(best, best, _CMP_ORD_Q);
    const __m256 better =
        _mm256_or_ps(_mm256_cmp_ps(v, best, kMax ? _CMP_GT_OQ : _CMP_LT_OQ), _mm256_and_ps(v_nan, best_num));
    best = _mm256_blendv_ps(best, v, better);
    best_i = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(best_i), _mm256_castsi256_ps(cur_i), better));
  }
  alignas(32) float lv[kLanes];
  alignas(32) int32_t li[kLanes];
  _mm256_store_ps(lv, best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(li), best_i);
  ArgBest lanes;
  for (int l = 0; l < kLanes; ++l) {
    const bool equal = lv[l] == lanes.value || (lv[l] != lv[l] && lanes.value != lanes.value);
    if (lanes.index < 0 || arg_better<kMax>(lv[l], lanes.value) || (equal && li[l] < lanes.index)) {
      lanes.value = lv[l];
      lanes.index = li[l];
    }
  }
  // The lanes' winner, then the rest, against what came before this run.
  if (b.index < 0 || arg_better<kMax>(lanes.value, b.value)) {
    b.value = lanes.value;
    b.index = pos + lanes.index;
  }
  arg_scalar<kMax>(b, x + i, n - i, pos + i);
}
#endif

template <bool kMax>
int64_t reduce_arg(const ReducePlan& p, const sk_tensor_arg& x, int64_t base) {
  ArgBest b;
  int64_t pos = 0;
  feed_sequence(p, x, base, [&](const float* v, int64_t n) {
#if SK_KERNELS_X86
    if (current_isa_level() >= kIsaAvx2) {
      arg_avx2<kMax>(b, v, n, pos);
      pos += n;
      return;
    }
#endif
    arg_scalar<kMax>(b, v, n, pos);
    pos += n;
  });
  return b.index;
}

// Integer inputs: exact, in order.
int64_t reduce_int(const ReducePlan& p, const sk_tensor_arg& x, int64_t base) {
  int64_t buf[kEwBlock];
  uint64_t sum = 0;
  int64_t best = 0;
  int64_t best_index = -1;
  int64_t pos = 0;
  const int32_t op = p.op;
  for_each_seq_run(p.seq, base, [&](int64_t off, int64_t stride, int64_t n) {
    for (int64_t i0 = 0; i0 < n; i0 += kEwBlock) {
      const int64_t m = std::min(kEwBlock, n - i0);
      load_i64(x.dtype, elem_ptr(x, off + i0 * stride), stride, m, buf);
      for (int64_t i = 0; i < m; ++i, ++pos) {
        const int64_t v = buf[i];
        sum += static_cast<uint64_t>(v);
        const bool better = op == SK_REDUCE_MAX || op == SK_REDUCE_ARGMAX ? v > best : v < best;
        if (best_index < 0 || better) {
          best = v;
          best_index = pos;
        }
      }
    }
  });
  if (op == SK_REDUCE_SUM) return static_cast<int64_t>(sum);
  if (op == SK_REDUCE_ARGMAX || op == SK_REDUCE_ARGMIN) return best_index;
  return best;
}

sk_range reduce_split(const ReducePlan& p, int32_t core, int32_t cores) {
  return sk_split_range(p.walk.numel, core, cores, kElementAlign);
}

// ---- Cumsum ----

struct CumsumPlan {
  int64_t outer = 1;  // slabs: the dims before `dim`
  int64_t len = 0;    // along `dim`
  int64_t inner = 1;  // the dims after `dim`
  int rank = 0;
  int dim = 0;
  int64_t shape[SK_MAX_RANK] = {};
  int64_t xs[SK_MAX_RANK] = {};
  int64_t os[SK_MAX_RANK] = {};
};

bool plan_cumsum(const sk_kernel_args* args, CumsumPlan* p, ErrorSink err) {
  sk_cumsum_attrs a{};
  if (!check_arity(args, kCumsum, 1, 1, err) || !read_attrs(args, kCumsum, "sk_cumsum_attrs", &a, err)) return false;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  if (!is_known(x.dtype)) return invalid(err, "%s: x has unknown dtype %d", kCumsum, x.dtype);
  const int32_t want = is_float(x.dtype) ? x.dtype : SK_DTYPE_I64;
  if (!check_tensor(x, kCumsum, "x", x.dtype, 1, err) || !check_tensor(out, kCumsum, "out", want, 1, err)) {
    return false;
  }
  if (!same_shape(x, out)) {
    char s1[96];
    char s2[96];
    return invalid(err, "%s: out shape %s differs from x shape %s", kCumsum, format_shape(out, s1, sizeof s1),
                   format_shape(x, s2, sizeof s2));
  }
  if (a.dim < 0 || a.dim >= x.rank) return invalid(err, "%s: dim %d is outside x's rank %d", kCumsum, a.dim, x.rank);
  p->rank = x.rank;
  p->dim = a.dim;
  for (int d = 0; d < x.rank; ++d) {
    p->shape[d] = x.shape[d];
    p->xs[d] = x.stride[d];
    p->os[d] = out.stride[d];
    if (d < a.dim) p->outer *= x.shape[d];
    if (d > a.dim) p->inner *= x.shape[d];
  }
  p->len = x.shape[a.dim];
  return true;
}

// Element offsets (x, out) of slab o's element (i along dim, flat inner index j).
void cumsum_offsets(const CumsumPlan& p, int64_t o, int64_t j, int64_t* xo, int64_t* oo) {
  int64_t idx[SK_MAX_RANK] = {};
  unflatten(o, p.dim, p.shape, idx);
  unflatten(j, p.rank - p.dim - 1, p.shape + p.dim + 1, idx + p.dim + 1);
  *xo = 0;
  *oo = 0;
  for (int d = 0; d < p.rank; ++d) {
    *xo += idx[d] * p.xs[d];
    *oo += idx[d] * p.os[d];
  }
}

}  // namespace

int32_t tensor_reduce_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  ReducePlan p;
  if (!check_core(core, kReduce, err)) return SK_ERR_INVALID_ARGUMENT;
  if (!plan_from_tiling(args, &p) && !plan_reduce(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  const sk_range r = reduce_split(p, core->core_id, core->num_cores);
  const int64_t so = p.walk.inner_stride(1);
  const int64_t sx = p.walk.inner_stride(0);
  const bool float_x = is_float(p.x_dtype);
  const auto count = static_cast<float>(p.seq.count);
  for_each_run(p.walk, r.begin, r.end, [&](const int64_t* off, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      const int64_t base = off[0] + i * sx;
      char* dst = elem_ptr_mut(out, off[1] + i * so);
      if (!float_x) {
        const int64_t v = reduce_int(p, x, base);
        store_i64(out.dtype, &v, 1, dst, 1);
        continue;
      }
      switch (p.op) {
        case SK_REDUCE_SUM:
        case SK_REDUCE_MEAN: {
          float v = reduce_lanes<LaneOp::kSum>(p, x, base);
          if (p.op == SK_REDUCE_MEAN) v = v / count;
          store_f32(out.dtype, &v, 1, dst, 1);
          break;
        }
        case SK_REDUCE_MAX:
        case SK_REDUCE_MIN: {
          const float v =
              p.op == SK_REDUCE_MAX ? reduce_lanes<LaneOp::kMax>(p, x, base) : reduce_lanes<LaneOp::kMin>(p, x, base);
          store_f32(out.dtype, &v, 1, dst, 1);
          break;
        }
        default: {
          const int64_t v = p.op == SK_REDUCE_ARGMAX ? reduce_arg<true>(p, x, base) : reduce_arg<false>(p, x, base);
          store_i64(out.dtype, &v, 1, dst, 1);
          break;
        }
      }
    }
  });
  return SK_OK;
}

int32_t tensor_reduce_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size) {
  ReducePlan p;
  if (!plan_reduce(args, &p, ErrorSink{nullptr, 0, /*shapes_only=*/true})) return SK_ERR_INVALID_ARGUMENT;
  return tiling_of(p, tiling, capacity, size);
}

int32_t tensor_reduce_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                             int32_t capacity) {
  ReducePlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_reduce(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = reduce_split(p, core_id, num_cores);
  RangeList list(ranges, capacity);
  if (r.begin < r.end && p.seq.count > 0) {
    int64_t lo = 0;
    int64_t hi = 0;
    walk_bounds(p.walk, 0, r.begin, r.end, &lo, &hi);
    const int64_t elem = sk_dtype_size(p.x_dtype);
    list.add(0, SK_ACCESS_READ, (lo + p.seq.span_lo) * elem, (hi + p.seq.span_hi + 1) * elem);
  }
  list.add_walk(p.walk, 1, 1, SK_ACCESS_WRITE, r.begin, r.end, 1, sk_dtype_size(p.out_dtype));
  return list.finish();
}

int32_t tensor_cumsum_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  CumsumPlan p;
  if (!check_core(core, kCumsum, err) || !plan_cumsum(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  const sk_range r = sk_split_range(p.outer, core->core_id, core->num_cores, 1);
  const int64_t sx = p.xs[p.dim];
  const int64_t so = p.os[p.dim];
  const bool float_x = is_float(x.dtype);
  for (int64_t o = r.begin; o < r.end; ++o) {
    for (int64_t j = 0; j < p.inner; ++j) {
      int64_t xo = 0;
      int64_t oo = 0;
      cumsum_offsets(p, o, j, &xo, &oo);
      if (float_x) {
        float acc = 0.0f;
        for (int64_t i = 0; i < p.len; ++i) {
          float v = 0.0f;
          load_f32(x.dtype, elem_ptr(x, xo + i * sx), 1, 1, &v);
          acc = acc + v;
          store_f32(out.dtype, &acc, 1, elem_ptr_mut(out, oo + i * so), 1);
        }
      } else {
        uint64_t acc = 0;
        for (int64_t i = 0; i < p.len; ++i) {
          int64_t v = 0;
          load_i64(x.dtype, elem_ptr(x, xo + i * sx), 1, 1, &v);
          acc += static_cast<uint64_t>(v);
          const auto s = static_cast<int64_t>(acc);
          store_i64(out.dtype, &s, 1, elem_ptr_mut(out, oo + i * so), 1);
        }
      }
    }
  }
  return SK_OK;
}

int32_t tensor_cumsum_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                             int32_t capacity) {
  CumsumPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_cumsum(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.outer, core_id, num_cores, 1);
  RangeList list(ranges, capacity);
  // One box per slab (adjacent slabs of a dense tensor merge into one range).
  for (int64_t o = r.begin; o < r.end && p.len > 0 && p.inner > 0; ++o) {
    int64_t lo[SK_MAX_RANK] = {};
    int64_t hi[SK_MAX_RANK] = {};
    unflatten(o, p.dim, p.shape, lo);
    for (int d = 0; d < p.rank; ++d) hi[d] = d < p.dim ? lo[d] : p.shape[d] - 1;
    add_box(list, 0, SK_ACCESS_READ, args->inputs[0], lo, hi);
  }
  for (int64_t o = r.begin; o < r.end && p.len > 0 && p.inner > 0; ++o) {
    int64_t lo[SK_MAX_RANK] = {};
    int64_t hi[SK_MAX_RANK] = {};
    unflatten(o, p.dim, p.shape, lo);
    for (int d = 0; d < p.rank; ++d) hi[d] = d < p.dim ? lo[d] : p.shape[d] - 1;
    add_box(list, 1, SK_ACCESS_WRITE, args->outputs[0], lo, hi);
  }
  return list.finish();
}

}  // namespace sk::kernels
