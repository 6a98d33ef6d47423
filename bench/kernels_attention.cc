// sk_bench_kernels cases of the attention family at LLM-decode shapes. Bytes count what a kernel
// must move at least: every cache row of every context once (K and V, or the MLA latent row),
// the queries and outputs, the new k/v rows and the cache rows they overwrite. Attention over a
// long context is bandwidth-bound on a CPU, so compare its GB/s with the triad of the same run;
// absorbed MLA reads one latent row for all heads and is compute-bound instead (GFLOP/s).
#include <string>

#include "kernel_bench.h"
#include "superkernel/attrs_attention.h"

namespace sk::bench {
namespace {

// A short repeating pattern in place of random values: the caches are hundreds of MiB and the
// values do not change the work (prime length, so rows do not all look alike).
std::vector<double> pattern() {
  std::vector<double> v;
  for (int i = 0; i < 61; ++i) v.push_back(((i * 37) % 61) / 61.0 - 0.5);
  return v;
}

BenchInput cache_input(DType d, Shape s) {
  BenchInput in = Weight(d, std::move(s));
  in.values = pattern();
  return in;
}

BenchInput i32_values(Shape s, std::vector<double> v) {
  BenchInput in = Weight(DType::kI32, std::move(s));
  in.values = std::move(v);
  return in;
}

// Every sequence owns ctx / bs blocks, handed out in a scattered order (i * 97 mod blocks is a
// permutation for a power-of-two block count).
std::vector<double> block_table(int64_t b, int64_t per_seq) {
  std::vector<double> v;
  const int64_t blocks = b * per_seq;
  for (int64_t i = 0; i < blocks; ++i) v.push_back(static_cast<double>((i * 97) % blocks));
  return v;
}

std::string dtype_suffix(DType d) { return d == DType::kBF16 ? "bf16" : "f32"; }

KernelBenchCase paged(DType cache, int64_t b, int64_t hq, int64_t hkv, int64_t dh, int64_t ctx, int64_t bs) {
  const int64_t per_seq = ctx / bs;
  const int64_t blocks = b * per_seq;
  const double elem = cache == DType::kBF16 ? 2.0 : 4.0;
  const double bytes = 2.0 * b * ctx * hkv * dh * elem + 2.0 * 4 * b * hq * dh + 4.0 * b * (per_seq + 1);
  const double flops = 4.0 * b * hq * ctx * dh;  // q.k and p.v, one multiply-add each
  const sk_paged_attention_attrs a{0.08838834764f};
  return {"paged_attn_" + dtype_suffix(cache) + "_b" + std::to_string(b) + "_hq" + std::to_string(hq) + "_hkv" +
              std::to_string(hkv) + "_ctx" + std::to_string(ctx),
          "paged_attention." + dtype_suffix(cache),
          {Act({b, hq, dh}), cache_input(cache, {blocks, bs, hkv, dh}), cache_input(cache, {blocks, bs, hkv, dh}),
           i32_values({b, per_seq}, block_table(b, per_seq)), i32_values({b}, {static_cast<double>(ctx)})},
          {TensorSpec(DType::kF32, {b, hq, dh})},
          bench_attrs(a),
          bytes,
          flops,
          {},
          {}};
}

KernelBenchCase mla(DType cache, int64_t b, int64_t h, int32_t r, int32_t p, int64_t ctx, int64_t bs) {
  const int64_t per_seq = ctx / bs;
  const int64_t blocks = b * per_seq;
  const double elem = cache == DType::kBF16 ? 2.0 : 4.0;
  const double bytes = 1.0 * b * ctx * (r + p) * elem + 4.0 * b * h * (2 * r + p) + 4.0 * b * (per_seq + 1);
  const double flops = 2.0 * b * h * ctx * (r + p + r);
  const sk_mla_attention_attrs a{r, p, 0.0721687836f};
  return {"mla_attn_" + dtype_suffix(cache) + "_b" + std::to_string(b) + "_h" + std::to_string(h) + "_ctx" +
              std::to_string(ctx),
          "mla_attention." + dtype_suffix(cache),
          {Act({b, h, r}), Act({b, h, p}), cache_input(cache, {blocks, bs, r + p}),
           i32_values({b, per_seq}, block_table(b, per_seq)), i32_values({b}, {static_cast<double>(ctx)})},
          {TensorSpec(DType::kF32, {b, h, r})},
          bench_attrs(a),
          bytes,
          flops,
          {},
          {}};
}

// Prefill of one prompt of t tokens (positions 0 .. t - 1) over a cache that holds just it. Bytes
// count the prompt's cache rows once; flops the causal sum of the contexts.
std::vector<double> prompt_positions(int64_t t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t; ++i) v.push_back(static_cast<double>(i));
  return v;
}

KernelBenchCase paged_prefill(DType cache, int64_t t, int64_t hq, int64_t hkv, int64_t dh, int64_t bs) {
  const int64_t blocks = (t + bs - 1) / bs;
  const double elem = cache == DType::kBF16 ? 2.0 : 4.0;
  const double bytes = 2.0 * t * hkv * dh * elem + 2.0 * 4 * t * hq * dh + 4.0 * (blocks + 2 * t);
  const double flops = 4.0 * hq * dh * (t * (t + 1) / 2);
  const sk_paged_attention_attrs a{0.08838834764f};
  return {"paged_prefill_" + dtype_suffix(cache) + "_t" + std::to_string(t) + "_hq" + std::to_string(hq) + "_hkv" +
              std::to_string(hkv),
          "paged_attention_prefill." + dtype_suffix(cache),
          {Act({t, hq, dh}), cache_input(cache, {blocks, bs, hkv, dh}), cache_input(cache, {blocks, bs, hkv, dh}),
           i32_values({1, blocks}, block_table(1, blocks)), i32_values({t}, {0}), i32_values({t}, prompt_positions(t))},
          {TensorSpec(DType::kF32, {t, hq, dh})},
          bench_attrs(a),
          bytes,
          flops,
          {},
          {}};
}

KernelBenchCase mla_prefill(DType cache, int64_t t, int64_t h, int32_t r, int32_t p, int64_t bs) {
  const int64_t blocks = (t + bs - 1) / bs;
  const double elem = cache == DType::kBF16 ? 2.0 : 4.0;
  const double bytes = 1.0 * t * (r + p) * elem + 4.0 * t * h * (2 * r + p) + 4.0 * (blocks + 2 * t);
  const double flops = 2.0 * h * (r + p + r) * (t * (t + 1) / 2);
  const sk_mla_attention_attrs a{r, p, 0.0721687836f};
  return {"mla_prefill_" + dtype_suffix(cache) + "_t" + std::to_string(t) + "_h" + std::to_string(h),
          "mla_attention_prefill." + dtype_suffix(cache),
          {Act({t, h, r}), Act({t, h, p}), cache_input(cache, {blocks, bs, r + p}),
           i32_values({1, blocks}, block_table(1, blocks)), i32_values({t}, {0}), i32_values({t}, prompt_positions(t))},
          {TensorSpec(DType::kF32, {t, h, r})},
          bench_attrs(a),
          bytes,
          flops,
          {},
          {}};
}

// t new tokens of hkv x dh into caches of 512 blocks of 16 slots, at scattered slots.
KernelBenchCase kv_append(DType cache, int64_t t, int64_t hkv, int64_t dh) {
  const int64_t blocks = 512;
  const int64_t bs = 16;
  std::vector<double> slots;
  for (int64_t i = 0; i < t; ++i) slots.push_back(static_cast<double>((i * 97 + 11) % (blocks * bs)));
  const double elem = cache == DType::kBF16 ? 2.0 : 4.0;
  const double bytes = 2.0 * t * hkv * dh * (4.0 + elem) + 4.0 * t;
  const Shape shape{blocks, bs, hkv, dh};
  return {"kv_append_" + dtype_suffix(cache) + "_t" + std::to_string(t),
          "kv_append." + dtype_suffix(cache),
          {Act({t, hkv, dh}), Act({t, hkv, dh}), i32_values({t}, slots), cache_input(cache, shape),
           cache_input(cache, shape)},
          {TensorSpec(cache, shape), TensorSpec(cache, shape)},
          {},
          bytes,
          0,
          {},
          {{0, 3}, {1, 4}}};
}

KernelBenchCase rope(const std::string& name, int64_t t, int64_t h, int32_t dh, int32_t rd, int32_t neox) {
  std::vector<double> pos;
  for (int64_t i = 0; i < t; ++i) pos.push_back(static_cast<double>(4000 + i));
  const double bytes = 2.0 * 4 * t * h * dh + 4.0 * t * (rd + 1);
  const double flops = 3.0 * t * h * rd;
  return {name,
          "rope.f32",
          {Act({t, h, dh}), i32_values({t}, pos), Weight(DType::kF32, {8192, rd})},
          {TensorSpec(DType::kF32, {t, h, dh})},
          bench_attrs(sk_rope_attrs{dh, rd, neox}),
          bytes,
          flops,
          {},
          {}};
}

}  // namespace

SK_KERNEL_BENCH(attention_cases) {
  std::vector<KernelBenchCase> cases;
  for (DType cache : {DType::kF32, DType::kBF16}) {
    for (int64_t b : {1, 8}) {
      for (int64_t hkv : {8, 4}) cases.push_back(paged(cache, b, 32, hkv, 128, 4096, 16));
    }
  }
  for (DType cache : {DType::kF32, DType::kBF16}) {
    for (int64_t h : {16, 32}) cases.push_back(mla(cache, 1, h, 512, 64, 4096, 16));
  }
  cases.push_back(mla(DType::kBF16, 8, 16, 512, 64, 4096, 16));
  // Prefill of a 512-token prompt.
  for (DType cache : {DType::kF32, DType::kBF16}) {
    cases.push_back(paged_prefill(cache, 512, 32, 8, 128, 16));
    cases.push_back(mla_prefill(cache, 512, 16, 512, 64, 16));
  }
  // The absorbed MLA projections at decode: q_nope . W_UK and latent . W_UV for 32 heads.
  cases.push_back({"bmm_w_uk_h32",
                   "batched_matmul.f32",
                   {Act({32, 1, 128}), Weight(DType::kF32, {32, 512, 128})},
                   {TensorSpec(DType::kF32, {32, 1, 512})},
                   {},
                   4.0 * (32 * 512 * 128 + 32 * 128 + 32 * 512),
                   2.0 * 32 * 512 * 128,
                   {},
                   {}});
  cases.push_back({"bmm_w_uv_h32",
                   "batched_matmul.f32",
                   {Act({32, 1, 512}), Weight(DType::kF32, {32, 128, 512})},
                   {TensorSpec(DType::kF32, {32, 1, 128})},
                   {},
                   4.0 * (32 * 128 * 512 + 32 * 512 + 32 * 128),
                   2.0 * 32 * 128 * 512,
                   {},
                   {}});
  cases.push_back(rope("rope_neox_t8_h32_d128", 8, 32, 128, 128, 1));
  cases.push_back(rope("rope_interleaved_t8_h32_d64", 8, 32, 64, 64, 0));
  cases.push_back(rope("rope_neox_t512_h32_d128", 512, 32, 128, 128, 1));
  const sk_layer_norm_attrs eps{1e-5f};
  cases.push_back({"layer_norm_f32_16x4096",
                   "layer_norm.f32",
                   {Act({16, 4096}), Weight(DType::kF32, {4096}), Weight(DType::kF32, {4096})},
                   {TensorSpec(DType::kF32, {16, 4096})},
                   bench_attrs(eps),
                   4.0 * (2 * 16 * 4096 + 2 * 4096),
                   8.0 * 16 * 4096,
                   {},
                   {}});
  for (DType cache : {DType::kF32, DType::kBF16}) {
    cases.push_back(kv_append(cache, 8, 8, 128));
    cases.push_back(kv_append(cache, 512, 8, 128));
  }
  return cases;
}

}  // namespace sk::bench
