// Internal interface of the matmul family (matmul*.cc, quantize.cc, grouped_matmul.cc): the
// per-dtype entry points of the one GEMM driver (matmul_driver.h) that the plain, quantised and
// grouped kernels share, and the common argument checks of "x[..., K] times w[N, K] transposed"
// operands.
//
// Every driver computes y[m * sy + n] for m < M, n < N from x rows (stride sx) and w rows
// (stride sw), with a numeric definition that depends only on (x row, w row, K, ISA level):
// never on M, N, the addresses or the tile a dot product lands in. A kernel that splits N (or
// rows) between cores therefore gets bitwise the same output on any number of cores.
#ifndef SUPERKERNEL_KERNELS_GEMV_KERNELS_H_
#define SUPERKERNEL_KERNELS_GEMV_KERNELS_H_

#include <superkernel/kernel_abi.h>

#include <cstdint>

#include "kernels/kernel_util.h"

namespace sk::kernels {

// ---- Drivers ----

// matmul.cc: f32 x, f32 w. Lane-structured f32 dot products (see matmul.cc).
void gemm_f32(const float* x, int64_t sx, const float* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
              int64_t k);

// matmul_bf16.cc: f32 x, bf16 w (raw uint16 bit patterns).
void gemm_bf16(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
               int64_t k);

// matmul_f16.cc: f32 x, IEEE half w (raw uint16 bit patterns).
void gemm_f16(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
              int64_t k);

// matmul_w8a8.cc: the rows of the left operand come either quantised already (q with one scale
// per row) or as f32 that the driver quantises exactly like quantize.i8 does.
struct W8Rows {
  const int8_t* q = nullptr;     // quantised rows, or null when `x` is set
  const float* x = nullptr;      // f32 rows to quantise (matmul.w8a8_dyn)
  int64_t stride = 0;            // elements between rows of q or x
  const float* scale = nullptr;  // per-row scales of q (unused with x)
  int64_t scale_stride = 0;
};
// y[m][n] = float(sum_k q[m][k] * w[n][k]) * (row_scale[m] * w_scale[n]), the sum exact in int32
// (so any order gives the same bits) and q values of -128 read as -127. k <= kW8MaxK (callers
// check it with their operand names); k = 0 gives zeros.
void gemm_w8a8(const W8Rows& rows, const int8_t* w, int64_t sw, const float* w_scale, int64_t sws, float* y, int64_t sy,
               int64_t m, int64_t n, int64_t k);
// Row m of the left operand, k values from k0, as q (matmul_w8a8.cc): q's -128 read as -127, or x
// quantised like quantize.i8 (then k0 must be 0: the scale is the whole row's). Returns the row's
// scale. Every W8A8 path packs its rows through this.
float w8_row_q(const W8Rows& rows, int64_t m, int64_t k0, int64_t kn, int8_t* q);

// quantize.cc: symmetric per-row quantisation, the definition quantize.i8 documents:
// scale = max|x| / 127 (NaN ignored), q = round_half_even(clamp(x / scale, -127, 127)) with
// NaN quotients (0 / 0, inf / inf, NaN inputs) giving 0. Returns the scale.
float quantize_row(const float* x, int64_t k, int8_t* q);

// ---- Limits and split ----

// K bound of the int8 kernels: |sum q * w| <= K * 127 * 128 stays far inside int32, and the
// biased VNNI form sum (w + 128) * q (at most K * 255 * 127) does too.
inline constexpr int64_t kW8MaxK = 65536;
// K <= kW8MaxK, else an error naming the kernel and the operand K is read from.
bool check_w8_k(int64_t k, const char* kernel, const char* what, ErrorSink err);

// Split granularity of N between cores: 16 f32 outputs are one cache line, so cores never share
// a line of an aligned output row.
inline constexpr int64_t kNSplitAlign = 16;

// ---- Checks shared by the "x[..., K] times w[N, K] transposed" kernels ----

// Checks w ([N, K], last dim contiguous) against x's K and out ([..., N]) against x's leading
// dims, and builds the row walk (operand 0 = x, 1 = out, and 2 = `row_scale` when given: a
// tensor of x's leading shape with one element per row). `x_what` names x in messages.
bool plan_linear_rows(const sk_tensor_arg& x, const sk_tensor_arg& w, const sk_tensor_arg& out, const char* kernel,
                      const char* x_what, Walk* rows, ErrorSink err, const sk_tensor_arg* row_scale = nullptr);

// Access ranges of a kernel that splits N: the core reads every row of x (walk operand 0, rows
// of `k` elements of x_size bytes), rows [n_begin, n_end) of w (stride w_stride, w_size bytes)
// and writes columns [n_begin, n_end) of every out row (walk operand 1). Operand numbers are
// x_op, w_op, out_op.
void add_linear_access(RangeList& list, const Walk& rows, int64_t k, int64_t x_size, int32_t x_op, int64_t w_stride,
                       int64_t w_size, int32_t w_op, int32_t out_op, sk_range n_range);

// Touches the first `bytes` bytes of the first `rows` rows of w (rows `row_stride` bytes apart),
// so the first tiles of a weight-streaming kernel do not start on cold misses. Never faults.
void prefetch_weight_rows(const void* w, int64_t row_stride, int64_t rows, int64_t bytes);

// Most bytes of its weight slice a prologue running ahead of its waits asks into L2. Issuing a
// prefetch per line costs the core time even when the line is already there: 256 KiB made
// early start 1.5x slower on L2-resident matvec chains (sk_bench_ablation), 32 KiB keeps the
// cost within a short wait.
inline constexpr int64_t kAheadPrefetchBytes = 32 * 1024;

// The prologue of a weight-streaming kernel: warms the first lines of the first rows of the core's
// weight slice (`rows` rows of `row_bytes` bytes, `row_stride` bytes apart) into L1 (a GEMV tile
// reads 8 rows side by side); running ahead of its waits (SK_CORE_AHEAD in `core->flags`, early
// start), it also asks the rest of the slice, up to kAheadPrefetchBytes, into L2 while the core
// would otherwise idle.
void prefetch_weight_slice(const void* w, int64_t row_stride, int64_t rows, int64_t row_bytes, const sk_core_ctx* core);

// Writes zeros to columns [n_begin, n_end) of every out row of the walk.
void zero_linear_rows(const Walk& rows, float* out, sk_range n_range);

}  // namespace sk::kernels

#endif  // SUPERKERNEL_KERNELS_GEMV_KERNELS_H_
