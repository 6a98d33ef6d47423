// Grouped matmul for mixture-of-experts layers (tiling sink):
//
//   grouped_matmul.f32:      x f32 [R, K], counts i32 [E], w f32  [E, N, K]                  -> y f32 [R, N]
//   grouped_matmul.bf16:     x f32 [R, K], counts i32 [E], w bf16 [E, N, K]                  -> y f32 [R, N]
//   grouped_matmul.f16:      x f32 [R, K], counts i32 [E], w f16  [E, N, K]                  -> y f32 [R, N]
//   grouped_matmul.w8a8_dyn: x f32 [R, K], counts i32 [E], w i8   [E, N, K], w_scale f32 [E, N] -> y f32 [R, N]
//
// The rows of x are grouped by expert: counts[0] rows of expert 0 first, then counts[1] rows of
// expert 1, and so on. Row r of expert e gives y[r] = x[r] · w[e]ᵀ, with exactly the numerics of
// matmul.f32 / matmul.bf16 / matmul.f16 / matmul.w8a8_dyn on that row; rows at or beyond sum(counts) are
// written as 0. Counts must be non-negative and sum to at most R.
//
// The tiling function reads `counts` (input data, hence SK_TILING_SINK: the runtime runs it
// once the producer of counts has finished) and writes the work list: one item (expert, first
// row, rows) per non-empty expert, or the first error it found, which run() then reports on
// every core. Cores split N, in the same kNSplitAlign chunks as the plain matmuls: each core
// takes its slice of every expert's weights. The split depends only on shapes (so the access
// callback can be exact about writes without seeing counts) and is balanced whatever the
// routing: every core streams the same share of each active expert's weights and computes the
// same share of each expert's rows x columns, so a busy expert is shared like any other.
#include <algorithm>
#include <cstring>

#include "kernels/cpu_isa.h"
#include "kernels/gemv_kernels.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"

namespace sk::kernels {
namespace {

enum class WType { kF32, kBf16, kF16, kW8 };

struct Variant {
  const char* name;
  WType type;
  int32_t w_dtype;
  int64_t w_size;
  int32_t num_inputs;
};

constexpr Variant kF32 = {"grouped_matmul.f32", WType::kF32, SK_DTYPE_F32, 4, 3};
constexpr Variant kBf16 = {"grouped_matmul.bf16", WType::kBf16, SK_DTYPE_BF16, 2, 3};
constexpr Variant kF16 = {"grouped_matmul.f16", WType::kF16, SK_DTYPE_F16, 2, 3};
constexpr Variant kW8 = {"grouped_matmul.w8a8_dyn", WType::kW8, SK_DTYPE_I8, 1, 4};

enum { kOpX = 0, kOpCounts = 1, kOpW = 2, kOpWScale = 3 };

// ---- Tiling blob ----

constexpr uint32_t kTilingMagic = 0x4d47'4b53u;  // "SKGM"
enum : int32_t { kTilingOk = 0, kTilingNegativeCount = 1, kTilingTooManyRows = 2 };

struct TilingHeader {
  uint32_t magic;
  int32_t status;
  int64_t bad_expert;  // kTilingNegativeCount: which count
  int64_t bad_value;   // its value, or the sum for kTilingTooManyRows
  int64_t total;       // sum of counts
  int64_t num_items;
};

struct TilingItem {
  int64_t expert;
  int64_t row_begin;
  int64_t rows;
};

// ---- Plan ----

struct Plan {
  int64_t r = 0;  // rows of x and y
  int64_t k = 0;
  int64_t n = 0;
  int64_t e = 0;
  int64_t sx = 0;  // element strides
  int64_t sy = 0;
  int64_t sc = 0;
  int64_t swe = 0;
  int64_t swn = 0;
  int64_t swse = 0;
  int64_t swsn = 0;
  const float* x = nullptr;
  const int32_t* counts = nullptr;
  const void* w = nullptr;
  const float* w_scale = nullptr;
  float* y = nullptr;
};

bool plan(const Variant& v, const sk_kernel_args* args, Plan* p, ErrorSink err) {
  const char* kn = v.name;
  if (!check_arity(args, kn, v.num_inputs, 1, err)) return false;
  const sk_tensor_arg& x = args->inputs[kOpX];
  const sk_tensor_arg& counts = args->inputs[kOpCounts];
  const sk_tensor_arg& w = args->inputs[kOpW];
  const sk_tensor_arg& y = args->outputs[0];
  if (!check_tensor(x, kn, "x", SK_DTYPE_F32, 2, err) || !check_tensor(counts, kn, "counts", SK_DTYPE_I32, 1, err) ||
      !check_tensor(w, kn, "w", v.w_dtype, 3, err) || !check_tensor(y, kn, "out", SK_DTYPE_F32, 2, err)) {
    return false;
  }
  char s1[96];
  char s2[96];
  char s3[96];
  char s4[96];
  if (x.rank != 2 || counts.rank != 1 || w.rank != 3 || y.rank != 2) {
    return invalid(err,
                   "%s: expected x [R, K], counts [E], w [E, N, K] and out [R, N], got x %s, counts %s, w %s, out %s",
                   kn, format_shape(x, s1, sizeof s1), format_shape(counts, s4, sizeof s4),
                   format_shape(w, s2, sizeof s2), format_shape(y, s3, sizeof s3));
  }
  if (w.shape[0] != counts.shape[0] || w.shape[2] != x.shape[1]) {
    return invalid(err, "%s: w shape %s is not [E, N, K] for counts [%lld] and x shape %s", kn,
                   format_shape(w, s1, sizeof s1), static_cast<long long>(counts.shape[0]),
                   format_shape(x, s2, sizeof s2));
  }
  if (y.shape[0] != x.shape[0] || y.shape[1] != w.shape[1]) {
    return invalid(err, "%s: out shape %s is not [R, N] for x shape %s and w shape %s", kn,
                   format_shape(y, s1, sizeof s1), format_shape(x, s2, sizeof s2), format_shape(w, s3, sizeof s3));
  }
  if (!last_dim_contiguous(x) || !last_dim_contiguous(w) || !last_dim_contiguous(y)) {
    return invalid(err, "%s: the last dimension of x, w and out must have stride 1", kn);
  }
  // Cores write disjoint columns of every y row, which needs distinct rows.
  if (y.shape[0] > 1 && y.shape[1] > 0 && (y.stride[0] < 0 ? -y.stride[0] : y.stride[0]) < y.shape[1]) {
    return invalid(err, "%s: out is a view whose rows overlap in memory", kn);
  }
  if (x.data == y.data && sk_tensor_numel(&y) > 0) return invalid(err, "%s: out must not alias x", kn);
  if (v.type == WType::kW8) {
    const sk_tensor_arg& ws = args->inputs[kOpWScale];
    if (!check_tensor(ws, kn, "w_scale", SK_DTYPE_F32, 2, err)) return false;
    if (ws.rank != 2 || ws.shape[0] != w.shape[0] || ws.shape[1] != w.shape[1]) {
      return invalid(err, "%s: w_scale shape %s is not [E, N] for w shape %s", kn, format_shape(ws, s1, sizeof s1),
                     format_shape(w, s2, sizeof s2));
    }
    if (!check_w8_k(x.shape[1], kn, "x", err)) return false;
    p->swse = ws.stride[0];
    p->swsn = ws.stride[1];
    p->w_scale = static_cast<const float*>(ws.data);
  }
  p->r = x.shape[0];
  p->k = x.shape[1];
  p->n = w.shape[1];
  p->e = w.shape[0];
  p->sx = x.stride[0];
  p->sy = y.stride[0];
  p->sc = counts.stride[0];
  p->swe = w.stride[0];
  p->swn = w.stride[1];
  p->x = static_cast<const float*>(x.data);
  p->counts = static_cast<const int32_t*>(counts.data);
  p->w = w.data;
  p->y = static_cast<float*>(y.data);
  return true;
}

int32_t tiling(const Variant& v, const sk_kernel_args* args, void* out, uint32_t capacity, uint32_t* size) {
  Plan p;
  if (!plan(v, args, &p, {})) return SK_ERR_INVALID_ARGUMENT;
  TilingHeader h{kTilingMagic, kTilingOk, -1, 0, 0, 0};
  for (int64_t e = 0; e < p.e; ++e) {
    const int64_t c = p.counts[e * p.sc];
    if (c < 0) {
      h.status = kTilingNegativeCount;
      h.bad_expert = e;
      h.bad_value = c;
      break;
    }
    h.total += c;
    if (c > 0) ++h.num_items;
  }
  if (h.status == kTilingOk && h.total > p.r) {
    h.status = kTilingTooManyRows;
    h.bad_value = h.total;
  }
  if (h.status != kTilingOk) h.num_items = 0;
  const uint64_t bytes = sizeof h + static_cast<uint64_t>(h.num_items) * sizeof(TilingItem);
  if (bytes > capacity) return SK_ERR_CAPACITY;
  auto* dst = static_cast<unsigned char*>(out);
  std::memcpy(dst, &h, sizeof h);
  int64_t row = 0;
  int64_t item = 0;
  for (int64_t e = 0; e < p.e && item < h.num_items; ++e) {
    const int64_t c = p.counts[e * p.sc];
    if (c == 0) continue;
    const TilingItem it{e, row, c};
    std::memcpy(dst + sizeof h + item * sizeof it, &it, sizeof it);
    row += c;
    ++item;
  }
  *size = static_cast<uint32_t>(bytes);
  return SK_OK;
}

// Reads and checks the tiling against the shapes; reports a routing error found by tiling.
bool read_tiling(const Variant& v, const sk_kernel_args* args, const Plan& p, TilingHeader* h, ErrorSink err) {
  if (args->tiling == nullptr || args->tiling_size < sizeof(TilingHeader)) {
    return invalid(err, "%s: no tiling (the runtime must run this tiling-sink kernel's tiling before run)", v.name);
  }
  std::memcpy(h, args->tiling, sizeof *h);
  if (h->magic != kTilingMagic || h->num_items < 0 ||
      args->tiling_size != sizeof(TilingHeader) + static_cast<uint64_t>(h->num_items) * sizeof(TilingItem)) {
    return invalid(err, "%s: the tiling is not this kernel's", v.name);
  }
  if (h->status == kTilingNegativeCount) {
    return invalid(err, "%s: counts[%lld] = %lld is negative", v.name, static_cast<long long>(h->bad_expert),
                   static_cast<long long>(h->bad_value));
  }
  if (h->status == kTilingTooManyRows) {
    return invalid(err, "%s: counts sum to %lld, more than the %lld rows of x", v.name,
                   static_cast<long long>(h->bad_value), static_cast<long long>(p.r));
  }
  if (h->status != kTilingOk || h->total < 0 || h->total > p.r) {
    return invalid(err, "%s: the tiling is not this kernel's", v.name);
  }
  return true;
}

int32_t run(const Variant& v, const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  TilingHeader h{};
  if (!check_core(core, v.name, err) || !plan(v, args, &p, err) || !read_tiling(v, args, p, &h, err)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
  if (r.begin >= r.end) return SK_OK;
  const auto* items = static_cast<const unsigned char*>(args->tiling) + sizeof(TilingHeader);
  // A tiling that does not describe these shapes would make run() write out of bounds.
  for (int64_t i = 0; i < h.num_items; ++i) {
    TilingItem it;
    std::memcpy(&it, items + i * sizeof it, sizeof it);
    if (it.expert < 0 || it.expert >= p.e || it.rows <= 0 || it.row_begin < 0 || it.row_begin + it.rows > h.total) {
      invalid(err, "%s: the tiling is not this kernel's", v.name);
      return SK_ERR_INVALID_ARGUMENT;
    }
  }
  const int64_t nn = r.end - r.begin;
  if (p.k > 0) {
    for (int64_t i = 0; i < h.num_items; ++i) {
      TilingItem it;
      std::memcpy(&it, items + i * sizeof it, sizeof it);
      const float* x = p.x + it.row_begin * p.sx;
      float* y = p.y + it.row_begin * p.sy + r.begin;
      const int64_t w_off = it.expert * p.swe + r.begin * p.swn;
      switch (v.type) {
        case WType::kF32:
          gemm_f32(x, p.sx, static_cast<const float*>(p.w) + w_off, p.swn, y, p.sy, it.rows, nn, p.k);
          break;
        case WType::kBf16:
          gemm_bf16(x, p.sx, static_cast<const uint16_t*>(p.w) + w_off, p.swn, y, p.sy, it.rows, nn, p.k);
          break;
        case WType::kF16:
          gemm_f16(x, p.sx, static_cast<const uint16_t*>(p.w) + w_off, p.swn, y, p.sy, it.rows, nn, p.k);
          break;
        case WType::kW8: {
          W8Rows rows;
          rows.x = x;
          rows.stride = p.sx;
          gemm_w8a8(rows, static_cast<const int8_t*>(p.w) + w_off, p.swn,
                    p.w_scale + it.expert * p.swse + r.begin * p.swsn, p.swsn, y, p.sy, it.rows, nn, p.k);
          break;
        }
      }
    }
  }
  // Rows without an expert, and every row when K = 0 (empty dot products).
  for (int64_t row = p.k > 0 ? h.total : 0; row < p.r; ++row) {
    float* y = p.y + row * p.sy;
    std::fill(y + r.begin, y + r.end, 0.0f);
  }
  return SK_OK;
}

// Conservative where counts decide: every row of x, all counts, and this core's rows of every
// expert's w (and w_scale). Exact for the writes, which depend on shapes only: columns
// [begin, end) of every row of y.
int32_t access(const Variant& v, const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
               sk_access_range* ranges, int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(v, args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.n, core_id, num_cores, kNSplitAlign);
  RangeList list(ranges, capacity);
  if (r.begin >= r.end || p.r == 0) return list.finish();
  const auto span = [](int64_t count, int64_t stride, int64_t* lo, int64_t* hi) {
    const int64_t last = (count - 1) * stride;
    *lo = std::min<int64_t>(0, last);
    *hi = std::max<int64_t>(0, last);
  };
  int64_t lo = 0;
  int64_t hi = 0;
  if (p.k > 0) {
    span(p.r, p.sx, &lo, &hi);
    list.add(kOpX, SK_ACCESS_READ, lo * 4, (hi + p.k) * 4);
  }
  if (p.e > 0) {
    span(p.e, p.sc, &lo, &hi);
    list.add(kOpCounts, SK_ACCESS_READ, lo * 4, (hi + 1) * 4);
  }
  if (p.k > 0) {
    for (int64_t e = 0; e < p.e; ++e) {
      const int64_t a = e * p.swe + r.begin * p.swn;
      const int64_t b = e * p.swe + (r.end - 1) * p.swn;
      list.add(kOpW, SK_ACCESS_READ, std::min(a, b) * v.w_size, (std::max(a, b) + p.k) * v.w_size);
    }
    if (v.type == WType::kW8) {
      for (int64_t e = 0; e < p.e; ++e) {
        const int64_t a = e * p.swse + r.begin * p.swsn;
        const int64_t b = e * p.swse + (r.end - 1) * p.swsn;
        list.add(kOpWScale, SK_ACCESS_READ, std::min(a, b) * 4, (std::max(a, b) + 1) * 4);
      }
    }
  }
  const int32_t out_op = v.num_inputs;
  for (int64_t row = 0; row < p.r; ++row) {
    const int64_t base = row * p.sy;
    list.add(out_op, SK_ACCESS_WRITE, (base + r.begin) * 4, (base + r.end) * 4);
  }
  return list.finish();
}

}  // namespace

// The entry points kernels.h declares for one variant.
#define SK_GROUPED_MATMUL_ENTRIES(prefix, variant)                                                                 \
  int32_t prefix##_run(const sk_kernel_args* args, const sk_core_ctx* core) { return run(variant, args, core); }   \
  int32_t prefix##_tiling(const sk_kernel_args* args, void* tiling_out, uint32_t capacity, uint32_t* size) {       \
    return tiling(variant, args, tiling_out, capacity, size);                                                      \
  }                                                                                                                \
  int32_t prefix##_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges, \
                          int32_t capacity) {                                                                      \
    return access(variant, args, core_id, num_cores, ranges, capacity);                                            \
  }

SK_GROUPED_MATMUL_ENTRIES(grouped_matmul_f32, kF32)
SK_GROUPED_MATMUL_ENTRIES(grouped_matmul_bf16, kBf16)
SK_GROUPED_MATMUL_ENTRIES(grouped_matmul_f16, kF16)
SK_GROUPED_MATMUL_ENTRIES(grouped_matmul_w8a8_dyn, kW8)

#undef SK_GROUPED_MATMUL_ENTRIES

}  // namespace sk::kernels
