// Fuzz target: whole graphs. The fuzz bytes decode into a graph of built-in ops, views, host ops,
// fusion scopes (with option strings, valid or not), streams, events, core limits, write_into
// targets and compile options. Invariants:
//   - a graph that fails verify() fails every compile with an error Status;
//   - eager and graph mode agree on whether the graph compiles (superkernel mode may reject more:
//     host ops inside scopes, scope options, strict-scope-check=abort);
//   - every executable that compiles runs, and every mode and core count gives bit-identical
//     outputs.
// Shapes stay small and write_into targets whole tensors (partial overlaps and huge shapes are
// resource and aliasing questions the graph builder decides, tested elsewhere).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/test_runtime.h"
#include "fuzz/fuzz_input.h"
#include "superkernel/graph.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace {

using sk::fuzz::FuzzInput;

struct FuzzGraph {
  std::unique_ptr<sk::Graph> graph;
  std::vector<std::pair<std::string, std::vector<float>>> inputs;
  sk::CompileOptions options;  // the mode is set per compile
};

std::vector<float> random_values(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Valid fragments, mostly, so scopes usually compile; a few are wrong on purpose.
const char* const kScopeOptions[] = {"",
                                     "split-mode=2",
                                     "feed-sync-all=1",
                                     "debug-sync-all=1",
                                     "strict-scope-check=bypass",
                                     "strict-scope-check=abort",
                                     "debug-aic-num=1:debug-aiv-num=2",
                                     "debug-aiv-num=1",
                                     "profiling=1",
                                     "split-mode=1:debug-sync-all=0",
                                     "split-mode=0",
                                     "stream-fusion=1"};
const char* const kScopeNames[] = {"s0", "s1", "s2", "s0", ""};
const int64_t kDims[] = {8, 13, 32, 48, 64};

FuzzGraph decode_graph(FuzzInput& in) {
  FuzzGraph out;
  out.graph = std::make_unique<sk::Graph>("fuzz");
  sk::Graph& g = *out.graph;
  const int64_t rows = in.pick(1, 4);
  const int64_t d = in.one_of(kDims);
  const uint32_t seed = in.u32();
  int names = 0;
  auto fresh = [&](const char* prefix) { return prefix + std::to_string(names++); };

  std::vector<sk::Tensor> pool;  // f32 [rows, d] tensors ops read and add to
  const int num_inputs = in.pick(1, 3);
  for (int i = 0; i < num_inputs; ++i) {
    const std::string name = "in" + std::to_string(i);
    pool.push_back(g.input(name, sk::DType::kF32, {rows, d}));
    out.inputs.emplace_back(name, random_values(static_cast<size_t>(rows * d), seed + i, 2.0f));
  }
  auto weight = [&](sk::Shape shape, float scale) {
    const auto values = random_values(static_cast<size_t>(sk::shape_numel(shape)), seed + names, scale);
    return g.constant_f32(fresh("w"), shape, values);
  };
  auto any = [&] { return pool[in.pick(0, static_cast<int>(pool.size()) - 1)]; };

  std::vector<sk::Stream> streams = {sk::Stream{0}};
  for (int i = in.pick(0, 2); i > 0; --i) streams.push_back(g.create_stream(fresh("stream")));
  std::vector<sk::Event> events;
  for (int i = in.pick(0, 3); i > 0; --i) events.push_back(g.create_event(fresh("event")));
  std::optional<sk::Tensor> state;
  if (in.flag()) state = g.variable("state", sk::DType::kF32, {rows, d});

  std::vector<std::string> open_scopes;
  int outputs = 0;
  const int num_ops = in.pick(1, 24);
  for (int i = 0; i < num_ops && !in.empty(); ++i) {
    std::optional<sk::Tensor> t;
    switch (in.pick(0, 20)) {
      case 0:
        t = sk::add(g, any(), any());
        break;
      case 1:
        t = sk::mul(g, any(), any());
        break;
      case 2:
        t = sk::add(g, any(), weight({d}, 1.0f));  // broadcast
        break;
      case 3:
        t = sk::silu_mul(g, any(), any());
        break;
      case 4:
        t = sk::rms_norm(g, any(), weight({d}, 1.0f), 1e-5f);
        break;
      case 5:
        t = sk::softmax(g, any());
        break;
      case 6:
        t = sk::matmul(g, any(), weight({d, d}, 0.2f));
        break;
      case 7: {  // transpose view, materialised, and back
        sk::Tensor c = sk::copy(g, g.transpose(any(), {1, 0}));
        t = sk::copy(g, g.transpose(c, {1, 0}));
        break;
      }
      case 8: {  // one row through a slice view, broadcast back over the rows
        const int64_t r = in.pick(0, static_cast<int>(rows) - 1);
        sk::Tensor row = sk::copy(g, g.slice(any(), 0, r, r + 1));
        t = sk::add(g, any(), g.reshape(row, {d}));
        break;
      }
      case 9: {  // a host op, possibly inside a scope (superkernel mode must then refuse)
        const float factor = 0.25f * in.pick(1, 4);
        t = g.host_op(fresh("host"),
                      [factor](sk::HostOpContext& ctx) {
                        const float* x = static_cast<const float*>(ctx.inputs[0].data);
                        float* y = static_cast<float*>(ctx.outputs[0].data);
                        const size_t n = ctx.outputs[0].bytes() / sizeof(float);
                        for (size_t k = 0; k < n; ++k) y[k] = factor * x[k];
                        return sk::Status::ok();
                      },
                      {any()}, {{sk::DType::kF32, {rows, d}, ""}})[0];
        break;
      }
      case 10: {
        const std::string name = in.one_of(kScopeNames);
        const std::string options = in.pick(0, 7) == 0 ? in.text(24) : std::string(in.one_of(kScopeOptions));
        if (g.push_scope(name, options)) open_scopes.push_back(name);
        break;
      }
      case 11:
        if (!open_scopes.empty()) {
          // Now and then close the wrong scope: an error the graph records.
          const bool wrong = in.pick(0, 15) == 0;
          (void)g.pop_scope(wrong ? "not_open" : open_scopes.back());
          if (!wrong) open_scopes.pop_back();
        }
        break;
      case 12:
        g.set_stream(streams[in.pick(0, static_cast<int>(streams.size()) - 1)]);
        break;
      case 13:
        if (!events.empty()) g.record(events[in.pick(0, static_cast<int>(events.size()) - 1)]);
        break;
      case 14:
        if (!events.empty()) g.wait(events[in.pick(0, static_cast<int>(events.size()) - 1)]);
        break;
      case 15:
        g.set_core_limit(in.pick(0, 3), in.pick(0, 3));
        break;
      case 16: {
        const int64_t vocab = in.pick(1, 16);
        std::vector<int32_t> ids(static_cast<size_t>(rows));
        for (int32_t& id : ids) id = in.pick(0, static_cast<int>(vocab) - 1);
        sk::Tensor id_t = g.constant(fresh("ids"), sk::DType::kI32, {rows}, ids.data(), ids.size() * sizeof(int32_t));
        t = sk::embedding(g, id_t, weight({vocab, d}, 1.0f));
        break;
      }
      case 17:  // element-wise update of the whole state variable, possibly in place
        if (state) {
          sk::OpSpec spec;
          spec.kind = in.flag() ? sk::OpKind::kAdd : sk::OpKind::kMul;
          spec.inputs = {in.flag() ? *state : any(), any()};
          spec.write_into = {*state};
          t = g.add_op(std::move(spec))[0];
        }
        break;
      case 18:  // reshape views of a dense tensor
        t = g.reshape(g.reshape(any(), {rows * d}), {rows, d});
        break;
      case 19: {  // a declared tensor defined later by write_into
        sk::Tensor decl = g.declare(fresh("decl"), sk::DType::kF32, {rows, d});
        sk::OpSpec spec;
        spec.kind = sk::OpKind::kMul;
        spec.inputs = {any(), any()};
        spec.write_into = {decl};
        t = g.add_op(std::move(spec))[0];
        break;
      }
      default: {
        sk::Tensor o = any();
        const auto& info = g.tensor(o);
        if (!info.is_output && info.kind != sk::TensorKind::kInput) g.output(o, "out" + std::to_string(outputs++));
        break;
      }
    }
    if (t) pool.push_back(*t);
  }
  // Usually close what is open; an unclosed scope is an error verify() reports.
  if (in.pick(0, 15) != 0)
    while (!open_scopes.empty()) {
      (void)g.pop_scope(open_scopes.back());
      open_scopes.pop_back();
    }
  const auto& last = g.tensor(pool.back());
  if (!last.is_output && last.kind != sk::TensorKind::kInput) g.output(pool.back(), "out_last");
  if (state && !g.tensor(*state).is_output) g.output(*state, "out_state");

  sk::CompileOptions& o = out.options;
  o.super_kernel_optimize_options.split_mode = in.pick(0, 3);
  o.super_kernel_debug_options.debug_sync_all = in.pick(0, 7) == 0;
  o.super_kernel_debug_options.debug_op_exec_trace = in.pick(0, 7) == 0;
  o.super_kernel_debug_options.debug_per_op_max_core_num = in.pick(0, 2);
  return out;
}

struct Counters {
  long graphs = 0;
  long rejected_by_verify = 0;
  long rejected_by_compile = 0;  // in every mode
  long superkernel_only_rejected = 0;
  long ran_every_mode = 0;
  long runs = 0;
};
Counters counters;

void print_counters() {
  std::fprintf(stderr,
               "graph_fuzz: %ld graphs decoded: %ld rejected by verify, %ld rejected by compile in every mode, "
               "%ld rejected only by superkernel mode, %ld ran in every mode; %ld compiled runs compared\n",
               counters.graphs, counters.rejected_by_verify, counters.rejected_by_compile,
               counters.superkernel_only_rejected, counters.ran_every_mode, counters.runs);
}

std::vector<std::shared_ptr<sk::Runtime>>& runtimes() {
  // 1 and 3 cores: a serial baseline and a core count that splits every dimension unevenly.
  static std::vector<std::shared_ptr<sk::Runtime>> rts = {sk::testing::make_runtime(1, 30.0),
                                                          sk::testing::make_runtime(3, 30.0)};
  return rts;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  runtimes();
  std::atexit(print_counters);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  FuzzGraph fg = decode_graph(in);
  ++counters.graphs;
  const sk::Status verified = fg.graph->verify();

  std::optional<sk::testing::RunResult> reference;
  std::string reference_what;
  bool any_compiled = false, superkernel_rejected = false;
  for (auto& rt : runtimes()) {
    std::optional<bool> eager_compiled;
    for (sk::ExecutionMode mode :
         {sk::ExecutionMode::kEager, sk::ExecutionMode::kGraph, sk::ExecutionMode::kSuperKernel}) {
      sk::CompileOptions options = fg.options;
      options.static_kernel_compile = mode != sk::ExecutionMode::kEager;
      options.super_kernel_optimize = mode == sk::ExecutionMode::kSuperKernel;
      const std::string what =
          std::string(sk::execution_mode_name(mode)) + " on " + std::to_string(rt->num_cores()) + " cores";
      auto exe = rt->compile(*fg.graph, options);
      if (!verified) {
        SK_FUZZ_CHECK(!exe, what + " compiled a graph verify() rejects: " + verified.message());
        continue;
      }
      if (!exe) {
        SK_FUZZ_CHECK(!exe.status().message().empty(), what + ": compile error without a message");
        if (mode == sk::ExecutionMode::kSuperKernel) superkernel_rejected = true;
        if (mode == sk::ExecutionMode::kGraph)
          SK_FUZZ_CHECK(!*eager_compiled, what + " rejects what eager mode compiles: " + exe.status().message());
        if (mode == sk::ExecutionMode::kEager) eager_compiled = false;
        continue;
      }
      if (mode == sk::ExecutionMode::kEager) eager_compiled = true;
      if (mode == sk::ExecutionMode::kGraph) SK_FUZZ_CHECK(*eager_compiled, what + " compiles what eager mode rejects");
      any_compiled = true;
      for (const auto& [name, values] : fg.inputs) {
        const sk::Status s = (*exe)->set_input(name, values);
        SK_FUZZ_CHECK(s.is_ok(), what + ": set_input('" + name + "'): " + s.message());
      }
      const sk::Status ran = (*exe)->run();
      SK_FUZZ_CHECK(ran.is_ok(), what + ": run failed after a successful compile: " + ran.message());
      ++counters.runs;
      sk::testing::RunResult result = sk::testing::collect_outputs(**exe);
      if (!reference) {
        reference = std::move(result);
        reference_what = what;
        continue;
      }
      std::string why;
      SK_FUZZ_CHECK(sk::testing::bitwise_equal(*reference, result, &why), what + " vs " + reference_what + ": " + why);
    }
  }
  if (!verified) {
    ++counters.rejected_by_verify;
  } else if (!any_compiled) {
    ++counters.rejected_by_compile;
  } else if (superkernel_rejected) {
    ++counters.superkernel_only_rejected;
  } else {
    ++counters.ran_every_mode;
  }
  return 0;
}
