// moe_dispatch.f32 and moe_combine(_shared).f32: the permutation around the grouped expert GEMM.
//
// dispatch: x [T, D], topk_ids [T, k] -> x_sorted [T*k, D], counts [E], row_map [T, k]
//   x_sorted holds the (token, slot) pairs routed to real experts, grouped by expert id and,
//   within an expert, ordered by (token, slot); rows past sum(counts) are zero. row_map[t, s]
//   is the x_sorted row of (t, s), or -1 for a zero-computation expert (id >= E).
// combine: out[t] = (shared[t] +) sum over s in slot order of
//   weight[t, s] * (row_map[t, s] >= 0 ? y[row_map[t, s]] : x[t])
//
// Dispatch needs prefix sums over all ids before any row can be placed. Every core computes
// them (O(T*k + E), cheap next to copying rows) in the same order, then writes only its share
// of each output; that avoids a sync_all, which would force feed-sync-all on super kernels
// with fewer cores. Every core validates every id before writing, so a bad id fails all cores
// with the same message and leaves the outputs untouched.
#include <cstring>

#include "kernels/cpu_isa.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/moe_common.h"
#include "kernels/simd.h"
#include "superkernel/attrs_moe.h"

namespace sk::kernels {
namespace {

using moe::Layout;

// ---------------------------------------------------------------------------------------------
// dispatch

constexpr const char* kDispatch = "moe_dispatch.f32";
enum { kDX = 0, kDIds = 1, kDSorted = 2, kDCounts = 3, kDRowMap = 4 };

struct DispatchPlan {
  sk_moe_dispatch_attrs attrs{};
  moe::View2<const float> x;
  moe::View2<const int32_t> ids;
  moe::View2<float> sorted;
  int32_t* counts = nullptr;
  int64_t counts_stride = 0;
  moe::View2<int32_t> row_map;
  int64_t t = 0;
  int64_t k = 0;
  int64_t d = 0;
  int64_t e = 0;  // real experts
};

bool plan_dispatch(const sk_kernel_args* args, DispatchPlan* p, ErrorSink err) {
  if (!check_arity(args, kDispatch, 2, 3, err)) return false;
  const sk_tensor_arg& x = args->inputs[kDX];
  const sk_tensor_arg& ids = args->inputs[kDIds];
  const sk_tensor_arg& sorted = args->outputs[0];
  const sk_tensor_arg& counts = args->outputs[1];
  const sk_tensor_arg& row_map = args->outputs[2];
  if (!moe::check_2d(x, kDispatch, "x", SK_DTYPE_F32, Layout::kRowsDense, err) ||
      !moe::check_2d(ids, kDispatch, "topk_ids", SK_DTYPE_I32, Layout::kAny, err) ||
      !moe::check_2d(sorted, kDispatch, "x_sorted", SK_DTYPE_F32, Layout::kOutput, err) ||
      !check_tensor(counts, kDispatch, "counts", SK_DTYPE_I32, 1, err) ||
      !moe::check_2d(row_map, kDispatch, "row_map", SK_DTYPE_I32, Layout::kOutput, err)) {
    return false;
  }
  if (!moe::read_attrs(args, &p->attrs)) {
    return invalid(err, "%s: attributes must be one sk_moe_dispatch_attrs (%zu bytes), got %u bytes", kDispatch,
                   sizeof(sk_moe_dispatch_attrs), args->attrs_size);
  }
  const sk_moe_dispatch_attrs& a = p->attrs;
  if (a.num_real_experts < 0 || a.num_zero_experts < 0) {
    return invalid(err, "%s: num_real_experts = %d and num_zero_experts = %d must not be negative", kDispatch,
                   a.num_real_experts, a.num_zero_experts);
  }
  p->t = x.shape[0];
  p->d = x.shape[1];
  p->k = ids.shape[1];
  p->e = a.num_real_experts;
  char s1[96];
  char s2[96];
  if (ids.shape[0] != p->t) {
    return invalid(err, "%s: topk_ids shape %s does not have the %lld tokens of x %s", kDispatch,
                   format_shape(ids, s1, sizeof s1), static_cast<long long>(p->t), format_shape(x, s2, sizeof s2));
  }
  if (p->t * p->k >= (int64_t{1} << 31)) {
    return invalid(err, "%s: T*k = %lld rows of x_sorted do not fit row_map's i32 row numbers", kDispatch,
                   static_cast<long long>(p->t * p->k));
  }
  if (sorted.shape[0] != p->t * p->k || sorted.shape[1] != p->d) {
    return invalid(err, "%s: x_sorted shape %s is not [%lld, %lld] (T*k, D)", kDispatch,
                   format_shape(sorted, s1, sizeof s1), static_cast<long long>(p->t * p->k),
                   static_cast<long long>(p->d));
  }
  if (counts.rank != 1 || counts.shape[0] != p->e) {
    return invalid(err, "%s: counts shape %s is not [%d] (num_real_experts)", kDispatch,
                   format_shape(counts, s1, sizeof s1), a.num_real_experts);
  }
  if (p->e > 1 && counts.stride[0] == 0) return invalid(err, "%s: counts is a view whose elements overlap", kDispatch);
  if (row_map.shape[0] != p->t || row_map.shape[1] != p->k) {
    return invalid(err, "%s: row_map shape %s is not topk_ids shape %s", kDispatch,
                   format_shape(row_map, s1, sizeof s1), format_shape(ids, s2, sizeof s2));
  }
  p->x = moe::view2<const float>(x);
  p->ids = moe::view2<const int32_t>(ids);
  p->sorted = moe::view2<float>(sorted);
  p->counts = static_cast<int32_t*>(counts.data);
  p->counts_stride = counts.stride[0];
  p->row_map = moe::view2<int32_t>(row_map);
  return true;
}

bool check_expert_ids(const DispatchPlan& p, ErrorSink err) {
  const int64_t limit = p.e + p.attrs.num_zero_experts;
  for (int64_t t = 0; t < p.t; ++t) {
    for (int64_t s = 0; s < p.k; ++s) {
      const int32_t id = p.ids.at(t, s);
      if (id < 0 || id >= limit) {
        return invalid(err,
                       "%s: topk_ids[%lld, %lld] (token %lld, slot %lld) = %d is out of range for %lld real + %d "
                       "zero-computation experts",
                       kDispatch, static_cast<long long>(t), static_cast<long long>(s), static_cast<long long>(t),
                       static_cast<long long>(s), id, static_cast<long long>(p.e), p.attrs.num_zero_experts);
      }
    }
  }
  return true;
}

// The routing tables every core derives the same way: counts per real expert, the x_sorted row
// of each (t, s) (-1 for zero-computation experts) and, per row, its token.
// They live in the core's workspace slice.
struct Routing {
  int32_t* counts = nullptr;    // [E]
  int32_t* row_of = nullptr;    // [T*k], (t, s) flattened
  int32_t* token_of = nullptr;  // [T*k] rows; only the first `total` are used
  int64_t total = 0;
  uint64_t bytes = 0;  // of the slice it occupies
};

// For `experts` real experts and `entries` = T * k routing slots.
Routing carve_routing(int64_t experts, int64_t entries, void* base) {
  ScratchCarver c(base);
  Routing r;
  r.counts = c.take<int32_t>(experts);
  r.row_of = c.take<int32_t>(entries);
  r.token_of = c.take<int32_t>(entries);
  r.bytes = c.bytes();
  return r;
}

void route(const DispatchPlan& p, Routing* r) {
  std::fill(r->counts, r->counts + p.e, 0);
  for (int64_t t = 0; t < p.t; ++t) {
    for (int64_t s = 0; s < p.k; ++s) {
      const int32_t id = p.ids.at(t, s);
      if (id < p.e) ++r->counts[static_cast<size_t>(id)];
    }
  }
  // counts becomes the running insert position of each expert.
  int32_t* next = r->counts;
  int32_t acc = 0;
  for (int64_t e = 0; e < p.e; ++e) {
    const int32_t c = next[static_cast<size_t>(e)];
    next[static_cast<size_t>(e)] = acc;
    acc += c;
  }
  r->total = acc;
  for (int64_t t = 0; t < p.t; ++t) {
    for (int64_t s = 0; s < p.k; ++s) {
      const int32_t id = p.ids.at(t, s);
      int32_t row = -1;
      if (id < p.e) {
        row = next[static_cast<size_t>(id)]++;
        r->token_of[static_cast<size_t>(row)] = static_cast<int32_t>(t);
      }
      r->row_of[static_cast<size_t>(t * p.k + s)] = row;
    }
  }
  // Back from insert positions (now each expert's end) to counts.
  int32_t begin = 0;
  for (int64_t e = 0; e < p.e; ++e) {
    const int32_t end = next[static_cast<size_t>(e)];
    next[static_cast<size_t>(e)] = end - begin;
    begin = end;
  }
}

// Each output is split on its own: x_sorted by rows, counts and row_map by elements.
struct DispatchSplit {
  sk_range rows;
  sk_range counts;
  sk_range entries;  // flattened (t, s)
};

DispatchSplit dispatch_split(const DispatchPlan& p, int32_t core, int32_t cores) {
  return {sk_split_range(p.t * p.k, core, cores, 1), sk_split_range(p.e, core, cores, kElementAlign),
          sk_split_range(p.t * p.k, core, cores, kElementAlign)};
}

// ---------------------------------------------------------------------------------------------
// combine

constexpr const char* kCombine = "moe_combine.f32";
constexpr const char* kCombineShared = "moe_combine_shared.f32";
enum { kCY = 0, kCRowMap = 1, kCWeights = 2, kCX = 3, kCShared = 4 };

struct CombinePlan {
  const char* name = kCombine;
  bool shared = false;
  moe::View2<const float> y;
  moe::View2<const int32_t> row_map;
  moe::View2<const float> weights;
  moe::View2<const float> x;
  moe::View2<const float> sh;
  moe::View2<float> out;
  int64_t t = 0;
  int64_t k = 0;
  int64_t d = 0;
};

bool plan_combine(const sk_kernel_args* args, bool shared, CombinePlan* p, ErrorSink err) {
  const char* name = shared ? kCombineShared : kCombine;
  p->name = name;
  p->shared = shared;
  if (!check_arity(args, name, shared ? 5 : 4, 1, err)) return false;
  const sk_tensor_arg& y = args->inputs[kCY];
  const sk_tensor_arg& row_map = args->inputs[kCRowMap];
  const sk_tensor_arg& weights = args->inputs[kCWeights];
  const sk_tensor_arg& x = args->inputs[kCX];
  const sk_tensor_arg& out = args->outputs[0];
  if (!moe::check_2d(y, name, "y", SK_DTYPE_F32, Layout::kRowsDense, err) ||
      !moe::check_2d(row_map, name, "row_map", SK_DTYPE_I32, Layout::kAny, err) ||
      !moe::check_2d(weights, name, "topk_weights", SK_DTYPE_F32, Layout::kAny, err) ||
      !moe::check_2d(x, name, "x", SK_DTYPE_F32, Layout::kRowsDense, err) ||
      (shared && !moe::check_2d(args->inputs[kCShared], name, "shared", SK_DTYPE_F32, Layout::kRowsDense, err)) ||
      !moe::check_2d(out, name, "out", SK_DTYPE_F32, Layout::kOutput, err)) {
    return false;
  }
  if (args->attrs_size != 0) return invalid(err, "%s: takes no attributes, got %u bytes", name, args->attrs_size);
  p->t = x.shape[0];
  p->d = x.shape[1];
  p->k = row_map.shape[1];
  char s1[96];
  char s2[96];
  if (row_map.shape[0] != p->t) {
    return invalid(err, "%s: row_map shape %s does not have the %lld tokens of x %s", name,
                   format_shape(row_map, s1, sizeof s1), static_cast<long long>(p->t), format_shape(x, s2, sizeof s2));
  }
  if (!same_shape(weights, row_map)) {
    return invalid(err, "%s: topk_weights shape %s differs from row_map shape %s", name,
                   format_shape(weights, s1, sizeof s1), format_shape(row_map, s2, sizeof s2));
  }
  if (y.shape[1] != p->d) {
    return invalid(err, "%s: y shape %s does not have the D = %lld columns of x", name, format_shape(y, s1, sizeof s1),
                   static_cast<long long>(p->d));
  }
  if (shared && !same_shape(args->inputs[kCShared], x)) {
    return invalid(err, "%s: shared shape %s differs from x shape %s", name,
                   format_shape(args->inputs[kCShared], s1, sizeof s1), format_shape(x, s2, sizeof s2));
  }
  if (!same_shape(out, x)) {
    return invalid(err, "%s: out shape %s differs from x shape %s", name, format_shape(out, s1, sizeof s1),
                   format_shape(x, s2, sizeof s2));
  }
  // The output is cleared or seeded and then accumulated into while the inputs are still read:
  // it must not share a byte with any of them.
  static constexpr const char* kInputNames[] = {"y", "row_map", "topk_weights", "x", "shared"};
  for (int32_t i = 0; i < args->num_inputs; ++i) {
    if (views_overlap(args->inputs[i], out)) return invalid(err, "%s: out overlaps %s", name, kInputNames[i]);
  }
  p->y = moe::view2<const float>(y);
  p->row_map = moe::view2<const int32_t>(row_map);
  p->weights = moe::view2<const float>(weights);
  p->x = moe::view2<const float>(x);
  if (shared) p->sh = moe::view2<const float>(args->inputs[kCShared]);
  p->out = moe::view2<float>(out);
  return true;
}

bool check_row_map(const CombinePlan& p, ErrorSink err) {
  for (int64_t t = 0; t < p.t; ++t) {
    for (int64_t s = 0; s < p.k; ++s) {
      const int32_t row = p.row_map.at(t, s);
      if (row < -1 || row >= p.y.rows) {
        return invalid(err, "%s: row_map[%lld, %lld] (token %lld, slot %lld) = %d is outside [-1, %lld) (rows of y)",
                       p.name, static_cast<long long>(t), static_cast<long long>(s), static_cast<long long>(t),
                       static_cast<long long>(s), row, static_cast<long long>(p.y.rows));
      }
    }
  }
  return true;
}

// Prefill splits tokens; decode with fewer tokens than cores splits columns so that every core
// has work.
bool combine_splits_columns(const CombinePlan& p, int32_t cores) { return p.t < cores; }

// acc[0, n) (= init or 0) += w * v[0, n), one source row per call, in slot order.
using AxpyFn = void (*)(float* acc, const float* v, float w, int64_t n);

void axpy_scalar(float* acc, const float* v, float w, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] + w * v[i];
}

#if SK_KERNELS_X86
SK_TARGET_AVX2 void axpy_avx2(float* acc, const float* v, float w, int64_t n) {
  const __m256 wv = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
  }
  if (i < n) {
    const __m256i m = simd::mask8(n - i);
    simd::maskstore_ps(acc + i, m, _mm256_fmadd_ps(wv, simd::maskload_ps(v + i, m), simd::maskload_ps(acc + i, m)));
  }
}

SK_TARGET_AVX512 void axpy_avx512(float* acc, const float* v, float w, int64_t n) {
  const __m512 wv = _mm512_set1_ps(w);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(acc + i, _mm512_fmadd_ps(wv, _mm512_loadu_ps(v + i), _mm512_loadu_ps(acc + i)));
  }
  if (i < n) {
    const __mmask16 m = simd::mask16(n - i);
    simd::masked_store_ps(acc + i, m,
                          _mm512_fmadd_ps(wv, simd::masked_load_ps(m, v + i), simd::masked_load_ps(m, acc + i)));
  }
}
#endif

AxpyFn select_axpy() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return axpy_avx512;
    case kIsaAvx2:
      return axpy_avx2;
    default:
      break;
  }
#endif
  return axpy_scalar;
}

// Output row t, columns [c0, c1): accumulated in the output itself, which only this core
// touches (every element gets the same operation sequence whichever core owns it).
void combine_token(const CombinePlan& p, AxpyFn axpy, int64_t t, int64_t c0, int64_t c1) {
  float* out = p.out.row(t) + c0;
  const size_t bytes = static_cast<size_t>(c1 - c0) * sizeof(float);
  if (p.shared) {
    std::memcpy(out, p.sh.row(t) + c0, bytes);
  } else {
    std::memset(out, 0, bytes);
  }
  for (int64_t s = 0; s < p.k; ++s) {
    const int32_t row = p.row_map.at(t, s);
    const float* src = row >= 0 ? p.y.row(row) : p.x.row(t);
    axpy(out, src + c0, p.weights.at(t, s), c1 - c0);
  }
}

int32_t combine_run(const sk_kernel_args* args, const sk_core_ctx* core, bool shared) {
  const ErrorSink err = sink_of(core);
  CombinePlan p;
  if (!check_core(core, shared ? kCombineShared : kCombine, err) || !plan_combine(args, shared, &p, err) ||
      !check_row_map(p, err)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  if (p.d == 0) return SK_OK;
  const AxpyFn axpy = select_axpy();
  if (combine_splits_columns(p, core->num_cores)) {
    const sk_range c = sk_split_range(p.d, core->core_id, core->num_cores, kElementAlign);
    if (c.begin >= c.end) return SK_OK;
    for (int64_t t = 0; t < p.t; ++t) combine_token(p, axpy, t, c.begin, c.end);
    return SK_OK;
  }
  const sk_range r = sk_split_range(p.t, core->core_id, core->num_cores, 1);
  for (int64_t t = r.begin; t < r.end; ++t) combine_token(p, axpy, t, 0, p.d);
  return SK_OK;
}

int32_t combine_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                       int32_t capacity, bool shared) {
  CombinePlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_combine(args, shared, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const int32_t out_op = args->num_inputs;
  RangeList list(ranges, capacity);
  // Every core validates every row number.
  moe::add_whole(list, kCRowMap, SK_ACCESS_READ, args->inputs[kCRowMap]);
  if (p.d == 0 || p.t == 0) return list.finish();
  if (combine_splits_columns(p, num_cores)) {
    const sk_range c = sk_split_range(p.d, core_id, num_cores, kElementAlign);
    if (c.begin >= c.end) return list.finish();
    moe::add_columns(list, kCY, SK_ACCESS_READ, args->inputs[kCY], c.begin, c.end);
    moe::add_whole(list, kCWeights, SK_ACCESS_READ, args->inputs[kCWeights]);
    moe::add_columns(list, kCX, SK_ACCESS_READ, args->inputs[kCX], c.begin, c.end);
    if (shared) moe::add_columns(list, kCShared, SK_ACCESS_READ, args->inputs[kCShared], c.begin, c.end);
    moe::add_block(list, out_op, SK_ACCESS_WRITE, args->outputs[0], 0, p.t, c.begin, c.end);
    return list.finish();
  }
  const sk_range r = sk_split_range(p.t, core_id, num_cores, 1);
  if (r.begin >= r.end) return list.finish();
  // Which rows of y a token reads depends on row_map's values: all of y, conservatively.
  moe::add_whole(list, kCY, SK_ACCESS_READ, args->inputs[kCY]);
  moe::add_block(list, kCWeights, SK_ACCESS_READ, args->inputs[kCWeights], r.begin, r.end, 0, p.k);
  moe::add_block(list, kCX, SK_ACCESS_READ, args->inputs[kCX], r.begin, r.end, 0, p.d);
  if (shared) moe::add_block(list, kCShared, SK_ACCESS_READ, args->inputs[kCShared], r.begin, r.end, 0, p.d);
  moe::add_block(list, out_op, SK_ACCESS_WRITE, args->outputs[0], r.begin, r.end, 0, p.d);
  return list.finish();
}

}  // namespace

// From shapes and attributes only (operands have no address yet). Arguments run will reject need
// no scratch: it reports them before touching any.
uint64_t moe_dispatch_f32_workspace(const sk_kernel_args* args) {
  sk_moe_dispatch_attrs a{};
  if (args->num_inputs <= kDIds || args->inputs[kDIds].rank != 2 || !moe::read_attrs(args, &a) ||
      a.num_real_experts < 0 || args->inputs[kDIds].shape[0] < 0 || args->inputs[kDIds].shape[1] < 0) {
    return 0;
  }
  const sk_tensor_arg& ids = args->inputs[kDIds];
  return carve_routing(a.num_real_experts, ids.shape[0] * ids.shape[1], nullptr).bytes;
}

int32_t moe_dispatch_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  DispatchPlan p;
  if (!check_core(core, kDispatch, err) || !plan_dispatch(args, &p, err) || !check_expert_ids(p, err)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  Routing routing = carve_routing(p.e, p.t * p.k, core_slice(args, core));
  if (routing.bytes > 0 && (args->workspace == nullptr || args->workspace_size < routing.bytes)) {
    return workspace_too_small(err, kDispatch, args, routing.bytes);
  }
  route(p, &routing);
  const DispatchSplit sp = dispatch_split(p, core->core_id, core->num_cores);
  const size_t row_bytes = static_cast<size_t>(p.d) * sizeof(float);
  for (int64_t row = sp.rows.begin; row < sp.rows.end && p.d > 0; ++row) {
    float* dst = p.sorted.row(row);
    if (row < routing.total) {
      std::memcpy(dst, p.x.row(routing.token_of[static_cast<size_t>(row)]), row_bytes);
    } else {
      std::memset(dst, 0, row_bytes);
    }
  }
  for (int64_t e = sp.counts.begin; e < sp.counts.end; ++e) {
    p.counts[e * p.counts_stride] = routing.counts[static_cast<size_t>(e)];
  }
  for (int64_t i = sp.entries.begin; i < sp.entries.end; ++i) {
    p.row_map.at(i / p.k, i % p.k) = routing.row_of[static_cast<size_t>(i)];
  }
  return SK_OK;
}

int32_t moe_dispatch_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                                int32_t capacity) {
  DispatchPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_dispatch(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const DispatchSplit sp = dispatch_split(p, core_id, num_cores);
  RangeList list(ranges, capacity);
  // Every core reads every id (validation and prefix sums); the x rows it copies depend on
  // them, so x is read whole.
  moe::add_whole(list, kDIds, SK_ACCESS_READ, args->inputs[kDIds]);
  if (sp.rows.begin < sp.rows.end && p.d > 0) {
    moe::add_whole(list, kDX, SK_ACCESS_READ, args->inputs[kDX]);
    moe::add_block(list, kDSorted, SK_ACCESS_WRITE, args->outputs[0], sp.rows.begin, sp.rows.end, 0, p.d);
  }
  for (int64_t e = sp.counts.begin; e < sp.counts.end; ++e) {
    const int64_t off = e * p.counts_stride * static_cast<int64_t>(sizeof(int32_t));
    list.add(kDCounts, SK_ACCESS_WRITE, off, off + static_cast<int64_t>(sizeof(int32_t)));
  }
  const sk_tensor_arg& rm = args->outputs[2];
  for (int64_t i = sp.entries.begin; i < sp.entries.end;) {
    // Whole rows of row_map at once where the split allows it.
    const int64_t t = i / p.k;
    const int64_t end = std::min<int64_t>(sp.entries.end, (t + 1) * p.k);
    moe::add_block(list, kDRowMap, SK_ACCESS_WRITE, rm, t, t + 1, i % p.k, (end - 1) % p.k + 1);
    i = end;
  }
  return list.finish();
}

int32_t moe_combine_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  return combine_run(args, core, false);
}
int32_t moe_combine_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                               int32_t capacity) {
  return combine_access(args, core_id, num_cores, ranges, capacity, false);
}
int32_t moe_combine_shared_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  return combine_run(args, core, true);
}
int32_t moe_combine_shared_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                      sk_access_range* ranges, int32_t capacity) {
  return combine_access(args, core_id, num_cores, ranges, capacity, true);
}

}  // namespace sk::kernels
