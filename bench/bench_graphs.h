// The graphs the scheduling benchmarks time (sk_bench_dispatch, sk_bench_ablation), with the
// inputs they run on, so that every bench measures the same chains:
//   chain_elementwise        1000 x (mul, add) on a 256-float tensor        = 2000 nodes
//   chain_matvec_norm_256    1000 x (f32 matvec 256x256, rms_norm)          = 2000 nodes
//   chain_matvec_norm_512    1000 x (f32 matvec 512x512, rms_norm)          = 2000 nodes
// The matvec chains reuse one weight matrix (cache-resident), so they measure dispatch plus
// compute, not memory bandwidth. `scoped` puts every op in one fusion scope (superkernel mode).
//
//   sk::bench::Workload w = sk::bench::dispatch_chains()[0].make(true);
//   auto exe = runtime->compile(*w.graph, opts);
//   if (sk::Status s = sk::bench::set_inputs(**exe, w); !s) ...
#ifndef SUPERKERNEL_BENCH_BENCH_GRAPHS_H_
#define SUPERKERNEL_BENCH_BENCH_GRAPHS_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk::bench {

inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The bytes of an input or variable, set before the first run.
struct InputBytes {
  std::string name;
  std::vector<uint8_t> bytes;
};

template <typename T>
InputBytes input_bytes(std::string name, const std::vector<T>& values) {
  InputBytes in{std::move(name), std::vector<uint8_t>(values.size() * sizeof(T))};
  if (!values.empty()) std::memcpy(in.bytes.data(), values.data(), in.bytes.size());
  return in;
}

// A graph to time, with what one run counts as (`per_run` units of `metric`, e.g. 2000 nodes).
struct Workload {
  std::unique_ptr<Graph> graph;
  std::vector<InputBytes> inputs;
  std::vector<std::string> variables;  // variables a run writes (compared across modes like outputs)
  double per_run = 1;
  std::string metric = "ns_per_node";
  std::string unit = "ns";
  double seconds_to_unit = 1e9;
};

inline Status set_inputs(Executable& exe, const Workload& w) {
  for (const InputBytes& in : w.inputs) SK_RETURN_IF_ERROR(exe.set_input(in.name, in.bytes.data(), in.bytes.size()));
  return Status::ok();
}

constexpr int kChainRepeats = 1000;

inline Workload chain_elementwise(bool scoped) {
  Workload w;
  w.graph = std::make_unique<Graph>("chain_elementwise");
  Graph& g = *w.graph;
  const int64_t n = 256;
  Tensor x = g.input("x", DType::kF32, {n});
  auto sv = random_vec(n, 1, 0.999f, 1.001f);
  auto bv = random_vec(n, 2, -1e-3f, 1e-3f);
  Tensor scale = g.constant_f32("scale", {n}, sv);
  Tensor bias = g.constant_f32("bias", {n}, bv);
  std::optional<SuperKernelScope> scope;
  if (scoped) scope.emplace(g, "chain");
  Tensor t = x;
  for (int i = 0; i < kChainRepeats; ++i) t = add(g, mul(g, t, scale), bias);
  scope.reset();
  g.output(t, "y");
  w.per_run = 2 * kChainRepeats;
  w.inputs.push_back(input_bytes("x", random_vec(n, 3, -1, 1)));
  return w;
}

inline Workload chain_matvec_norm(int64_t n, bool scoped) {
  Workload w;
  w.graph = std::make_unique<Graph>("chain_matvec_norm_" + std::to_string(n));
  Graph& g = *w.graph;
  Tensor x = g.input("x", DType::kF32, {1, n});
  auto wv = random_vec(static_cast<size_t>(n * n), 4, -0.05f, 0.05f);
  auto gv = random_vec(n, 5, 0.9f, 1.1f);
  Tensor weight = g.constant_f32("w", {n, n}, wv);
  Tensor gamma = g.constant_f32("gamma", {n}, gv);
  std::optional<SuperKernelScope> scope;
  if (scoped) scope.emplace(g, "chain");
  Tensor t = x;
  for (int i = 0; i < kChainRepeats; ++i) t = rms_norm(g, matmul(g, t, weight), gamma, 1e-6f);
  scope.reset();
  g.output(t, "y");
  w.per_run = 2 * kChainRepeats;
  w.inputs.push_back(input_bytes("x", random_vec(static_cast<size_t>(n), 6, -1, 1)));
  return w;
}

struct WorkloadDef {
  std::string name;
  std::function<Workload(bool scoped)> make;
};

inline std::vector<WorkloadDef> dispatch_chains() {
  return {
      {"chain_elementwise", [](bool s) { return chain_elementwise(s); }},
      {"chain_matvec_norm_256", [](bool s) { return chain_matvec_norm(256, s); }},
      {"chain_matvec_norm_512", [](bool s) { return chain_matvec_norm(512, s); }},
  };
}

}  // namespace sk::bench

#endif  // SUPERKERNEL_BENCH_BENCH_GRAPHS_H_
