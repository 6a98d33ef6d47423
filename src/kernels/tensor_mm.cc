// tensor.batched_mm: torch.matmul for ranks >= 2, out[batch..., M, N] = a[..., M, K] · b[..., K, N],
// the batch dims of a and b broadcast (right-aligned, size 1 or stride 0 repeats), any strides,
// f32 / bf16 / f16 (a and b of one dtype, f32 math, out rounded to it once).
//
// Numerics, the same for every layout: y[m][n] is the fixed tree of simd::hsum_lanes over eight
// partial sums, partial sum l adding a[m][k] * b[k][n] for k = l (mod 8) in increasing k with
// one FMA per step (a multiply, then an add, at the scalar level). So the value of an element
// depends on its row of a, its column of b and K only: not on M, N, the batch, the core split or
// how a and b are laid out. Three loops compute it at the avx2 level:
//   - b's rows contiguous (stride 1 along N, f32): eight columns at a time, one accumulator per
//     partial sum (eight independent FMA chains);
//   - b's columns contiguous (stride 1 along K, f32; e.g. k.transpose(-1, -2)): dot products of
//     the a row with four columns at a time, the partial sums being the vector lanes;
//   - otherwise (bf16 / f16, other strides): eight columns of b converted into the core's
//     workspace, then the dot products.
// Rows of a that are not contiguous f32 are converted into the workspace first.
//
// Cores split the output rows (batch, m) in order, so each writes one contiguous part of a dense
// out (an out whose rows interleave in memory, say a transposed view, is written by one core); a
// row reads its batch's b whole.
#include <algorithm>
#include <cstring>

#include "kernels/cpu_isa.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "kernels/tensor_common.h"
#include "kernels/tensor_dot.h"

namespace sk::kernels {
namespace {

using namespace tensor;

constexpr const char* kName = "tensor.batched_mm";
constexpr int64_t kPanel = 8;  // columns of b converted together on the general path

struct MmPlan {
  int batch_rank = 0;
  int64_t batch_shape[SK_MAX_RANK] = {};
  int64_t as[SK_MAX_RANK] = {};  // batch strides (0 where a broadcasts)
  int64_t bs[SK_MAX_RANK] = {};
  int64_t os[SK_MAX_RANK] = {};
  int64_t batches = 1;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t sam = 0, sak = 0;  // a's row and column strides
  int64_t sbk = 0, sbn = 0;
  int64_t som = 0, son = 0;
  bool split = true;  // out's rows lie in order in memory: cores may share them (else core 0 works)
};

// Whether the rows (batch..., m) of out are contiguous runs of N elements at increasing,
// disjoint addresses in row order (true for a dense out), so a contiguous share of rows is one
// byte range that no other core's share meets.
bool rows_ordered(const sk_tensor_arg& out) {
  const int r = out.rank;
  if (out.shape[r - 1] > 1 && out.stride[r - 1] != 1) return false;
  int64_t extent = out.shape[r - 1];
  for (int d = r - 2; d >= 0; --d) {
    if (out.shape[d] == 1) continue;
    if (out.stride[d] < extent) return false;
    extent += (out.shape[d] - 1) * out.stride[d];
  }
  return true;
}

bool plan_mm(const sk_kernel_args* args, MmPlan* p, ErrorSink err) {
  if (!check_arity(args, kName, 2, 1, err)) return false;
  const sk_tensor_arg& a = args->inputs[0];
  const sk_tensor_arg& b = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (!is_float(a.dtype))
    return invalid(err, "%s: a has dtype %s, expected f32, bf16 or f16", kName, dtype_str(a.dtype));
  if (!check_tensor(a, kName, "a", a.dtype, 2, err) || !check_tensor(b, kName, "b", a.dtype, 2, err) ||
      !check_tensor(out, kName, "out", a.dtype, 2, err)) {
    return false;
  }
  char s1[96];
  char s2[96];
  char s3[96];
  const int ra = a.rank;
  const int rb = b.rank;
  const int ro = out.rank;
  p->batch_rank = ro - 2;
  bool fits = a.shape[ra - 1] == b.shape[rb - 2] && out.shape[ro - 2] == a.shape[ra - 2] &&
              out.shape[ro - 1] == b.shape[rb - 1] && ra <= ro && rb <= ro;
  for (int d = 0; fits && d < p->batch_rank; ++d) {
    const int da = d - (ro - ra);
    const int db = d - (ro - rb);
    const int64_t n = out.shape[d];
    const int64_t na = da >= 0 ? a.shape[da] : 1;
    const int64_t nb = db >= 0 ? b.shape[db] : 1;
    fits = (na == n || na == 1) && (nb == n || nb == 1);
    p->batch_shape[d] = n;
    p->as[d] = na == 1 ? 0 : a.stride[da];
    p->bs[d] = nb == 1 ? 0 : b.stride[db];
    p->os[d] = out.stride[d];
    p->batches *= n;
  }
  if (!fits) {
    return invalid(err, "%s: shapes a %s, b %s, out %s are not [..., M, K], [..., K, N], [batch..., M, N]", kName,
                   format_shape(a, s1, sizeof s1), format_shape(b, s2, sizeof s2), format_shape(out, s3, sizeof s3));
  }
  // Every core reads whole batches of a and b while others write rows of out.
  // (Workspace sizing runs before operands have addresses: nothing to compare then.)
  if (!err.shapes_only && (views_overlap(a, out) || views_overlap(b, out))) {
    return invalid(err, "%s: out must not alias a or b", kName);
  }
  p->m = a.shape[ra - 2];
  p->k = a.shape[ra - 1];
  p->n = b.shape[rb - 1];
  p->sam = a.stride[ra - 2];
  p->sak = a.stride[ra - 1];
  p->sbk = b.stride[rb - 2];
  p->sbn = b.stride[rb - 1];
  p->som = out.stride[ro - 2];
  p->son = out.stride[ro - 1];
  p->split = rows_ordered(out);
  return true;
}

void batch_offsets(const MmPlan& p, int64_t batch, int64_t* ao, int64_t* bo, int64_t* oo) {
  int64_t idx[SK_MAX_RANK] = {};
  unflatten(batch, p.batch_rank, p.batch_shape, idx);
  *ao = *bo = *oo = 0;
  for (int d = 0; d < p.batch_rank; ++d) {
    *ao += idx[d] * p.as[d];
    *bo += idx[d] * p.bs[d];
    *oo += idx[d] * p.os[d];
  }
}

// Workspace per core: an a row and an out row in f32, and a panel of b.
struct Scratch {
  float* a_row;
  float* y_row;
  float* panel;
};

Scratch carve(const MmPlan& p, void* base, uint64_t* bytes) {
  ScratchCarver c(base);
  Scratch s{c.take<float>(p.k), c.take<float>(p.n), c.take<float>(kPanel * p.k)};
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

// One output row y[0, N) from the a row (contiguous f32) and the batch's b.
void compute_row(const MmPlan& p, const float* a_row, const sk_tensor_arg& b, int64_t b0, float* y, const Scratch& s) {
  const bool f32 = b.dtype == SK_DTYPE_F32;
  const float* bf = f32 ? static_cast<const float*>(b.data) + b0 : nullptr;
  if (p.k == 0) {
    std::fill(y, y + p.n, 0.0f);
    return;
  }
  if (!use_avx2()) {
    if (f32) {
      row_scalar(a_row, bf, p.sbk, p.sbn, y, p.n, p.k);
      return;
    }
  } else {
#if SK_KERNELS_X86
    if (f32 && p.sbn == 1 && p.n > 1) {
      row_axpy_avx2(a_row, bf, p.sbk, y, p.n, p.k);
      return;
    }
    if (f32 && (p.sbk == 1 || p.k == 1)) {
      row_dot_avx2(a_row, bf, p.sbn, y, p.n, p.k);
      return;
    }
#endif
  }
  // Convert kPanel columns of b at a time into [column][k] f32, then dot products.
  for (int64_t n0 = 0; n0 < p.n; n0 += kPanel) {
    const int64_t w = std::min(kPanel, p.n - n0);
    for (int64_t j = 0; j < w; ++j) {
      load_f32(b.dtype, elem_ptr(b, b0 + (n0 + j) * p.sbn), p.sbk, p.k, s.panel + j * p.k);
    }
    if (use_avx2()) {
#if SK_KERNELS_X86
      row_dot_avx2(a_row, s.panel, p.k, y + n0, w, p.k);
#endif
    } else {
      row_scalar(a_row, s.panel, 1, p.k, y + n0, w, p.k);
    }
  }
}

sk_range row_split(const MmPlan& p, int32_t core, int32_t cores) {
  const int64_t rows = p.batches * p.m;
  if (!p.split) return core == 0 ? sk_range{0, rows} : sk_range{rows, rows};
  return sk_split_range(rows, core, cores, 1);
}

}  // namespace

uint64_t tensor_batched_mm_workspace(const sk_kernel_args* args) {
  MmPlan p;
  if (!plan_mm(args, &p, ErrorSink{nullptr, 0, /*shapes_only=*/true})) return 0;
  uint64_t bytes = 0;
  carve(p, nullptr, &bytes);
  return bytes;
}

int32_t tensor_batched_mm_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  MmPlan p;
  if (!check_core(core, kName, err) || !plan_mm(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  uint64_t need = 0;
  carve(p, nullptr, &need);
  if (args->workspace == nullptr || args->workspace_size < need) return workspace_too_small(err, kName, args, need);
  const Scratch s = carve(p, core_slice(args, core), nullptr);
  const sk_tensor_arg& a = args->inputs[0];
  const sk_tensor_arg& b = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  const sk_range r = row_split(p, core->core_id, core->num_cores);
  const bool a_direct = a.dtype == SK_DTYPE_F32 && (p.sak == 1 || p.k <= 1);
  const bool y_direct = out.dtype == SK_DTYPE_F32 && (p.son == 1 || p.n <= 1);
  int64_t a0 = 0;
  int64_t b0 = 0;
  int64_t o0 = 0;
  int64_t batch = -1;
  for (int64_t row = r.begin; row < r.end; ++row) {
    if (row / p.m != batch) {
      batch = row / p.m;
      batch_offsets(p, batch, &a0, &b0, &o0);
    }
    const int64_t m = row % p.m;
    const float* a_row = s.a_row;
    if (a_direct) {
      a_row = static_cast<const float*>(a.data) + a0 + m * p.sam;
    } else {
      load_f32(a.dtype, elem_ptr(a, a0 + m * p.sam), p.sak, p.k, s.a_row);
    }
    float* y = y_direct ? static_cast<float*>(out.data) + o0 + m * p.som : s.y_row;
    compute_row(p, a_row, b, b0, y, s);
    if (!y_direct) store_f32(out.dtype, s.y_row, p.n, elem_ptr_mut(out, o0 + m * p.som), p.son);
  }
  return SK_OK;
}

int32_t tensor_batched_mm_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                 sk_access_range* ranges, int32_t capacity) {
  MmPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_mm(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = row_split(p, core_id, num_cores);
  RangeList list(ranges, capacity);
  if (r.begin >= r.end || p.n == 0) return list.finish();
  const sk_tensor_arg& a = args->inputs[0];
  const sk_tensor_arg& b = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  // Per batch: the rows of a and out this core owns, and all of b; one operand after the other
  // so that adjacent ranges merge, and a repeated (broadcast) b range is listed once.
  const auto span = [](int64_t base, int64_t r0, int64_t r1, int64_t sr, int64_t c1, int64_t sc, int64_t elem,
                       int64_t* lo, int64_t* hi) {
    *lo = (base + std::min(r0 * sr, r1 * sr) + std::min<int64_t>(0, c1 * sc)) * elem;
    *hi = (base + std::max(r0 * sr, r1 * sr) + std::max<int64_t>(0, c1 * sc) + 1) * elem;
  };
  for (int operand = 0; operand < 3; ++operand) {
    if (operand < 2 && p.k == 0) continue;
    int64_t last_lo = -1;
    int64_t last_hi = -1;
    for (int64_t batch = r.begin / p.m; batch <= (r.end - 1) / p.m; ++batch) {
      const int64_t m0 = std::max(r.begin, batch * p.m) - batch * p.m;
      const int64_t m1 = std::min(r.end, (batch + 1) * p.m) - batch * p.m - 1;
      int64_t a0 = 0;
      int64_t b0 = 0;
      int64_t o0 = 0;
      batch_offsets(p, batch, &a0, &b0, &o0);
      int64_t lo = 0;
      int64_t hi = 0;
      if (operand == 0) {
        span(a0, m0, m1, p.sam, p.k - 1, p.sak, sk_dtype_size(a.dtype), &lo, &hi);
      } else if (operand == 1) {
        span(b0, 0, p.k - 1, p.sbk, p.n - 1, p.sbn, sk_dtype_size(b.dtype), &lo, &hi);
      } else {
        span(o0, m0, m1, p.som, p.n - 1, p.son, sk_dtype_size(out.dtype), &lo, &hi);
      }
      if (lo == last_lo && hi == last_hi) continue;
      list.add(operand, operand == 2 ? SK_ACCESS_WRITE : SK_ACCESS_READ, lo, hi);
      last_lo = lo;
      last_hi = hi;
    }
  }
  return list.finish();
}

}  // namespace sk::kernels
