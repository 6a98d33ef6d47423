// Fuzz target: whole graphs. The fuzz bytes decode into a graph of ops of every built-in kernel
// family (tests/common/random_ops.h: matmuls in f32, bf16 and int8, quantisation, norms, RoPE,
// KV-cache appends and paged or latent attention at decode and prefill, batched and grouped
// matmuls, MoE routing, dispatch and combine, argmax, sampling, prefetch), views, host ops,
// fusion scopes (with option strings, valid or not), streams, events, core limits, write_into
// targets and compile options (stream fusion, jit, recompute, early start, sync choice, code
// preload, kernel replicas, tiling sink, prefetch, the access checker, ...) at one of the ISA
// levels the CPU has. Invariants:
//   - a graph that fails verify() fails every compile with an error Status;
//   - eager and graph mode agree on whether the graph compiles (superkernel mode may reject more:
//     host ops inside scopes, scope options, strict-scope-check=abort, core limits, stream
//     fusion on a cube/vector core split);
//   - every executable that compiles runs twice (no deadlock: the watchdog turns one into an
//     error), and every mode on 1 core and on 2, 3, or 3 split into cube and vector cores gives
//     bit-identical outputs after each run (the second run starts from the variables the first
//     one left).
// Shapes stay small and write_into targets whole tensors (partial overlaps and huge shapes are
// resource and aliasing questions the graph builder decides, tested elsewhere). Index operands
// are generated valid: the kernels' own error paths are tested by tests/kernels.
//
// At exit it prints how many graphs of each family and kernel ran in every mode, and how many
// runs each option value had (lines starting `graph_fuzz:`, which `make test-fuzz` shows).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/builtin_package.h"
#include "common/random_ops.h"
#include "common/test_runtime.h"
#include "fuzz/fuzz_input.h"
#include "superkernel/graph.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace {

using sk::fuzz::FuzzInput;
using sk::testing::Family;

struct FuzzGraph {
  std::unique_ptr<sk::Graph> graph;
  std::vector<sk::testing::InputBytes> inputs;
  sk::CompileOptions options;  // the mode is set per compile
  std::vector<std::string> option_labels;
  int isa_level = 0;  // how many levels below the CPU's highest (modulo their count)
  int second = 0;     // the machine compared with 1 core: 3 cores, 2, or 3 split into cube and vector
  std::vector<int> families = std::vector<int>(sk::testing::kNumFamilies, 0);
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
                                     "stream-fusion=1",
                                     "stream-fusion=0",
                                     "early-start=1",
                                     "early-start=2:sync-choice=cost",
                                     "sync-choice=p2p:recompute=1",
                                     "recompute=1:sync-choice=cost",
                                     "recompute=0",
                                     "tiling-sink=0",
                                     "tiling-sink=1:stream-fusion=1",
                                     "preload-code=per-func",
                                     "preload-code=max:func-align=256",
                                     "func-align=4096",
                                     "early-start=3"};
const char* const kScopeNames[] = {"s0", "s1", "s2", "s0", ""};
const int64_t kDims[] = {8, 13, 32, 48, 64};
const int kFuncAligns[] = {0, 16, 64, 4096};

FuzzGraph decode_graph(FuzzInput& in) {
  FuzzGraph out;
  out.graph = std::make_unique<sk::Graph>("fuzz");
  sk::Graph& g = *out.graph;
  const int64_t rows = in.pick(0, 7) == 0 ? 17 : in.pick(1, 4);  // 17: past a 16-row split
  const int64_t d = in.one_of(kDims);
  const uint32_t seed = in.u32();
  int names = 0;
  auto fresh = [&](const char* prefix) { return prefix + std::to_string(names++); };

  std::vector<sk::Tensor> pool;  // f32 [rows, d] tensors ops read and add to
  const int num_inputs = in.pick(1, 3);
  for (int i = 0; i < num_inputs; ++i) {
    const std::string name = "in" + std::to_string(i);
    pool.push_back(g.input(name, sk::DType::kF32, {rows, d}));
    const std::vector<float> v = random_values(static_cast<size_t>(rows * d), seed + i, 2.0f);
    sk::testing::InputBytes bytes{name, std::vector<uint8_t>(v.size() * sizeof(float))};
    std::memcpy(bytes.bytes.data(), v.data(), bytes.bytes.size());
    out.inputs.push_back(std::move(bytes));
  }
  auto weight = [&](sk::Shape shape, float scale) {
    const auto values = random_values(static_cast<size_t>(sk::shape_numel(shape)), seed + names, scale);
    return g.constant_f32(fresh("w"), shape, values);
  };
  auto any = [&] { return pool[in.pick(0, static_cast<int>(pool.size()) - 1)]; };
  sk::testing::RandomOps ops(
      g, [&in](int lo, int hi) { return in.pick(lo, hi); }, seed ^ 0x9e3779b9u, rows, d, &out.inputs);

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
    switch (in.pick(0, 15)) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4: {  // an op group of one kernel family
        t = ops.build(static_cast<Family>(in.pick(0, sk::testing::kNumFamilies - 1)), pool);
        break;
      }
      case 5: {  // a host op, possibly inside a scope (superkernel mode must then refuse)
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
      case 6: {
        const std::string name = in.one_of(kScopeNames);
        const std::string options = in.pick(0, 7) == 0 ? in.text(24) : std::string(in.one_of(kScopeOptions));
        if (g.push_scope(name, options)) open_scopes.push_back(name);
        break;
      }
      case 7:
        if (!open_scopes.empty()) {
          // Now and then close the wrong scope: an error the graph records.
          const bool wrong = in.pick(0, 15) == 0;
          (void)g.pop_scope(wrong ? "not_open" : open_scopes.back());
          if (!wrong) open_scopes.pop_back();
        }
        break;
      case 8:
        g.set_stream(streams[in.pick(0, static_cast<int>(streams.size()) - 1)]);
        break;
      case 9:
        if (!events.empty()) {
          const sk::Event e = events[in.pick(0, static_cast<int>(events.size()) - 1)];
          if (in.flag()) {
            g.record(e);
          } else {
            g.wait(e);
          }
        }
        break;
      case 10:
        g.set_core_limit(in.pick(0, 3), in.pick(0, 3));
        break;
      case 11:  // element-wise update of the whole state variable, possibly in place
        if (state) {
          sk::OpSpec spec;
          spec.kind = in.flag() ? sk::OpKind::kAdd : sk::OpKind::kMul;
          spec.inputs = {in.flag() ? *state : any(), any()};
          spec.write_into = {*state};
          t = g.add_op(std::move(spec))[0];
        }
        break;
      case 12:  // reshape views of a dense tensor
        t = g.reshape(g.reshape(any(), {rows * d}), {rows, d});
        break;
      case 13: {  // a declared tensor defined later by write_into
        sk::Tensor decl = g.declare(fresh("decl"), sk::DType::kF32, {rows, d});
        sk::OpSpec spec;
        spec.kind = sk::OpKind::kMul;
        spec.inputs = {any(), any()};
        spec.write_into = {decl};
        t = g.add_op(std::move(spec))[0];
        break;
      }
      case 14:  // a broadcast add of a weight, the shape the v0 target started from
        t = sk::add(g, any(), weight({d}, 1.0f));
        break;
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
  int side = 0;
  for (sk::Tensor t : ops.side_outputs())
    if (!g.tensor(t).is_output && in.flag()) g.output(t, "side" + std::to_string(side++));
  out.families = ops.built();

  // Options: a zero byte (also what an exhausted input reads) keeps each one's default.
  sk::CompileOptions& o = out.options;
  sk::SuperKernelOptimizeOptions& so = o.super_kernel_optimize_options;
  sk::SuperKernelDebugOptions& dbg = o.super_kernel_debug_options;
  auto label = [&](const char* key, const std::string& value) { out.option_labels.push_back(key + ("=" + value)); };
  so.split_mode = in.pick(0, 3);
  label("split_mode", std::to_string(so.split_mode));
  dbg.debug_sync_all = in.pick(0, 7) == 7;
  label("debug_sync_all", std::to_string(dbg.debug_sync_all));
  dbg.debug_op_exec_trace = in.pick(0, 7) == 7;
  label("exec_trace", std::to_string(dbg.debug_op_exec_trace));
  dbg.debug_per_op_max_core_num = in.pick(0, 2);
  label("per_op_max_cores", std::to_string(dbg.debug_per_op_max_core_num));
  so.stream_fusion = in.flag();
  label("stream_fusion", std::to_string(so.stream_fusion));
  so.jit = in.flag();
  label("jit", std::to_string(so.jit));
  so.recompute = in.flag();
  label("recompute", std::to_string(so.recompute));
  so.early_start = in.pick(0, 2);
  label("early_start", std::to_string(so.early_start));
  so.sync_choice = in.flag() ? sk::SyncChoice::kCost : sk::SyncChoice::kPointToPoint;
  label("sync_choice", sk::sync_choice_name(so.sync_choice));
  so.preload_code = static_cast<sk::PreloadCode>(in.pick(0, 2));
  label("preload_code", sk::preload_code_name(so.preload_code));
  so.kernel_replicas = in.pick(0, 7) == 7 ? in.pick(2, 3) : 0;
  label("kernel_replicas", std::to_string(so.kernel_replicas));
  so.tiling_sink = in.pick(0, 3) != 3;
  label("tiling_sink", std::to_string(so.tiling_sink));
  so.func_align = in.one_of(kFuncAligns);
  label("func_align", std::to_string(so.func_align));
  o.prefetch = in.pick(0, 3) != 3;
  label("prefetch", std::to_string(o.prefetch));
  dbg.debug_cross_core_sync_check = in.pick(0, 7) == 7;
  label("access_check", std::to_string(dbg.debug_cross_core_sync_check));
  out.isa_level = in.pick(0, 4);
  out.second = in.pick(0, 2);
  return out;
}

struct Counters {
  long graphs = 0;
  long rejected_by_verify = 0;
  long rejected_by_compile = 0;  // in every mode
  long superkernel_only_rejected = 0;
  long ran_every_mode = 0;
  long runs = 0;
  // Graphs that ran in every mode, per family and per kernel; compiled runs per option value
  // and per ISA level.
  std::vector<long> family_graphs = std::vector<long>(sk::testing::kNumFamilies, 0);
  std::map<std::string, long> kernel_graphs, option_runs, isa_runs;
};
Counters counters;

void print_counters() {
  std::fprintf(stderr,
               "graph_fuzz: %ld graphs decoded: %ld rejected by verify, %ld rejected by compile in every mode, "
               "%ld rejected only by superkernel mode, %ld ran in every mode; %ld compiled runs compared\n",
               counters.graphs, counters.rejected_by_verify, counters.rejected_by_compile,
               counters.superkernel_only_rejected, counters.ran_every_mode, counters.runs);
  std::string line = "graph_fuzz: graphs that ran in every mode, per family:";
  for (int f = 0; f < sk::testing::kNumFamilies; ++f)
    line += std::string(f ? ", " : " ") + sk::testing::family_name(static_cast<Family>(f)) + " " +
            std::to_string(counters.family_graphs[static_cast<size_t>(f)]);
  std::fprintf(stderr, "%s\n", line.c_str());
  line = "graph_fuzz: graphs that ran in every mode, per kernel:";
  for (const auto& [kernel, n] : counters.kernel_graphs) line += " " + kernel + " " + std::to_string(n) + ",";
  line.pop_back();
  std::fprintf(stderr, "%s\n", line.c_str());
  line = "graph_fuzz: compiled runs per option value:";
  for (const auto& [option, n] : counters.option_runs) line += " " + option + " " + std::to_string(n) + ",";
  for (const auto& [level, n] : counters.isa_runs) line += " isa=" + level + " " + std::to_string(n) + ",";
  line.pop_back();
  std::fprintf(stderr, "%s\n", line.c_str());
}

struct Machine {
  // 1 core (a serial baseline), and 2 or 3 (3 splits every dimension unevenly), or 3 split into a
  // cube core and two vector cores (matmuls on the one, vector kernels on the others).
  std::shared_ptr<sk::Runtime> one = sk::testing::make_runtime(1, 30.0);
  std::shared_ptr<sk::Runtime> two = sk::testing::make_runtime(2, 30.0);
  std::shared_ptr<sk::Runtime> three = sk::testing::make_runtime(3, 30.0);
  std::shared_ptr<sk::Runtime> split = sk::testing::make_runtime(3, 30.0, /*cube_cores=*/1);
  std::vector<int> levels = sk::testing::isa_levels();
};

Machine& machine() {
  static Machine m;
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  machine();
  std::atexit(print_counters);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  FuzzGraph fg = decode_graph(in);
  ++counters.graphs;
  const sk::Status verified = fg.graph->verify();
  Machine& m = machine();
  const int level =
      m.levels.empty() ? -1 : m.levels[m.levels.size() - 1 - static_cast<size_t>(fg.isa_level) % m.levels.size()];

  std::optional<sk::testing::RunResult> reference;
  std::string reference_what;
  bool any_compiled = false, superkernel_rejected = false;
  long runs = 0;
  sk::Runtime* second = fg.second == 1 ? m.two.get() : fg.second == 2 ? m.split.get() : m.three.get();
  for (sk::Runtime* rt : {m.one.get(), second}) {
    std::optional<bool> eager_compiled;
    for (sk::ExecutionMode mode :
         {sk::ExecutionMode::kEager, sk::ExecutionMode::kGraph, sk::ExecutionMode::kSuperKernel}) {
      sk::CompileOptions options = fg.options;
      options.static_kernel_compile = mode != sk::ExecutionMode::kEager;
      options.super_kernel_optimize = mode == sk::ExecutionMode::kSuperKernel;
      const std::string what = std::string(sk::execution_mode_name(mode)) + " on " + std::to_string(rt->num_cores()) +
                               (rt == m.split.get() ? " cores (1 cube, 2 vector)" : " cores") + " at isa " +
                               sk::testing::isa_name(level);
      // The level is a variable of each loaded copy of the package: force it again once the
      // compile has loaded the copies kernel replication asks for.
      sk::testing::force_isa(level);
      auto exe = rt->compile(*fg.graph, options);
      sk::testing::force_isa(level);
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
      for (const sk::testing::InputBytes& input : fg.inputs) {
        const sk::Status s = (*exe)->set_input(input.name, input.bytes.data(), input.bytes.size());
        SK_FUZZ_CHECK(s.is_ok(), what + ": set_input('" + input.name + "'): " + s.message());
      }
      // Two steps: the second starts from the variables the first left and relaunches everything.
      sk::testing::RunResult result;
      for (int step = 0; step < 2; ++step) {
        const sk::Status ran = (*exe)->run();
        SK_FUZZ_CHECK(ran.is_ok(),
                      what + ": run " + std::to_string(step) + " failed after a successful compile: " + ran.message());
        sk::testing::RunResult outputs = sk::testing::collect_outputs(**exe);
        for (size_t i = 0; i < outputs.names.size(); ++i) {
          result.names.push_back(outputs.names[i] + " after step " + std::to_string(step));
          result.bytes.push_back(std::move(outputs.bytes[i]));
        }
      }
      ++counters.runs;
      ++runs;
      ++counters.isa_runs[sk::testing::isa_name(level)];
      if (!reference) {
        reference = std::move(result);
        reference_what = what;
        continue;
      }
      std::string why;
      SK_FUZZ_CHECK(sk::testing::bitwise_equal(*reference, result, &why), what + " vs " + reference_what + ": " + why);
    }
  }
  for (const std::string& l : fg.option_labels) counters.option_runs[l] += runs;
  if (!verified) {
    ++counters.rejected_by_verify;
  } else if (!any_compiled) {
    ++counters.rejected_by_compile;
  } else if (superkernel_rejected) {
    ++counters.superkernel_only_rejected;
  } else {
    ++counters.ran_every_mode;
    for (int f = 0; f < sk::testing::kNumFamilies; ++f)
      counters.family_graphs[static_cast<size_t>(f)] += fg.families[static_cast<size_t>(f)] > 0;
    std::set<std::string> kernels;
    for (size_t i = 0; i < fg.graph->num_ops(); ++i)
      if (!fg.graph->op(i).kernel.empty()) kernels.insert(fg.graph->op(i).kernel);
    for (const std::string& k : kernels) ++counters.kernel_graphs[k];
  }
  return 0;
}
