// Runtime behaviour in eager and graph modes: results, errors, host ops, memory planning, dump,
// variables and the watchdog. Uses the test kernel package (tests/packages/test_kernels.c).
#include <gtest/gtest.h>

#include <cstring>

#include "common/test_runtime.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using testing::make_runtime;

const ExecutionMode kPlainModes[] = {ExecutionMode::kEager, ExecutionMode::kGraph};

CompileOptions compile_options_for(ExecutionMode mode, CompileOptions opts = {}) {
  opts.static_kernel_compile = mode != ExecutionMode::kEager;
  opts.super_kernel_optimize = mode == ExecutionMode::kSuperKernel;
  return opts;
}

std::unique_ptr<Executable> compile_or_die(Runtime& rt, const Graph& g, ExecutionMode mode, CompileOptions opts = {}) {
  auto exe = rt.compile(g, compile_options_for(mode, opts));
  if (!exe) throw std::runtime_error(exe.status().to_string());
  return std::move(*exe);
}

Tensor add1(Graph& g, Tensor x, const std::string& name = "") {
  return call_kernel(g, "test.add1.f32", {x}, {{DType::kF32, g.tensor(x).shape, ""}}, {}, name)[0];
}

TEST(Runtime, ChainGivesTheSameBitsInEagerAndGraph) {
  auto rt = make_runtime(2);
  Graph g("chain");
  Tensor x = g.input("x", DType::kF32, {1000});
  Tensor t = x;
  for (int i = 0; i < 20; ++i) t = add1(g, t);
  g.output(t, "y");
  auto xs = testing::random_floats(1000, 1);
  for (ExecutionMode m : kPlainModes) {
    auto exe = compile_or_die(*rt, g, m);
    ASSERT_TRUE(exe->set_input("x", xs).is_ok());
    ASSERT_TRUE(exe->run().is_ok());
    std::vector<float> y = exe->output_f32("y");
    ASSERT_EQ(y.size(), 1000u);
    for (size_t i = 0; i < y.size(); ++i) {
      float expect = xs[i];
      for (int k = 0; k < 20; ++k) expect += 1.0f;
      ASSERT_EQ(y[i], expect) << execution_mode_name(m) << " at " << i;
    }
  }
}

TEST(Runtime, GraphModeReusesMemoryAndReportsPeak) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {1024});
  for (int i = 0; i < 10; ++i) t = add1(g, t);
  g.output(t, "y");
  auto graph_exe = compile_or_die(*rt, g, ExecutionMode::kGraph);
  auto eager_exe = compile_or_die(*rt, g, ExecutionMode::kEager);
  const CompileReport& r = graph_exe->report();
  EXPECT_LT(r.arena_bytes, r.unplanned_bytes);
  EXPECT_GE(r.arena_bytes, r.peak_live_bytes);
  // Input + two live intermediates at a time (+ the output at the end).
  EXPECT_LE(r.peak_live_bytes, 3 * 4096);
  EXPECT_EQ(eager_exe->report().arena_bytes, eager_exe->report().unplanned_bytes);
  EXPECT_EQ(r.num_launches, 1u);
  EXPECT_EQ(eager_exe->report().num_launches, 10u);
}

TEST(Runtime, KernelErrorNamesKernelOpAndCore) {
  auto rt = make_runtime(2);
  for (ExecutionMode m : kPlainModes) {
    Graph g;
    Tensor x = g.input("x", DType::kF32, {256});
    Tensor a = add1(g, x);
    int32_t fail_core = 1;
    std::vector<uint8_t> attrs(sizeof(fail_core));
    std::memcpy(attrs.data(), &fail_core, sizeof(fail_core));
    Tensor b = call_kernel(g, "test.fail.f32", {a}, {{DType::kF32, {256}, ""}}, attrs, "exploder")[0];
    g.output(add1(g, b), "y");
    auto exe = compile_or_die(*rt, g, m);
    ASSERT_TRUE(exe->set_input("x", std::vector<float>(256, 0.0f)).is_ok());
    Status s = exe->run();
    ASSERT_FALSE(s.is_ok()) << execution_mode_name(m);
    EXPECT_EQ(s.code(), StatusCode::kKernelError);
    EXPECT_NE(s.message().find("test.fail.f32"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("exploder"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("core 1"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("boom on core 1"), std::string::npos) << s.message();
    // The device is still usable afterwards.
    Graph ok;
    ok.output(add1(ok, ok.input("x", DType::kF32, {16})), "y");
    auto exe2 = compile_or_die(*rt, ok, m);
    ASSERT_TRUE(exe2->set_input("x", std::vector<float>(16, 0.0f)).is_ok());
    EXPECT_TRUE(exe2->run().is_ok());
  }
}

TEST(Runtime, SyncAllKernelWorksWithFewerCoresThanTheLaunch) {
  auto rt = make_runtime(3);
  for (int limit : {0, 1, 2}) {
    for (ExecutionMode m : kPlainModes) {
      Graph g;
      Tensor x = g.input("x", DType::kF32, {101});
      Tensor r;
      {
        LimitCoreNum lim(g, 0, limit);
        r = call_kernel(g, "test.reverse_sync.f32", {add1(g, x)}, {{DType::kF32, {101}, ""}}, {}, "rev")[0];
      }
      g.output(add1(g, r), "y");
      auto exe = compile_or_die(*rt, g, m);
      auto xs = testing::random_floats(101, 3);
      ASSERT_TRUE(exe->set_input("x", xs).is_ok());
      Status s = exe->run();
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      auto y = exe->output_f32("y");
      for (size_t i = 0; i < 101; ++i) ASSERT_EQ(y[i], (xs[100 - i] + 1.0f) + 1.0f) << "limit " << limit;
    }
  }
}

TEST(Runtime, PerCoreWorkspaceGivesEveryCoreItsOwnSlice) {
  auto rt = make_runtime(3);
  const auto build = [](int limit) {
    Graph g;
    Tensor x = g.input("x", DType::kF32, {101});
    Tensor r;
    {
      SuperKernelScope scope(g, "s", "feed-sync-all=1");
      LimitCoreNum lim(g, 0, limit);
      // 404 bytes per core, rounded up to 448 so that every slice starts on a cache line.
      r = call_kernel(g, "test.core_scratch.f32", {add1(g, x)}, {{DType::kF32, {101}, ""}}, {}, "scratch")[0];
    }
    g.output(add1(g, r), "y");
    return g;
  };
  // The scratch op is where the most bytes are live, so each extra core adds one slice there.
  auto one_core = rt->compile(build(1), compile_options_for(ExecutionMode::kGraph));
  ASSERT_TRUE(one_core.has_value()) << one_core.status().to_string();
  const int64_t peak_one_core = (*one_core)->report().peak_live_bytes;
  for (int limit : {0, 2}) {
    for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
      auto exe = rt->compile(build(limit), compile_options_for(m));
      ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
      const int cores = limit == 0 ? 3 : limit;
      EXPECT_EQ((*exe)->report().peak_live_bytes - peak_one_core, 448 * (cores - 1)) << "one slice per core";
      auto xs = testing::random_floats(101, 5);
      ASSERT_TRUE((*exe)->set_input("x", xs).is_ok());
      for (int run = 0; run < 3; ++run) {
        Status s = (*exe)->run();
        ASSERT_TRUE(s.is_ok()) << execution_mode_name(m) << " limit " << limit << ": " << s.to_string();
      }
      auto y = (*exe)->output_f32("y");
      for (size_t i = 0; i < 101; ++i) ASSERT_EQ(y[i], xs[i] + 3.0f) << execution_mode_name(m);
    }
  }
}

// workspace_size sees the operands' shapes even for a tiling sink, whose tiling runs only later.
TEST(Runtime, TilingSinkWithAPerCoreWorkspace) {
  auto rt = make_runtime(2);
  for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    Graph g;
    Tensor x = g.input("x", DType::kF32, {300});
    Tensor t =
        call_kernel(g, "test.scale_by_first_scratch.f32", {add1(g, x)}, {{DType::kF32, {300}, ""}}, {}, "scaled")[0];
    g.output(t, "y");
    auto exe = compile_or_die(*rt, g, m);
    auto xs = testing::random_floats(300, 9);
    ASSERT_TRUE(exe->set_input("x", xs).is_ok());
    Status s = exe->run();
    ASSERT_TRUE(s.is_ok()) << execution_mode_name(m) << ": " << s.to_string();
    auto y = exe->output_f32("y");
    for (size_t i = 0; i < 300; ++i) ASSERT_EQ(y[i], (xs[i] + 1.0f) * (xs[0] + 1.0f)) << execution_mode_name(m);
  }
}

TEST(Runtime, WatchdogTurnsADeadlockIntoAnError) {
  auto rt = make_runtime(2, /*watchdog_seconds=*/0.3);
  for (ExecutionMode m : kPlainModes) {
    Graph g;
    Tensor x = g.input("x", DType::kF32, {64});
    g.output(call_kernel(g, "test.hang.f32", {x}, {{DType::kF32, {64}, ""}}, {}, "stuck")[0], "y");
    auto exe = compile_or_die(*rt, g, m);
    ASSERT_TRUE(exe->set_input("x", std::vector<float>(64, 0.0f)).is_ok());
    Status s = exe->run();
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), StatusCode::kDeadlock) << s.to_string();
    EXPECT_NE(s.message().find("core 0"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("barrier"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("stuck"), std::string::npos) << s.message();
  }
}

TEST(Runtime, HostOpsRunBetweenKernels) {
  auto rt = make_runtime(2);
  for (ExecutionMode m : kPlainModes) {
    Graph g;
    Tensor x = g.input("x", DType::kF32, {8});
    Tensor a = add1(g, x);
    Tensor h = g.host_op("double",
                         [](HostOpContext& ctx) {
                           auto* in = static_cast<const float*>(ctx.inputs[0].data);
                           auto* out = static_cast<float*>(ctx.outputs[0].data);
                           for (int i = 0; i < 8; ++i) out[i] = 2 * in[i];
                           return Status::ok();
                         },
                         {a}, {{DType::kF32, {8}, "doubled"}})[0];
    g.output(add1(g, h), "y");
    auto exe = compile_or_die(*rt, g, m);
    std::vector<float> xs = {0, 1, 2, 3, 4, 5, 6, 7};
    ASSERT_TRUE(exe->set_input("x", xs).is_ok());
    ASSERT_TRUE(exe->run().is_ok());
    auto y = exe->output_f32("y");
    for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], 2 * (xs[i] + 1) + 1);
    if (m == ExecutionMode::kGraph) {
      EXPECT_EQ(exe->report().num_launches, 2u);
    }
  }
}

TEST(Runtime, HostOpErrorNamesTheOp) {
  auto rt = make_runtime(1);
  Graph g;
  Tensor x = g.input("x", DType::kF32, {8});
  g.output(g.host_op("refuse", [](HostOpContext&) { return Status::invalid_argument("no thanks"); }, {x},
                     {{DType::kF32, {8}, ""}})[0],
           "y");
  auto exe = compile_or_die(*rt, g, ExecutionMode::kGraph);
  ASSERT_TRUE(exe->set_input("x", std::vector<float>(8, 0.0f)).is_ok());
  Status s = exe->run();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("host op 'refuse'"), std::string::npos);
  EXPECT_NE(s.message().find("no thanks"), std::string::npos);
}

TEST(Runtime, MissingKernelIsNamedAtCompileTime) {
  auto rt = make_runtime(1);
  Graph g;
  Tensor x = g.input("x", DType::kF32, {8});
  g.output(call_kernel(g, "nowhere.f32", {x}, {{DType::kF32, {8}, ""}}, {}, "ghost")[0], "y");
  auto exe = rt->compile(g);
  ASSERT_FALSE(exe.has_value());
  EXPECT_EQ(exe.status().code(), StatusCode::kNotFound);
  EXPECT_NE(exe.status().message().find("op 'ghost'"), std::string::npos);
  EXPECT_NE(exe.status().message().find("'nowhere.f32'"), std::string::npos);
}

TEST(Runtime, InvalidGraphFailsCompilation) {
  auto rt = make_runtime(1);
  Graph g("broken");
  add(g, g.input("a", DType::kF32, {4}), g.input("b", DType::kF32, {5}), "bad");
  auto exe = rt->compile(g);
  ASSERT_FALSE(exe.has_value());
  EXPECT_NE(exe.status().message().find("graph 'broken'"), std::string::npos);
  EXPECT_NE(exe.status().message().find("op 'bad'"), std::string::npos);
}

TEST(Runtime, SetInputChecksNameAndSize) {
  auto rt = make_runtime(1);
  Graph g;
  g.output(add1(g, g.input("x", DType::kF32, {8})), "y");
  auto exe = compile_or_die(*rt, g, ExecutionMode::kGraph);
  std::vector<float> seven(7);
  Status wrong_size = exe->set_input("x", seven);
  ASSERT_FALSE(wrong_size.is_ok());
  EXPECT_NE(wrong_size.message().find("'x'"), std::string::npos);
  EXPECT_NE(wrong_size.message().find("28 bytes"), std::string::npos);
  EXPECT_EQ(exe->set_input("nope", seven).code(), StatusCode::kNotFound);
  EXPECT_FALSE(exe->tensor("nope").has_value());
}

TEST(Runtime, VariablesPersistAcrossRuns) {
  auto rt = make_runtime(2);
  for (ExecutionMode m : kPlainModes) {
    Graph g;
    Tensor counter = g.variable("counter", DType::kF32, {32});
    OpSpec spec;
    spec.kind = OpKind::kCustom;
    spec.kernel = "test.add1.f32";
    spec.inputs = {counter};
    spec.outputs = {{DType::kF32, {32}, ""}};
    spec.write_into = {counter};
    g.add_op(spec);
    g.output(g.reshape(counter, {4, 8}), "snapshot");
    auto exe = compile_or_die(*rt, g, m);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(exe->run().is_ok());
    auto v = exe->output_f32("snapshot");
    ASSERT_EQ(v.size(), 32u);
    for (float f : v) EXPECT_EQ(f, 3.0f);
  }
}

TEST(Runtime, DumpRecordsEveryOpOutputIdenticallyInBothModes) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor x = g.input("x", DType::kF32, {4, 16});
  Tensor a = add1(g, x, "first");
  Tensor b = add1(g, a, "second");
  Tensor c = add1(g, b, "third");
  g.output(c, "y");
  auto xs = testing::random_floats(64, 9);
  std::vector<std::vector<DumpRecord>> dumps;
  for (ExecutionMode m : kPlainModes) {
    CompileOptions o;
    o.dump = true;
    auto exe = compile_or_die(*rt, g, m, o);
    ASSERT_TRUE(exe->set_input("x", xs).is_ok());
    ASSERT_TRUE(exe->run().is_ok());
    dumps.push_back(exe->dump());
  }
  ASSERT_EQ(dumps[0].size(), 3u);
  ASSERT_EQ(dumps[1].size(), 3u);
  const char* names[] = {"first", "second", "third"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(dumps[0][i].op, names[i]);
    EXPECT_EQ(dumps[0][i].shape, (Shape{4, 16}));
    EXPECT_EQ(dumps[0][i].data.size(), 64u * 4);
    EXPECT_EQ(dumps[0][i].data, dumps[1][i].data) << names[i];
    float first;
    std::memcpy(&first, dumps[0][i].data.data(), 4);
    EXPECT_EQ(first, xs[0] + static_cast<float>(i + 1));
  }
}

TEST(Runtime, TraceRecordsEveryKernelOnEveryCore) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {4096});
  for (int i = 0; i < 3; ++i) t = add1(g, t);
  g.output(t, "y");
  CompileOptions o;
  o.super_kernel_debug_options.debug_op_exec_trace = true;
  for (ExecutionMode m : kPlainModes) {
    auto exe = compile_or_die(*rt, g, m, o);
    ASSERT_TRUE(exe->set_input("x", std::vector<float>(4096, 0.0f)).is_ok());
    ASSERT_TRUE(exe->run().is_ok());
    EXPECT_EQ(exe->trace().size(), 6u) << execution_mode_name(m);
    for (const TraceEvent& e : exe->trace()) {
      EXPECT_EQ(e.kernel, "test.add1.f32");
      EXPECT_LE(e.start_ns, e.end_ns);
    }
  }
}

TEST(Runtime, SplitCoreGroupsRouteKernelTypes) {
  auto rt = make_runtime(3, 60.0, /*cube_cores=*/1);
  Graph g;
  Tensor x = g.input("x", DType::kF32, {300});
  Tensor a = call_kernel(g, "test.add1_cube.f32", {x}, {{DType::kF32, {300}, ""}}, {}, "on_cube")[0];
  g.output(add1(g, a, "on_vector"), "y");
  CompileOptions o;
  o.super_kernel_debug_options.debug_op_exec_trace = true;
  for (ExecutionMode m : kPlainModes) {
    auto exe = compile_or_die(*rt, g, m, o);
    ASSERT_TRUE(exe->set_input("x", std::vector<float>(300, 0.0f)).is_ok());
    ASSERT_TRUE(exe->run().is_ok());
    for (const TraceEvent& e : exe->trace()) {
      if (e.op == "on_cube") {
        EXPECT_EQ(e.core, 0);
      } else {
        EXPECT_GE(e.core, 1);
      }
    }
    EXPECT_EQ(exe->trace().size(), 3u);
    auto y = exe->output_f32("y");
    EXPECT_EQ(y[299], 2.0f);
  }
}

TEST(Runtime, RepeatedRunsDoNotHang) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  for (int i = 0; i < 5; ++i) t = add1(g, t);
  g.output(t, "y");
  for (ExecutionMode m : kPlainModes) {
    auto exe = compile_or_die(*rt, g, m);
    ASSERT_TRUE(exe->set_input("x", std::vector<float>(64, 0.0f)).is_ok());
    for (int i = 0; i < 2000; ++i) ASSERT_TRUE(exe->run().is_ok());
  }
}

}  // namespace
}  // namespace sk
