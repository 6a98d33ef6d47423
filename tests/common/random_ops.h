// Random ops of every built-in kernel family, for the random-graph property tests
// (tests/common/random_graph.h) and the graph fuzz target (tests/fuzz/graph_fuzz.cc).
//
// Every family reads f32 [rows, d] tensors of a pool and returns one f32 [rows, d] tensor that
// the caller adds to the pool, so families chain in any order and data flows between them the
// way it does in a decoder: projections into heads, rotary embedding, KV-cache appends (graph
// variables updated in place) and paged or latent attention over them, int8 and bf16 linears,
// MoE routing, dispatch, grouped matmuls and combine, argmax or sampling followed by an
// embedding lookup, f16 and group-wise 4-bit linears, and the general tensor kernels
// (element-wise with broadcasting, bool masks and casts, reductions, indexing and in-place index
// updates, top-k and cat, batched matrix products, scaled dot-product attention), each cast or
// reduced back to f32 [rows, d]. Operands that index (positions, slot mappings, block tables, context
// lengths, sequence ids, expert ids) are drawn valid, as the kernels' contracts require
// (docs/kernels_*.md): the graphs test the compiler and runtime, not the kernels' errors.
//
// Structural choices come from a `Pick` (a seeded generator in the property tests, the fuzz
// bytes in the fuzz target); float data from a generator seeded once per graph, so fuzz bytes
// go to structure only.
//
//   sk::testing::RandomOps ops(g, pick, seed, rows, d, &inputs);
//   sk::Tensor y = ops.build(sk::testing::Family::kPagedAttention, pool);
#ifndef SUPERKERNEL_TESTS_COMMON_RANDOM_OPS_H_
#define SUPERKERNEL_TESTS_COMMON_RANDOM_OPS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "superkernel/attrs_attention.h"
#include "superkernel/attrs_core.h"
#include "superkernel/attrs_moe.h"
#include "superkernel/graph.h"
#include "superkernel/nn.h"
#include "superkernel/ops.h"
#include "superkernel/tensor_ops.h"
#include "util/half.h"

namespace sk::testing {

// An integer in [lo, hi].
using Pick = std::function<int(int lo, int hi)>;

// One row per family: X(enum, "name"). Each family is one group of ops (its kernels in
// docs/RELIABILITY.md's table).
#define SK_RANDOM_FAMILY_LIST(X)                                                                        \
  X(kAdd, "add")                              /* add.f32 */                                             \
  X(kMul, "mul")                              /* mul.f32 */                                             \
  X(kAddBroadcast, "add_broadcast")           /* add.f32 of a [d] weight */                             \
  X(kSiluMul, "silu_mul")                     /* silu_mul.f32 */                                        \
  X(kRmsNorm, "rms_norm")                     /* rms_norm.f32 */                                        \
  X(kSoftmax, "softmax")                      /* softmax.f32 */                                         \
  X(kMatmul, "matmul")                        /* matmul.f32 */                                          \
  X(kViews, "views")                          /* copy of transpose and slice views */                   \
  X(kEmbedding, "embedding")                  /* embedding.f32 of constant ids */                       \
  X(kMatmulBf16, "matmul_bf16")               /* matmul.bf16 */                                         \
  X(kQuantizeW8A8, "quantize_w8a8")           /* quantize.i8 + matmul.w8a8 */                           \
  X(kMatmulW8A8Dyn, "matmul_w8a8_dyn")        /* matmul.w8a8_dyn */                                     \
  X(kLayerNorm, "layer_norm")                 /* layer_norm.f32 */                                      \
  X(kRope, "rope")                            /* rope.f32 */                                            \
  X(kPagedAttention, "paged_attention")       /* kv_append + paged_attention (decode) */                \
  X(kPagedPrefill, "paged_prefill")           /* kv_append + paged_attention_prefill */                 \
  X(kMlaAttention, "mla_attention")           /* mla_cache_append + mla_attention */                    \
  X(kMlaPrefill, "mla_prefill")               /* mla_cache_append + mla_attention_prefill */            \
  X(kBatchedMatmul, "batched_matmul")         /* batched_matmul.f32 over head views */                  \
  X(kMoe, "moe")                              /* router, dispatch, grouped matmuls, combine */          \
  X(kArgmax, "argmax")                        /* argmax.f32 + embedding */                              \
  X(kSample, "sample")                        /* sample.f32 + embedding */                              \
  X(kPrefetch, "prefetch")                    /* prefetch of a weight or tensor range */                \
  X(kInPlace, "in_place")                     /* add/mul/rope/layer_norm writing a variable in place */ \
  X(kMatmulF16, "matmul_f16")                 /* matmul.f16 */                                          \
  X(kMatmulW4A8Dyn, "matmul_w4a8_dyn")        /* matmul.w4a8_dyn (group-wise 4-bit weights) */          \
  X(kMatmulW4, "matmul_w4")                   /* matmul.w4 (4-bit weights, f32 activations) */          \
  X(kTensorElementwise, "tensor_elementwise") /* tensor.unary/binary/binary_scalar/where/cast */        \
  X(kTensorReduce, "tensor_reduce")           /* tensor.reduce, tensor.cumsum */                        \
  X(kTensorIndex, "tensor_index")             /* tensor.index_select/gather/index_copy/index_put */     \
  X(kTensorTopkCat, "tensor_topk_cat")        /* tensor.topk + cat (copy) */                            \
  X(kTensorBatchedMm, "tensor_batched_mm")    /* tensor.batched_mm (f32, bf16, f16) */                  \
  X(kTensorSdpa, "tensor_sdpa")               /* tensor.sdpa (masks, causal, GQA) */

enum class Family : int {
#define SK_FAMILY_ENUM_(e, name) e,
  SK_RANDOM_FAMILY_LIST(SK_FAMILY_ENUM_)
#undef SK_FAMILY_ENUM_
      kCount
};
constexpr int kNumFamilies = static_cast<int>(Family::kCount);

inline const char* family_name(Family f) {
  static const char* const kNames[] = {
#define SK_FAMILY_NAME_(e, name) name,
      SK_RANDOM_FAMILY_LIST(SK_FAMILY_NAME_)
#undef SK_FAMILY_NAME_
  };
  return kNames[static_cast<int>(f)];
}

// The families the graphs drew from before every kernel family was generated: the v0 ops.
inline bool is_v0_family(Family f) { return static_cast<int>(f) <= static_cast<int>(Family::kEmbedding); }

// Built-in kernels no family generates, each with the reason (docs/RELIABILITY.md lists them):
// a kernel name starting with one of these prefixes is left out of the families' coverage guard
// (tests/unit/families_property_test.cc).
struct ExcludedKernels {
  const char* prefix;
  const char* reason;
};
inline const std::vector<ExcludedKernels>& kernels_without_family() {
  static const std::vector<ExcludedKernels> kList = {
      {"comm.", "collectives need an MPI communicator of several ranks; tested under mpirun"},
  };
  return kList;
}
// The reason `kernel` is left out, or nullptr when a family must generate it.
inline const char* why_no_family(const std::string& kernel) {
  for (const ExcludedKernels& e : kernels_without_family())
    if (kernel.rfind(e.prefix, 0) == 0) return e.reason;
  return nullptr;
}

// Bytes of a graph input or the initial contents of a variable, any dtype.
struct InputBytes {
  std::string name;
  std::vector<uint8_t> bytes;
};

class RandomOps {
 public:
  // `inputs` receives the data of the graph inputs the ops create (index operands are sometimes
  // inputs rather than constants) and the initial contents of their variables.
  RandomOps(Graph& g, Pick pick, uint32_t data_seed, int64_t rows, int64_t d, std::vector<InputBytes>* inputs)
      : g_(g), pick_(std::move(pick)), rng_(data_seed), rows_(rows), d_(d), inputs_(inputs) {}

  // Appends one instance of `family` reading `pool` (f32 [rows, d] tensors, not empty);
  // returns its f32 [rows, d] result (prefetch returns `latest`, the last pool tensor).
  Tensor build(Family family, const std::vector<Tensor>& pool) {
    pool_ = &pool;
    ++built_[static_cast<int>(family)];
    switch (family) {
      case Family::kAdd:
        return add(g_, any(), any());
      case Family::kMul:
        return mul(g_, any(), any());
      case Family::kAddBroadcast:
        return add(g_, any(), f32({d_}, 1.0f));
      case Family::kSiluMul:
        return silu_mul(g_, any(), any());
      case Family::kRmsNorm:
        return rms_norm(g_, any(), f32({d_}, 1.0f), 1e-5f);
      case Family::kSoftmax:
        return softmax(g_, any());
      case Family::kMatmul:
        return matmul(g_, any(), f32({d_, d_}, scale_of(d_)));
      case Family::kViews:
        return views();
      case Family::kEmbedding:
        return embedding_of(ids_const(rows_, pick(1, 16)));
      case Family::kMatmulBf16:
        return nn::linear(g_, any(), {bf16({d_, d_}, scale_of(d_)), Tensor{}});
      case Family::kQuantizeW8A8:
        return quantize_w8a8();
      case Family::kMatmulW8A8Dyn:
        return nn::linear(g_, any(), int8_linear(d_, d_));
      case Family::kLayerNorm:
        return layer_norm();
      case Family::kRope:
        return rope();
      case Family::kPagedAttention:
        return paged_attention(/*prefill=*/false);
      case Family::kPagedPrefill:
        return paged_attention(/*prefill=*/true);
      case Family::kMlaAttention:
        return mla_attention(/*prefill=*/false);
      case Family::kMlaPrefill:
        return mla_attention(/*prefill=*/true);
      case Family::kBatchedMatmul:
        return batched_matmul();
      case Family::kMoe:
        return moe();
      case Family::kArgmax:
        return embedding_of(nn::argmax(g_, logits(vocab_)));
      case Family::kSample:
        return sample();
      case Family::kPrefetch:
        prefetch_range();
        return pool.back();
      case Family::kInPlace:
        return in_place();
      case Family::kMatmulF16:
        return nn::linear(g_, any(), {f16({d_, d_}, scale_of(d_)), Tensor{}});
      case Family::kMatmulW4A8Dyn:
        return int4_linear(/*f32_activations=*/false);
      case Family::kMatmulW4:
        return int4_linear(/*f32_activations=*/true);
      case Family::kTensorElementwise:
        return tensor_elementwise();
      case Family::kTensorReduce:
        return tensor_reduce();
      case Family::kTensorIndex:
        return tensor_index();
      case Family::kTensorTopkCat:
        return tensor_topk_cat();
      case Family::kTensorBatchedMm:
        return tensor_batched_mm();
      case Family::kTensorSdpa:
        return tensor_sdpa();
      case Family::kCount:
        break;
    }
    return pool.back();
  }

  // How many instances of each family were built.
  const std::vector<int>& built() const { return built_; }
  // Tensors worth comparing besides the pool (KV and latent caches, router ids, expert counts,
  // the in-place state): the caller may make them graph outputs.
  const std::vector<Tensor>& side_outputs() const { return side_; }

 private:
  int pick(int lo, int hi) { return pick_(lo, hi); }
  Tensor any() { return (*pool_)[pick(0, static_cast<int>(pool_->size()) - 1)]; }
  std::string fresh(const char* prefix) { return "r_" + std::string(prefix) + std::to_string(names_++); }
  static float scale_of(int64_t fan_in) { return 1.5f / std::sqrt(static_cast<float>(std::max<int64_t>(fan_in, 1))); }

  std::vector<float> uniform(int64_t n, float scale) {
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = dist(rng_);
    return v;
  }
  Tensor f32(Shape shape, float scale) {
    const std::vector<float> v = uniform(shape_numel(shape), scale);
    return g_.constant_f32(fresh("w"), std::move(shape), v);
  }
  Tensor bf16(Shape shape, float scale) {
    const std::vector<float> v = uniform(shape_numel(shape), scale);
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
    return g_.constant(fresh("wb"), DType::kBF16, std::move(shape), h.data(), h.size() * sizeof(uint16_t));
  }
  Tensor f16(Shape shape, float scale) {
    const std::vector<float> v = uniform(shape_numel(shape), scale);
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_f16(v[i]);
    return g_.constant(fresh("wh"), DType::kF16, std::move(shape), h.data(), h.size() * sizeof(uint16_t));
  }
  Tensor i8(Shape shape) {
    std::uniform_int_distribution<int> dist(-128, 127);
    std::vector<int8_t> v(static_cast<size_t>(shape_numel(shape)));
    for (int8_t& x : v) x = static_cast<int8_t>(dist(rng_));
    return g_.constant(fresh("wq"), DType::kI8, std::move(shape), v.data(), v.size());
  }
  // A graph variable (a KV or latent cache, the in-place state) that usually starts with random
  // contents, as a cache does after earlier steps (set through set_input), else zeros.
  Tensor variable(const char* prefix, DType dtype, Shape shape) {
    const std::string name = fresh(prefix);
    const Tensor v = g_.variable(name, dtype, shape);
    if (pick(0, 3) != 0) {
      const std::vector<float> values = uniform(shape_numel(shape), 1.0f);
      InputBytes in{name, {}};
      if (dtype == DType::kBF16) {
        in.bytes.resize(values.size() * sizeof(uint16_t));
        for (size_t i = 0; i < values.size(); ++i) {
          const uint16_t h = f32_to_bf16(values[i]);
          std::memcpy(in.bytes.data() + i * sizeof h, &h, sizeof h);
        }
      } else {
        in.bytes.resize(values.size() * sizeof(float));
        std::memcpy(in.bytes.data(), values.data(), in.bytes.size());
      }
      inputs_->push_back(std::move(in));
    }
    side_.push_back(v);
    return v;
  }
  // An index operand: a constant, or now and then a graph input fed before each run.
  template <typename T>
  Tensor index(Shape shape, const std::vector<T>& values) {
    const DType dtype = sizeof(T) == 8 ? DType::kI64 : DType::kI32;
    const size_t bytes = values.size() * sizeof(T);
    if (pick(0, 3) == 0) {
      const std::string name = fresh("idx_in");
      InputBytes in{name, std::vector<uint8_t>(bytes)};
      if (bytes > 0) std::memcpy(in.bytes.data(), values.data(), bytes);
      inputs_->push_back(std::move(in));
      return g_.input(name, dtype, std::move(shape));
    }
    return g_.constant(fresh("idx"), dtype, std::move(shape), values.data(), bytes);
  }
  Tensor ids_const(int64_t n, int vocab) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) id = pick(0, vocab - 1);
    vocab_ = vocab;
    return index<int32_t>({n}, ids);
  }
  // ids i32 [rows] in [0, vocab_) -> f32 [rows, d].
  Tensor embedding_of(Tensor ids) { return embedding(g_, ids, f32({vocab_, d_}, 1.0f)); }
  // f32 [rows, vocab] logits of a random vocabulary size; sets vocab_.
  Tensor logits(int& vocab) {
    vocab = pick(1, 40);
    return matmul(g_, any(), f32({vocab, d_}, 2.0f * scale_of(d_)));
  }
  // A [rows, n] projection of a pool tensor.
  Tensor project(int64_t n) { return matmul(g_, any(), f32({n, d_}, scale_of(d_))); }
  // Back to [rows, d] from a [rows, n] tensor (n == d keeps it, as often as not).
  Tensor to_model_dim(Tensor x, int64_t n) {
    if (n == d_ && pick(0, 1) == 0) return x;
    return matmul(g_, x, f32({d_, n}, scale_of(n)));
  }
  nn::Linear int8_linear(int64_t out, int64_t in) {
    std::vector<float> s = uniform(out, 0.02f);
    for (float& x : s) x = std::fabs(x) + 1e-3f;
    return {i8({out, in}), g_.constant_f32(fresh("ws"), {out}, s)};
  }

  Tensor views() {
    if (pick(0, 1) == 0) {  // transpose view materialised by copy, then back
      const Tensor c = copy(g_, g_.transpose(any(), {1, 0}));
      return copy(g_, g_.transpose(c, {1, 0}));
    }
    // One row through a slice view, broadcast back over the rows.
    const int64_t r = pick(0, static_cast<int>(rows_) - 1);
    const Tensor row = copy(g_, g_.slice(any(), 0, r, r + 1));
    return add(g_, any(), g_.reshape(row, {d_}));
  }

  Tensor quantize_w8a8() {
    const auto qs = call_kernel(g_, "quantize.i8", {any()}, {{DType::kI8, {rows_, d_}}, {DType::kF32, {rows_}}});
    const nn::Linear w = int8_linear(d_, d_);
    return call_kernel(g_, "matmul.w8a8", {qs[0], qs[1], w.weight, w.scale}, {{DType::kF32, {rows_, d_}}})[0];
  }

  Tensor layer_norm() {
    const float eps = pick(0, 1) == 0 ? 1e-5f : 0.0f;
    std::vector<uint8_t> attrs(sizeof(sk_layer_norm_attrs));
    const sk_layer_norm_attrs a{eps};
    std::memcpy(attrs.data(), &a, sizeof a);
    return call_kernel(g_, "layer_norm.f32", {any(), f32({d_}, 1.5f), f32({d_}, 0.5f)}, {{DType::kF32, {rows_, d_}}},
                       attrs)[0];
  }

  // Divisors of d_ no larger than `max`.
  std::vector<int64_t> divisors(int64_t max) const {
    std::vector<int64_t> v;
    for (int64_t k = 1; k <= std::min(d_, max); ++k)
      if (d_ % k == 0) v.push_back(k);
    return v;
  }
  template <typename T>
  T one_of(const std::vector<T>& v) {
    return v[static_cast<size_t>(pick(0, static_cast<int>(v.size()) - 1))];
  }

  // rope.f32 on a pool tensor seen as [rows, H * Dh] (rank 2) or [rows, H, Dh] (rank 3).
  Tensor rope() {
    std::vector<int64_t> dhs;
    for (int64_t dh : divisors(d_))
      if (dh >= 2) dhs.push_back(dh);
    const int64_t dh = one_of(dhs);
    const int32_t rotary = 2 * pick(1, static_cast<int>(dh / 2));
    const int max_pos = pick(1, 24);
    std::vector<int32_t> positions(static_cast<size_t>(rows_));
    for (int32_t& p : positions) p = pick(0, max_pos - 1);
    const Tensor table = pick(0, 1) == 0 ? nn::rope_cos_sin_table(g_, fresh("cos_sin"), max_pos, rotary, 10000.0)
                                         : f32({max_pos, rotary}, 1.0f);
    const sk_rope_attrs attrs{static_cast<int32_t>(dh), rotary, pick(0, 1)};
    const Tensor pos = index<int32_t>({rows_}, positions);
    if (pick(0, 1) == 0) return nn::rope(g_, any(), pos, table, attrs);
    const Tensor y = nn::rope(g_, g_.reshape(any(), {rows_, d_ / dh, dh}), pos, table, attrs);
    return g_.reshape(y, {rows_, d_});
  }

  // A paged cache: `blocks` blocks of `block_size` slots; valid block tables for `seqs`
  // sequences of at most `max_blocks` blocks each (blocks may be shared; unused entries -1).
  struct Paging {
    int blocks = 1;
    int block_size = 1;
    int max_blocks = 1;
    int seqs = 1;
    std::vector<int32_t> table;  // [seqs, max_blocks]
    int capacity() const { return max_blocks * block_size; }
  };
  Paging paging(int seqs) {
    Paging p;
    const int sizes[] = {1, 2, 4, 8, 16};
    p.block_size = sizes[pick(0, 4)];
    p.blocks = pick(1, 8);
    p.max_blocks = pick(1, 6);  // up to 96 tokens: contexts of several 64-token softmax chunks
    p.seqs = seqs;
    p.table.assign(static_cast<size_t>(seqs * p.max_blocks), -1);
    for (int32_t& b : p.table) b = pick(0, 7) == 0 ? -1 : pick(0, p.blocks - 1);
    // -1 only past what the sequence's context reads is valid: callers cap contexts below the
    // first -1 (`usable`).
    return p;
  }
  // How many slots of sequence `s` its block table makes readable (up to its first -1).
  static int usable(const Paging& p, int s) {
    int blocks = 0;
    while (blocks < p.max_blocks && p.table[static_cast<size_t>(s * p.max_blocks + blocks)] >= 0) ++blocks;
    return blocks * p.block_size;
  }
  // Slot of each of `rows_` new tokens: a slot of the cache, now and then -1 (skipped); several
  // tokens may name one slot (the last one wins).
  std::vector<int32_t> slots(const Paging& p) {
    std::vector<int32_t> s(static_cast<size_t>(rows_));
    for (int32_t& x : s) x = pick(0, 5) == 0 ? -1 : pick(0, p.blocks * p.block_size - 1);
    return s;
  }
  // Contexts (decode) or (seq_id, position) per token (prefill), valid for `p`; returns the
  // operands after the caches: block_tables and context_lens, or block_tables, seq_ids, positions.
  std::vector<Tensor> attention_indices(const Paging& p, bool prefill) {
    std::vector<Tensor> operands = {index<int32_t>({p.seqs, p.max_blocks}, p.table)};
    if (!prefill) {
      std::vector<int32_t> lens(static_cast<size_t>(p.seqs));
      for (int s = 0; s < p.seqs; ++s) lens[static_cast<size_t>(s)] = pick(0, usable(p, s));
      operands.push_back(index<int32_t>({p.seqs}, lens));
      return operands;
    }
    std::vector<int32_t> seq_ids(static_cast<size_t>(rows_)), positions(static_cast<size_t>(rows_));
    for (int64_t t = 0; t < rows_; ++t) {
      // A token needs a sequence with at least one readable slot.
      int s = pick(0, p.seqs - 1);
      for (int tries = 0; tries < p.seqs && usable(p, s) == 0; ++tries) s = (s + 1) % p.seqs;
      seq_ids[static_cast<size_t>(t)] = s;
      positions[static_cast<size_t>(t)] = usable(p, s) == 0 ? -1 : pick(0, usable(p, s) - 1);
    }
    operands.push_back(index<int32_t>({rows_}, seq_ids));
    operands.push_back(index<int32_t>({rows_}, positions));
    return operands;
  }
  // Makes every sequence's first block table entry valid, so that a prefill token always finds
  // a readable slot.
  static void first_blocks_valid(Paging& p) {
    for (int s = 0; s < p.seqs; ++s)
      if (p.table[static_cast<size_t>(s * p.max_blocks)] < 0) p.table[static_cast<size_t>(s * p.max_blocks)] = 0;
  }

  // kv_append into (new or earlier) f32 or bf16 caches, then paged decode or prefill attention
  // over them, projected back to [rows, d].
  Tensor paged_attention(bool prefill) {
    const int64_t hkv = pick(1, 2), group = pick(1, 3), hq = hkv * group;
    const int64_t dhs[] = {4, 8, 13, 16, 20};
    const int64_t dh = dhs[pick(0, 4)];
    Paging p = paging(prefill ? pick(1, 3) : static_cast<int>(rows_));
    if (prefill) first_blocks_valid(p);
    const DType cache_dtype = pick(0, 1) == 0 ? DType::kF32 : DType::kBF16;
    const Shape cache_shape{p.blocks, p.block_size, hkv, dh};
    const Tensor k_cache = variable("k_cache", cache_dtype, cache_shape);
    const Tensor v_cache = variable("v_cache", cache_dtype, cache_shape);
    for (int appends = pick(0, 2); appends > 0; --appends) {
      const Tensor k = g_.reshape(project(hkv * dh), {rows_, hkv, dh});
      const Tensor v = g_.reshape(project(hkv * dh), {rows_, hkv, dh});
      nn::kv_append(g_, k, v, index<int32_t>({rows_}, slots(p)), k_cache, v_cache);
    }
    const Tensor q = g_.reshape(project(hq * dh), {rows_, hq, dh});
    const std::vector<Tensor> idx = attention_indices(p, prefill);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
    const Tensor o = prefill ? nn::paged_attention_prefill(g_, q, k_cache, v_cache, idx[0], idx[1], idx[2], scale)
                             : nn::paged_attention(g_, q, k_cache, v_cache, idx[0], idx[1], scale);
    return to_model_dim(g_.reshape(o, {rows_, hq * dh}), hq * dh);
  }

  // mla_cache_append into a latent cache, then MLA decode or prefill attention over it.
  Tensor mla_attention(bool prefill) {
    const int64_t h = pick(1, 4);
    const int64_t ranks[] = {8, 13, 16, 24};
    const int64_t r = ranks[pick(0, 3)];
    const int64_t pe = pick(0, 3) == 0 ? 0 : 4 * pick(1, 2);
    Paging p = paging(prefill ? pick(1, 3) : static_cast<int>(rows_));
    if (prefill) first_blocks_valid(p);
    const DType cache_dtype = pick(0, 1) == 0 ? DType::kF32 : DType::kBF16;
    const Tensor cache = variable("latent_cache", cache_dtype, {p.blocks, p.block_size, r + pe});
    auto rope_part = [&](const Shape& shape) {  // [.., P] operands; P = 0 gives an empty tensor
      static const float kNothing = 0.0f;
      if (pe == 0) return g_.constant(fresh("empty"), DType::kF32, shape, &kNothing, 0);
      return g_.reshape(project(shape_numel(shape) / rows_), shape);
    };
    for (int appends = pick(0, 2); appends > 0; --appends)
      nn::mla_cache_append(g_, project(r), rope_part({rows_, pe}), index<int32_t>({rows_}, slots(p)), cache);
    const Tensor q_latent = g_.reshape(project(h * r), {rows_, h, r});
    const Tensor q_pe = rope_part({rows_, h, pe});
    const std::vector<Tensor> idx = attention_indices(p, prefill);
    const float scale = 1.0f / std::sqrt(static_cast<float>(r + pe));
    const Tensor o = prefill ? nn::mla_attention_prefill(g_, q_latent, q_pe, cache, idx[0], idx[1], idx[2], scale)
                             : nn::mla_attention(g_, q_latent, q_pe, cache, idx[0], idx[1], scale);
    return to_model_dim(g_.reshape(o, {rows_, h * r}), h * r);
  }

  // batched_matmul.f32 over a head view [Hb, rows, K] (strided: transposed from [rows, Hb, K]).
  Tensor batched_matmul() {
    const int64_t hb = one_of(divisors(8)), k = d_ / hb, n = pick(1, 12);
    const Tensor x = g_.transpose(g_.reshape(any(), {rows_, hb, k}), {1, 0, 2});
    const Tensor y = nn::batched_matmul(g_, x, f32({hb, n, k}, scale_of(k)));  // [Hb, rows, N]
    const Tensor dense = copy(g_, g_.transpose(y, {1, 0, 2}));                 // [rows, Hb, N]
    return to_model_dim(g_.reshape(dense, {rows_, hb * n}), hb * n);
  }

  // A MoE layer: router (softmax or sigmoid, normalised or not, group-limited or not), dispatch,
  // gate/up and down grouped matmuls (f32, bf16 or int8 experts), combine with or without a
  // shared expert. The bias often leaves experts empty or draws every token to one.
  Tensor moe() {
    const int experts = pick(1, 5), zero = pick(0, 2), total = experts + zero;
    const int top_k = pick(1, std::min(3, total));
    const float biases[] = {-30.0f, 0.0f, 0.0f, 8.0f};
    std::vector<float> bias(static_cast<size_t>(total));
    for (float& b : bias) b = biases[pick(0, 3)];
    const Tensor x = any();
    const Tensor router_logits = matmul(g_, x, f32({total, d_}, 2.0f * scale_of(d_)));
    const Tensor bias_t = g_.constant_f32(fresh("bias"), {total}, bias);
    sk_moe_router_attrs base{top_k, experts, pick(0, 1), pick(0, 1), 0.5f + 0.5f * static_cast<float>(pick(0, 3))};
    Tensor ids, weights;
    // Group-limited routing when E+Z splits into groups that can hold top_k experts.
    std::vector<int> groups;
    for (int n = 2; n <= total; ++n)
      if (total % n == 0) groups.push_back(n);
    if (!groups.empty() && pick(0, 2) == 0) {
      const int n_group = groups[static_cast<size_t>(pick(0, static_cast<int>(groups.size()) - 1))];
      const int per_group = total / n_group;
      const int min_groups = (top_k + per_group - 1) / per_group;
      const sk_moe_router_group_attrs a{base, n_group, pick(min_groups, n_group)};
      std::vector<uint8_t> blob(sizeof a);
      std::memcpy(blob.data(), &a, sizeof a);
      const Shape out{rows_, top_k};
      const auto outs =
          call_kernel(g_, "moe_router.f32", {router_logits, bias_t}, {{DType::kI32, out}, {DType::kF32, out}}, blob);
      ids = outs[0];
      weights = outs[1];
    } else {
      const nn::RouterOutput route = nn::moe_router(g_, router_logits, bias_t, base);
      ids = route.topk_ids;
      weights = route.topk_weights;
    }
    const nn::DispatchOutput sorted = nn::moe_dispatch(g_, x, ids, {experts, zero});
    side_.push_back(ids);
    side_.push_back(sorted.counts);
    const int64_t ffn = 4 * pick(1, 3);
    const int expert_dtype = pick(0, 3);
    auto expert_weights = [&](int64_t out, int64_t in) -> nn::Linear {
      if (expert_dtype == 1) return {bf16({experts, out, in}, scale_of(in)), Tensor{}};
      if (expert_dtype == 3) return {f16({experts, out, in}, scale_of(in)), Tensor{}};
      if (expert_dtype == 2) {
        std::vector<float> s = uniform(experts * out, 0.02f);
        for (float& v : s) v = std::fabs(v) + 1e-3f;
        return {i8({experts, out, in}), g_.constant_f32(fresh("ws"), {experts, out}, s)};
      }
      return {f32({experts, out, in}, scale_of(in)), Tensor{}};
    };
    const Tensor gate_up = nn::grouped_matmul(g_, sorted.x_sorted, sorted.counts, expert_weights(2 * ffn, d_));
    const Tensor act = silu_mul(g_, g_.slice(gate_up, 1, 0, ffn), g_.slice(gate_up, 1, ffn, 2 * ffn));
    const Tensor y = nn::grouped_matmul(g_, act, sorted.counts, expert_weights(d_, ffn));
    if (pick(0, 1) == 0) return nn::moe_combine(g_, y, sorted.row_map, weights, x);
    return call_kernel(g_, "moe_combine_shared.f32", {y, sorted.row_map, weights, x, any()},
                       {{DType::kF32, {rows_, d_}}})[0];
  }

  // Group-wise 4-bit weights quantised at build time (group 32, 64 or 128, with or without zero
  // points, f16 or f32 scales) over a projection of K = G or 2G inputs, back to [rows, d].
  Tensor int4_linear(bool f32_activations) {
    const int64_t groups[] = {32, 64, 128};
    const int64_t group = groups[pick(0, 2)];
    const int64_t k = group * pick(1, 2);
    const Tensor x = project(k);
    const std::vector<float> w = uniform(d_ * k, scale_of(k));
    nn::Int4Options o;
    o.group = group;
    o.zero_points = pick(0, 1) == 0;
    o.scale_dtype = pick(0, 1) == 0 ? DType::kF16 : DType::kF32;
    const Expected<nn::Int4Weights> q = nn::quantize_int4(w.data(), DType::kF32, d_, k, o);
    if (!q) {  // the shapes and options above are all valid: a failure is a bug in quantize_int4
      std::fprintf(stderr, "random_ops: quantize_int4 failed: %s\n", q.status().to_string().c_str());
      std::abort();
    }
    return nn::linear(g_, x, nn::int4_constants(g_, fresh("w4"), *q, f32_activations));
  }

  // A [rows, d] operand of another shape that broadcasts against [rows, d]: [d], [1, d], [rows, 1]
  // (a stride-0 expand view now and then), or a 0-d constant.
  Tensor broadcastable() {
    switch (pick(0, 4)) {
      case 0:
        return f32({d_}, 1.0f);
      case 1:
        return f32({1, d_}, 1.0f);
      case 2:
        return f32({rows_, 1}, 1.0f);
      case 3:
        return g_.expand(f32({rows_, 1}, 1.0f), {rows_, d_});
      default:
        return f32({}, 1.0f);
    }
  }

  // Element-wise chains: a unary op (domain-safe inputs for log/sqrt/rsqrt/reciprocal), a binary
  // op with broadcasting, a scalar op, a comparison to bool feeding where / logical ops, and casts
  // through bf16, f16, i32, i64, i8 or bool and back to f32.
  Tensor tensor_elementwise() {
    Tensor x = any();
    const UnaryOp safe[] = {UnaryOp::kNeg,      UnaryOp::kExp,     UnaryOp::kSin,  UnaryOp::kCos,
                            UnaryOp::kTanh,     UnaryOp::kSigmoid, UnaryOp::kSilu, UnaryOp::kGelu,
                            UnaryOp::kGeluTanh, UnaryOp::kRelu,    UnaryOp::kAbs};
    const UnaryOp positive[] = {UnaryOp::kLog, UnaryOp::kSqrt, UnaryOp::kRsqrt, UnaryOp::kReciprocal};
    if (pick(0, 1) == 0) {
      x = unary(g_, x, safe[pick(0, 10)]);
    } else {  // |x| + 0.5 keeps them finite
      const Tensor pos = binary_scalar(g_, unary(g_, x, UnaryOp::kAbs), 0.5, BinaryOp::kAdd);
      x = unary(g_, pos, positive[pick(0, 3)]);
    }
    const BinaryOp arith[] = {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kMaximum, BinaryOp::kMinimum};
    const Tensor b = broadcastable();
    x = pick(0, 1) == 0 ? binary(g_, x, b, arith[pick(0, 4)]) : binary(g_, b, x, arith[pick(0, 4)]);
    switch (pick(0, 3)) {
      case 0:
        x = binary_scalar(g_, x, 0.5 * pick(1, 4), arith[pick(0, 4)], pick(0, 1) == 0);
        break;
      case 1:  // pow with a small integral exponent (finite, sign-safe)
        x = binary_scalar(g_, x, static_cast<double>(pick(1, 3)), BinaryOp::kPow);
        break;
      case 2:  // division by a value bounded away from 0
        x = binary(g_, x, binary_scalar(g_, unary(g_, any(), UnaryOp::kAbs), 1.0, BinaryOp::kAdd), BinaryOp::kDiv);
        break;
      default:
        break;
    }
    // A mask from a comparison (with another pool tensor, a broadcast operand, or a scalar),
    // sometimes combined with a second one; where picks between x and another tensor.
    const BinaryOp compare[] = {BinaryOp::kEq, BinaryOp::kNe, BinaryOp::kLt,
                                BinaryOp::kLe, BinaryOp::kGt, BinaryOp::kGe};
    Tensor mask = pick(0, 1) == 0 ? binary(g_, x, any(), compare[pick(0, 5)])
                                  : binary_scalar(g_, x, 0.25 * pick(-2, 2), compare[pick(0, 5)]);
    if (pick(0, 2) == 0) {
      const Tensor other = binary(g_, any(), broadcastable(), compare[pick(0, 5)]);
      mask = binary(g_, mask, other, pick(0, 1) == 0 ? BinaryOp::kLogicalAnd : BinaryOp::kLogicalOr);
    }
    if (pick(0, 3) == 0) mask = unary(g_, mask, UnaryOp::kLogicalNot);
    if (pick(0, 2) != 0)
      x = where(g_, mask, x, pick(0, 1) == 0 ? any() : broadcastable());
    else
      x = binary(g_, x, cast(g_, mask, DType::kF32), BinaryOp::kAdd);
    // Casts: narrow floats, integers (after scaling, so the truncation matters), bool.
    switch (pick(0, 4)) {
      case 0:
        return cast(g_, cast(g_, x, DType::kBF16), DType::kF32);
      case 1:
        return cast(g_, cast(g_, x, DType::kF16), DType::kF32);
      case 2: {
        const DType ints[] = {DType::kI32, DType::kI64, DType::kI8};
        const Tensor i = cast(g_, binary_scalar(g_, x, 10.0, BinaryOp::kMul), ints[pick(0, 2)]);
        const Tensor sum = pick(0, 1) == 0 ? binary(g_, i, i, BinaryOp::kAdd) : i;  // integer math, wrapping
        return cast(g_, sum, DType::kF32);
      }
      case 3:
        return cast(g_, cast(g_, x, DType::kBool), DType::kF32);
      default:
        return x;
    }
  }

  // Reductions over the rows or the columns (sum, mean, max, min; keepdim or not), broadcast
  // back; argmax / argmin selecting rows of a weight; running sums of f32, i32 or bool.
  Tensor tensor_reduce() {
    const Tensor x = any();
    switch (pick(0, 3)) {
      case 0: {
        const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin};
        const int dim = pick(0, 1);
        const bool keepdim = pick(0, 1) == 0;
        Tensor r = reduce(g_, x, ops[pick(0, 3)], {dim}, keepdim);
        if (!keepdim) r = g_.reshape(r, dim == 0 ? Shape{1, d_} : Shape{rows_, 1});
        return binary(g_, any(), r, pick(0, 1) == 0 ? BinaryOp::kAdd : BinaryOp::kMul);
      }
      case 1: {  // every dim at once: a 0-d result, broadcast
        const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin};
        return binary(g_, any(), reduce(g_, x, ops[pick(0, 3)], {}, false), BinaryOp::kSub);
      }
      case 2: {  // i64 [rows] indices of the largest or smallest column, selecting weight rows
        const Tensor idx = reduce(g_, x, pick(0, 1) == 0 ? ReduceOp::kArgmax : ReduceOp::kArgmin, {1}, false);
        return index_select(g_, f32({d_, d_}, 1.0f), 0, idx);
      }
      default: {
        const int dim = pick(0, 1);
        switch (pick(0, 2)) {
          case 0:
            return cumsum(g_, x, dim);
          case 1:  // i64 running counts of a mask
            return cast(g_, cumsum(g_, binary_scalar(g_, x, 0.0, BinaryOp::kGt), dim), DType::kF32);
          default: {
            const Tensor i = cast(g_, binary_scalar(g_, x, 8.0, BinaryOp::kMul), DType::kI32);
            return cast(g_, cumsum(g_, i, dim), DType::kF32);
          }
        }
      }
    }
  }

  // Indexing: index_select of rows or columns, gather along either dim, and in-place updates of
  // a variable by index_copy or index_put (accumulating or not, duplicate indices included).
  Tensor tensor_index() {
    auto indices = [&](int64_t n, int64_t bound) {
      std::vector<int64_t> v(static_cast<size_t>(n));
      for (int64_t& i : v) i = pick(0, static_cast<int>(bound) - 1);
      return v;
    };
    auto index_tensor = [&](Shape shape, int64_t bound) {
      const std::vector<int64_t> v = indices(shape_numel(shape), bound);
      if (pick(0, 1) == 0) return index<int64_t>(std::move(shape), v);
      std::vector<int32_t> v32(v.begin(), v.end());
      return index<int32_t>(std::move(shape), v32);
    };
    switch (pick(0, 3)) {
      case 0: {
        if (pick(0, 1) == 0) return index_select(g_, any(), 0, index_tensor({rows_}, rows_));
        return index_select(g_, any(), 1, index_tensor({d_}, d_));
      }
      case 1: {
        const int dim = pick(0, 1);
        return gather(g_, any(), dim, index_tensor({rows_, d_}, dim == 0 ? rows_ : d_));
      }
      case 2: {
        const Tensor dst = variable("index_dst", DType::kF32, {rows_, d_});
        if (pick(0, 1) == 0) {
          const int64_t n = pick(1, static_cast<int>(rows_));
          index_copy(g_, dst, 0, index_tensor({n}, rows_), g_.slice(any(), 0, 0, n));
        } else {
          const int64_t n = pick(1, static_cast<int>(d_));
          index_copy(g_, dst, 1, index_tensor({n}, d_), g_.slice(any(), 1, 0, n));
        }
        return binary(g_, dst, any(), BinaryOp::kAdd);
      }
      default: {
        const Tensor dst = variable("index_dst", DType::kF32, {rows_, d_});
        const int64_t n = pick(1, static_cast<int>(rows_));
        const Tensor values = pick(0, 1) == 0 ? g_.slice(any(), 0, 0, n) : f32({d_}, 1.0f);  // or broadcast
        return index_put(g_, dst, {index_tensor({n}, rows_)}, values, pick(0, 1) == 0);
      }
    }
  }

  // topk along the columns (largest or smallest, values and i64 indices), concatenated with a
  // slice of another tensor back to [rows, d] by cat.
  Tensor tensor_topk_cat() {
    const int64_t k = pick(1, static_cast<int>((d_ - 1) / 2));
    const TopK t = topk(g_, any(), k, -1, pick(0, 1) == 0);
    const Tensor idx = cast(g_, t.indices, DType::kF32);
    std::vector<Tensor> parts = {t.values, idx, g_.slice(any(), 1, 0, d_ - 2 * k)};
    std::rotate(parts.begin(), parts.begin() + pick(0, 2), parts.end());
    return cat(g_, parts, 1);
  }

  // torch.matmul through tensor.batched_mm: a head view [Hb, rows, K] (or the [rows, d] tensor
  // itself) times a [K, N] or [Hb, K, N] constant (broadcast batch), in f32, bf16 or f16.
  Tensor tensor_batched_mm() {
    const int dtype = pick(0, 2);
    const DType dt = dtype == 0 ? DType::kF32 : dtype == 1 ? DType::kBF16 : DType::kF16;
    auto in_dtype = [&](Tensor t) { return dt == DType::kF32 ? t : cast(g_, t, dt); };
    if (pick(0, 1) == 0) {
      const Tensor y = batched_mm(g_, in_dtype(any()), in_dtype(f32({d_, d_}, scale_of(d_))));
      return dt == DType::kF32 ? y : cast(g_, y, DType::kF32);
    }
    const int64_t hb = one_of(divisors(8)), k = d_ / hb, n = pick(1, 12);
    const Tensor x = g_.transpose(g_.reshape(any(), {rows_, hb, k}), {1, 0, 2});
    const Tensor w = pick(0, 1) == 0 ? f32({k, n}, scale_of(k)) : f32({hb, k, n}, scale_of(k));
    Tensor y = batched_mm(g_, in_dtype(x), in_dtype(w));  // [Hb, rows, N]
    if (dt != DType::kF32) y = cast(g_, y, DType::kF32);
    const Tensor dense = copy(g_, g_.transpose(y, {1, 0, 2}));  // [rows, Hb, N]
    return to_model_dim(g_.reshape(dense, {rows_, hb * n}), hb * n);
  }

  // scaled_dot_product_attention over projections: q [1, H, rows, D] (a transposed view),
  // k / v [1, Hkv, Lk, D] of the tokens themselves (Lk = rows) or of constants; no mask, causal,
  // a bool mask or an additive one; f32, bf16 or f16.
  Tensor tensor_sdpa() {
    const int64_t hkv = pick(1, 2), h = hkv * pick(1, 2);
    const int64_t dh = 4 * pick(1, 4), dv = 4 * pick(1, 3);
    const bool own = pick(0, 1) == 0;
    const int64_t lk = own ? rows_ : pick(1, 24);
    auto heads = [&](Tensor t, int64_t n_heads, int64_t len, int64_t dim) {  // [len, n*dim] -> [1, n, len, dim]
      return g_.transpose(g_.reshape(t, {1, len, n_heads, dim}), {0, 2, 1, 3});
    };
    const Tensor q = heads(project(h * dh), h, rows_, dh);
    const Tensor k = own ? heads(project(hkv * dh), hkv, lk, dh) : heads(f32({lk, hkv * dh}, 1.0f), hkv, lk, dh);
    const Tensor v = own ? heads(project(hkv * dv), hkv, lk, dv) : heads(f32({lk, hkv * dv}, 1.0f), hkv, lk, dv);
    const int dtype = pick(0, 2);
    const DType dt = dtype == 0 ? DType::kF32 : dtype == 1 ? DType::kBF16 : DType::kF16;
    auto in_dtype = [&](Tensor t) { return dt == DType::kF32 ? t : cast(g_, t, dt); };
    Tensor mask;
    bool causal = false;
    switch (pick(0, 3)) {
      case 0:
        causal = true;
        break;
      case 1:  // bool [rows, lk] (broadcast over batch and heads); rows with no key give zeros
        mask = binary_scalar(g_, f32({rows_, lk}, 1.0f), -0.5, BinaryOp::kGt);
        break;
      case 2:
        mask = in_dtype(f32({1, h, rows_, lk}, 2.0f));
        break;
      default:
        break;
    }
    const double scale = pick(0, 1) == 0 ? 0.0 : 0.125 * pick(1, 8);
    Tensor o = sdpa(g_, in_dtype(q), in_dtype(k), in_dtype(v), mask, causal, scale);  // [1, H, rows, Dv]
    if (dt != DType::kF32) o = cast(g_, o, DType::kF32);
    const Tensor dense = copy(g_, g_.transpose(o, {0, 2, 1, 3}));  // [1, rows, H, Dv]
    return to_model_dim(g_.reshape(dense, {rows_, h * dv}), h * dv);
  }

  Tensor sample() {
    const Tensor l = logits(vocab_);
    const float temperatures[] = {0.0f, 0.5f, 1.0f, 2.0f};
    const float top_ps[] = {1.0f, 0.9f, 0.5f, 1e-6f};
    const sk_sample_attrs a{static_cast<uint64_t>(pick(0, 1 << 15)), temperatures[pick(0, 3)], top_ps[pick(0, 3)],
                            pick(0, 4) == 0 ? 0 : pick(0, vocab_ + 1), 0};
    std::vector<uint8_t> blob(sizeof a);
    std::memcpy(blob.data(), &a, sizeof a);
    const std::vector<int64_t> step = {pick(0, 1000)};
    const Tensor ids = call_kernel(g_, "sample.f32", {l, index<int64_t>({1}, step)}, {{DType::kI32, {rows_}}}, blob)[0];
    return embedding_of(ids);
  }

  // A prefetch of a random byte range of a weight or a pool tensor, after the latest op.
  void prefetch_range() {
    const Tensor target = pick(0, 1) == 0 ? f32({d_, d_}, 1.0f) : any();
    const TensorInfo& info = g_.tensor(target);
    const auto bytes = static_cast<int64_t>(shape_numel(info.shape) * static_cast<int64_t>(dtype_size(info.dtype)));
    const int64_t offset = pick(0, static_cast<int>(bytes));
    prefetch(g_, target, pool_->back(), pick(0, static_cast<int>(bytes - offset)), offset);
  }

  // Writes the state variable [rows, d] in place: add or mul of a pool tensor, rope or
  // layer_norm of the state itself (their outputs may be their inputs).
  Tensor in_place() {
    if (!state_.valid()) state_ = variable("state", DType::kF32, {rows_, d_});
    OpSpec spec;
    spec.write_into = {state_};
    switch (pick(0, 3)) {
      case 0:
      case 1:
        spec.kind = pick(0, 1) == 0 ? OpKind::kAdd : OpKind::kMul;
        spec.inputs = {pick(0, 1) == 0 ? state_ : any(), any()};
        break;
      case 2: {
        std::vector<int64_t> dhs;
        for (int64_t dh : divisors(d_))
          if (dh >= 2) dhs.push_back(dh);
        const int64_t dh = one_of(dhs);
        const int32_t rotary = 2 * pick(1, static_cast<int>(dh / 2));
        std::vector<int32_t> positions(static_cast<size_t>(rows_));
        for (int32_t& p : positions) p = pick(0, 7);
        const sk_rope_attrs a{static_cast<int32_t>(dh), rotary, pick(0, 1)};
        spec.kernel = "rope.f32";
        spec.inputs = {state_, index<int32_t>({rows_}, positions), f32({8, rotary}, 1.0f)};
        spec.outputs = {{DType::kF32, {rows_, d_}}};
        spec.attrs.resize(sizeof a);
        std::memcpy(spec.attrs.data(), &a, sizeof a);
        break;
      }
      default: {
        const sk_layer_norm_attrs a{1e-5f};
        spec.kernel = "layer_norm.f32";
        spec.inputs = {state_, f32({d_}, 1.5f), f32({d_}, 0.5f)};
        spec.outputs = {{DType::kF32, {rows_, d_}}};
        spec.attrs.resize(sizeof a);
        std::memcpy(spec.attrs.data(), &a, sizeof a);
        break;
      }
    }
    return g_.add_op(std::move(spec))[0];
  }

  Graph& g_;
  Pick pick_;
  std::mt19937 rng_;
  int64_t rows_;
  int64_t d_;
  std::vector<InputBytes>* inputs_;
  const std::vector<Tensor>* pool_ = nullptr;
  int vocab_ = 1;
  int names_ = 0;
  std::vector<int> built_ = std::vector<int>(kNumFamilies, 0);
  std::vector<Tensor> side_;
  Tensor state_;
};

}  // namespace sk::testing

#endif  // SUPERKERNEL_TESTS_COMMON_RANDOM_OPS_H_
