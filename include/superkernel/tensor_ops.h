// General tensor ops with PyTorch semantics: element-wise math with broadcasting, comparisons,
// reductions, casts, top-k, indexing, in-place index updates, concatenation, batched matrix
// products and scaled dot-product attention. Each builder appends one op (cat: one copy per
// operand) running a fusible kernel of the built-in package (tensor.*, docs/kernels_tensor.md),
// so these ops fuse into super kernels like the LLM kernels of ops.h and nn.h.
//
//   sk::Tensor x = g.input("x", sk::DType::kF32, {2, 8, 64});
//   sk::Tensor ms = sk::reduce(g, sk::binary_scalar(g, x, 2.0, sk::BinaryOp::kPow),
//                              sk::ReduceOp::kMean, {-1}, /*keepdim=*/true);
//   sk::Tensor inv = sk::unary(g, sk::binary_scalar(g, ms, 1e-6, sk::BinaryOp::kAdd), sk::UnaryOp::kRsqrt);
//   sk::Tensor y = sk::binary(g, x, inv, sk::BinaryOp::kMul);          // [2, 8, 64] * [2, 8, 1]
//   sk::Tensor mask = sk::binary_scalar(g, y, 0.0, sk::BinaryOp::kGt);  // bool [2, 8, 64]
//   sk::TopK best = sk::topk(g, y, 4);                                  // values, i64 indices
//
// Common rules:
//  - Operands may be any view: slices, transposes and expand views (stride 0) are read in place.
//    Outputs are new dense tensors, except index_copy / index_put, which update `dst` in place.
//  - Dims may be negative (counted from the end). `name` names the op (default "<kernel>_<n>").
//  - Floating-point math is f32: bf16 / f16 operands are widened exactly, a result is rounded to
//    the output dtype once. Integer math is exact (i64; i32 results wrap like torch's).
//  - Every result element is computed by one core in an order fixed by the op's definition, so
//    outputs are bit-identical in every execution mode and on any number of cores.
//  - Bad operands (shapes, dtypes, dims, ranks) are recorded on the graph as errors naming the op
//    and the operand (graph.h); the builder still returns a tensor of the best shape it can infer.
#ifndef SUPERKERNEL_TENSOR_OPS_H_
#define SUPERKERNEL_TENSOR_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "superkernel/attrs_tensor.h"
#include "superkernel/graph.h"

namespace sk {

// ---- Element-wise ----------------------------------------------------------------------------

enum class UnaryOp : int32_t {
  kNeg = SK_UNARY_NEG,
  kExp = SK_UNARY_EXP,
  kLog = SK_UNARY_LOG,
  kSqrt = SK_UNARY_SQRT,
  kRsqrt = SK_UNARY_RSQRT,
  kSin = SK_UNARY_SIN,
  kCos = SK_UNARY_COS,
  kTanh = SK_UNARY_TANH,
  kSigmoid = SK_UNARY_SIGMOID,
  kSilu = SK_UNARY_SILU,
  kGelu = SK_UNARY_GELU,           // erf form (torch's gelu, approximate="none")
  kGeluTanh = SK_UNARY_GELU_TANH,  // approximate="tanh"
  kRelu = SK_UNARY_RELU,
  kAbs = SK_UNARY_ABS,
  kReciprocal = SK_UNARY_RECIPROCAL,
  kLogicalNot = SK_UNARY_LOGICAL_NOT,
};
const char* unary_op_name(UnaryOp op);

// Output dtype: x's dtype; bool for kLogicalNot (any x dtype: x != 0); f32 for the float-only
// ops (all but kNeg, kRelu, kAbs, kLogicalNot) on integer or bool x, as torch promotes.
// kNeg, kRelu and kAbs of a bool x are errors.
Tensor unary(Graph& g, Tensor x, UnaryOp op, std::string name = "");

enum class BinaryOp : int32_t {
  kAdd = SK_BINARY_ADD,
  kSub = SK_BINARY_SUB,
  kMul = SK_BINARY_MUL,
  kDiv = SK_BINARY_DIV,  // true division (integers give f32, as torch)
  kPow = SK_BINARY_POW,
  kMaximum = SK_BINARY_MAXIMUM,  // NaN-propagating, as torch.maximum
  kMinimum = SK_BINARY_MINIMUM,
  kEq = SK_BINARY_EQ,
  kNe = SK_BINARY_NE,
  kLt = SK_BINARY_LT,
  kLe = SK_BINARY_LE,
  kGt = SK_BINARY_GT,
  kGe = SK_BINARY_GE,
  kLogicalAnd = SK_BINARY_LOGICAL_AND,  // operands of any dtype, != 0 is true
  kLogicalOr = SK_BINARY_LOGICAL_OR,
};
const char* binary_op_name(BinaryOp op);

// a and b broadcast numpy/torch-style (right-aligned; each dim equal or 1; missing leading dims
// are 1) to the output shape. Dtypes: equal, or one side has one element (a 0-d or [1]-shaped
// tensor) and then torch's promotion applies: the other side's dtype wins unless the one-element
// side is of a higher category (bool < integer < float), whose dtype then wins. The compute
// dtype is that promoted dtype; comparisons and logical ops give bool, kDiv of integers gives f32,
// and arithmetic (kAdd .. kMinimum) on bool is an error (cast first). Integer kPow needs
// exponents >= 0 (a negative one is a kernel error, as torch raises). torch itself treats only
// 0-d tensors as scalars: for a [1]-shaped operand of another dtype of the same category
// (bf16[3] + f32[1]) torch gives the wider dtype (f32), this gives the other side's (bf16); pass
// a 0-d tensor or cast first where that matters.
Tensor binary(Graph& g, Tensor a, Tensor b, BinaryOp op, std::string name = "");

// op(a, scalar), or op(scalar, a) with scalar_first: `x * 0.5`, `2.0 - x`, `pow(x, 2)`. The
// scalar is an attribute, not a tensor. The result keeps a's dtype (bool for comparisons and
// logical ops; f32 for kDiv of an integer a). On an integer a the scalar must be integral (an
// error otherwise: torch would promote to f32, so cast a first); arithmetic on a bool a is an
// error. Comparisons of an integer a with a non-integral scalar are allowed (computed in f32).
Tensor binary_scalar(Graph& g, Tensor a, double scalar, BinaryOp op, bool scalar_first = false, std::string name = "");

// cond ? a : b, all three broadcast to the output shape; cond is bool; a and b follow binary()'s
// dtype rules (the promoted dtype is the output's).
Tensor where(Graph& g, Tensor cond, Tensor a, Tensor b, std::string name = "");

// Converts x to `to`: floats round to nearest even when narrowing; float -> integer truncates
// toward zero, with NaN and out-of-range values giving the integer type's minimum (what torch
// gives on x86-64); integers narrow by wrapping; -> bool is x != 0 (NaN is true); bool -> any
// is 0 or 1. Integers go to bf16 / f16 through f32.
Tensor cast(Graph& g, Tensor x, DType to, std::string name = "");

// ---- Reductions ------------------------------------------------------------------------------

enum class ReduceOp : int32_t {
  kSum = SK_REDUCE_SUM,
  kMean = SK_REDUCE_MEAN,
  kMax = SK_REDUCE_MAX,
  kMin = SK_REDUCE_MIN,
  kArgmax = SK_REDUCE_ARGMAX,  // i64, ties to the lowest (row-major) index, NaN counts as largest
  kArgmin = SK_REDUCE_ARGMIN,  // i64, ties to the lowest index, NaN counts as smallest
};
const char* reduce_op_name(ReduceOp op);

// Reduces the listed dims (empty: all dims; kArgmax / kArgmin take at most one dim, or none for
// the flattened tensor, as torch). keepdim keeps them as size 1. Output dtype: kSum of integers
// or bool gives i64; kMean needs a float x; kMax / kMin keep x's dtype; kMax, kMin, kArgmax and
// kArgmin of an empty reduction are errors. Float sums and means use a fixed order: eight partial
// sums over the reduced elements in row-major order (element i goes to sum i mod 8), combined by
// the fixed tree of docs/kernels_tensor.md; means divide that sum by the count. Max and min
// propagate NaN.
Tensor reduce(Graph& g, Tensor x, ReduceOp op, std::vector<int> dims, bool keepdim, std::string name = "");

// Running sum along `dim` (in order, f32 for floats, exact i64 for integers and bool). Output
// dtype: x's for floats, i64 for integers and bool (torch's rule).
Tensor cumsum(Graph& g, Tensor x, int dim, std::string name = "");

struct TopK {
  Tensor values;   // x's dtype
  Tensor indices;  // i64
};
// The k largest (or smallest) elements along `dim`, best first; ties go to the lower index;
// NaN counts as larger than every number (first with largest, last with smallest), as torch.
// The output is always sorted (sorted = false gives the same result: torch leaves that order
// unspecified). k may be 0.
TopK topk(Graph& g, Tensor x, int64_t k, int dim = -1, bool largest = true, bool sorted = true, std::string name = "");

// ---- Indexing --------------------------------------------------------------------------------

// x with `dim` replaced by the 1-D index (i32 or i64): out[.., i, ..] = x[.., index[i], ..].
// Indices must be in [0, n) (torch rejects negative ones too); any other is a kernel error
// naming the index position and value, and the op writes nothing.
Tensor index_select(Graph& g, Tensor x, int dim, Tensor index, std::string name = "");

// torch.gather: out has index's shape, out[i][j][k] = x[i][index[i][j][k]][k] (dim = 1); index
// (i32 or i64) has x's rank and index.shape[d] <= x.shape[d] for d != dim. Range rule as
// index_select.
Tensor gather(Graph& g, Tensor x, int dim, Tensor index, std::string name = "");

// torch's dst.index_copy_(dim, index, src), in place: dst[.., index[i], ..] = src[.., i, ..].
// dst is a variable, a declared tensor or a view of one (a static KV cache); src has dst's shape
// with `dim` of index's length and dst's dtype; index is 1-D i32 / i64. A duplicate index takes
// the last src slice. An out-of-range index is a kernel error (the run fails naming the op and
// the index) and nothing is written outside dst.
void index_copy(Graph& g, Tensor dst, int dim, Tensor index, Tensor src, std::string name = "");

// torch's dst.index_put_(indices, values, accumulate) for indices on the leading dims: indices
// are 1-D i32 / i64 tensors of one length N indexing dims 0 .. n-1 of dst; values has shape
// [N, dst.shape[n:]...] (or broadcasts to it) and dst's dtype. With accumulate, duplicates add up
// in index order; without, the last one wins. Runs on one core (a cache update is small; the
// leading-dim rows it writes are data). Returns dst. Range rule as index_copy.
Tensor index_put(Graph& g, Tensor dst, std::vector<Tensor> indices, Tensor values, bool accumulate,
                 std::string name = "");

// torch.cat: one dense tensor, filled by one copy per operand into its slice (the copies fuse
// like any op). Operands have one dtype and equal shapes except along `dim`.
Tensor cat(Graph& g, std::vector<Tensor> xs, int dim, std::string name = "");

// ---- Matrix products and attention -----------------------------------------------------------

// torch.matmul for ranks >= 2: a [..., M, K] times b [..., K, N] -> [batch..., M, N], the batch
// dims broadcast; f32, bf16 or f16 (a and b of one dtype, f32 accumulation, the output in that
// dtype). y[m][n] adds a[m][k] * b[k][n] for k = 0 .. K-1 in order. When b is the transpose of a
// dense f32 [N, K] matrix (`x @ w.t()`, a Linear weight) and a's last dim is contiguous, it is
// matmul.f32 (the fast weight-streaming kernel, its numerics in docs/kernels_matmul.md).
Tensor batched_mm(Graph& g, Tensor a, Tensor b, std::string name = "");

// torch.nn.functional.scaled_dot_product_attention: q [B, H, Lq, D], k [B, Hkv, Lk, D],
// v [B, Hkv, Lk, Dv] -> [B, H, Lq, Dv] in q's dtype; H a multiple of Hkv (query head h reads kv
// head h / (H / Hkv), GQA); f32, bf16 or f16 (q, k, v of one dtype). attn_mask (invalid Tensor{}
// = none) is bool (true = attend) or of q's dtype (added to the scores) and broadcasts to
// [B, H, Lq, Lk]; is_causal lets query i attend to keys j <= i (top-left aligned, as torch) and
// excludes a mask. scale <= 0 means 1 / sqrt(D). A query row whose keys are all masked gives
// zeros (torch's result since 2.5).
Tensor sdpa(Graph& g, Tensor q, Tensor k, Tensor v, Tensor attn_mask = {}, bool is_causal = false, double scale = 0.0,
            std::string name = "");

}  // namespace sk

#endif  // SUPERKERNEL_TENSOR_OPS_H_
