// Bad input and resource limits: every case is a clear error naming the op, tensor or limit at
// fault, never a crash, an abort or an allocation the OS would kill. Also the operand aliasing
// rule (an output is disjoint from each input or exactly the same view) and the contracts of
// Executable for unset inputs and concurrent calls.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <limits>
#include <thread>

#include "common/test_runtime.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using testing::make_runtime;

const ExecutionMode kAllModes[] = {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// test.add1.f32 (y = x + 1 element-wise) writing `target` instead of a new tensor.
void add1_into(Graph& g, Tensor x, Tensor target, const std::string& name) {
  OpSpec spec;
  spec.kind = OpKind::kCustom;
  spec.kernel = "test.add1.f32";
  spec.name = name;
  spec.inputs = {x};
  spec.outputs = {{DType::kF32, g.tensor(target).shape, ""}};
  spec.write_into = {target};
  g.add_op(std::move(spec));
}

// Built-in add of ones (strided views welcome) writing `target`.
void add_one_into(Graph& g, Tensor x, Tensor target, const std::string& name) {
  const Shape shape = g.tensor(x).shape;
  std::vector<float> ones(static_cast<size_t>(shape_numel(shape)), 1.0f);
  OpSpec spec;
  spec.kind = OpKind::kAdd;
  spec.name = name;
  spec.inputs = {x, g.constant_f32(name + "_ones", shape, ones)};
  spec.write_into = {target};
  g.add_op(std::move(spec));
}

Tensor add1(Graph& g, Tensor x, const std::string& name = "") {
  return call_kernel(g, "test.add1.f32", {x}, {{DType::kF32, g.tensor(x).shape, ""}}, {}, name)[0];
}

std::unique_ptr<Executable> compile_ok(Runtime& rt, const Graph& g, ExecutionMode m, CompileOptions o = {}) {
  o.static_kernel_compile = m != ExecutionMode::kEager;
  o.super_kernel_optimize = m == ExecutionMode::kSuperKernel;
  auto exe = rt.compile(g, o);
  if (!exe) throw std::runtime_error(exe.status().to_string());
  return std::move(*exe);
}

// ---- Operand aliasing ----------------------------------------------------------------------------

TEST(Aliasing, OutputShiftedByOneElementFromItsInputIsRejected) {
  Graph g("shift");
  Tensor v = g.variable("v", DType::kF32, {64});
  add1_into(g, g.slice(v, 0, 0, 32, "src"), g.slice(v, 0, 1, 33, "dst"), "shifted");
  Status s = g.verify();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(s.message(), "op 'shifted'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "'dst'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "'src'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "overlaps input 0 'src' [32] (not the same view)")) << s.message();
  // Compilation reports the same error in every mode.
  auto rt = make_runtime(2);
  for (ExecutionMode m : kAllModes) {
    auto exe = rt->compile(g, CompileOptions::for_mode(m));
    ASSERT_FALSE(exe.has_value()) << execution_mode_name(m);
    EXPECT_TRUE(contains(exe.status().message(), "op 'shifted'"));
  }
}

TEST(Aliasing, BuiltinOpsFollowTheSameRule) {
  Graph g;
  Tensor v = g.variable("v", DType::kF32, {8, 8});
  Tensor in = g.slice(g.slice(v, 0, 0, 4), 1, 0, 4, "top_left");
  Tensor out = g.slice(g.slice(v, 0, 3, 7), 1, 3, 7, "inner");  // shares only element (3, 3)
  OpSpec spec;
  spec.kind = OpKind::kCopy;
  spec.name = "corner_copy";
  spec.inputs = {in};
  spec.write_into = {out};
  g.add_op(std::move(spec));
  Status s = g.verify();
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "op 'corner_copy' (copy)")) << s.message();
  EXPECT_TRUE(contains(s.message(), "'inner'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "'top_left'")) << s.message();
}

TEST(Aliasing, TransposedViewOfTheInputIsNotTheSameView) {
  Graph g;
  Tensor v = g.variable("v", DType::kF32, {4, 4});
  add1_into(g, v, g.transpose(v, {1, 0}, "vt"), "transposed");
  Status s = g.verify();
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "'vt'")) << s.message();
}

TEST(Aliasing, OverlappingOutputsOfOneOpAreRejected) {
  Graph g;
  Tensor v = g.variable("v", DType::kF32, {16});
  OpSpec spec;
  spec.kind = OpKind::kHost;
  spec.name = "two_writes";
  spec.host = [](HostOpContext&) { return Status::ok(); };
  spec.outputs = {{DType::kF32, {8}, ""}, {DType::kF32, {8}, ""}};
  spec.write_into = {g.slice(v, 0, 0, 8, "lo"), g.slice(v, 0, 4, 12, "mid")};
  g.add_op(std::move(spec));
  Status s = g.verify();
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "op 'two_writes'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "'lo'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "'mid'")) << s.message();
}

// Interleaved and side-by-side views whose byte spans intersect but which share no byte, and an
// exact in-place update: all legal, and every mode gives the same, correct bits.
TEST(Aliasing, DisjointInterleavedViewsAndExactInPlaceRunInEveryMode) {
  Graph g("interleaved");
  Tensor x = g.input("x", DType::kF32, {16, 16});
  Tensor v = g.variable("v", DType::kF32, {16, 16});
  {
    SuperKernelScope scope(g, "s");
    add_one_into(g, x, v, "fill");
    // Even columns -> odd columns (a [16, 8, 2] view sliced on its last dim).
    Tensor pairs = g.reshape(v, {16, 8, 2});
    add_one_into(g, g.slice(pairs, 2, 0, 1, "even"), g.slice(pairs, 2, 1, 2, "odd"), "even_to_odd");
    // Left half -> right half, then the whole of v in place.
    add_one_into(g, g.slice(v, 1, 0, 8, "left"), g.slice(v, 1, 8, 16, "right"), "left_to_right");
    add_one_into(g, v, v, "in_place");
  }
  g.output(g.reshape(v, {256}), "y");
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().to_string();

  auto xs = testing::random_floats(256, 3);
  std::vector<float> expect(256);
  for (int r = 0; r < 16; ++r) {
    float row[16];
    for (int c = 0; c < 16; ++c) row[c] = xs[r * 16 + c] + 1.0f;
    for (int c = 1; c < 16; c += 2) row[c] = row[c - 1] + 1.0f;
    for (int c = 8; c < 16; ++c) row[c] = row[c - 8] + 1.0f;
    for (int c = 0; c < 16; ++c) expect[r * 16 + c] = row[c] + 1.0f;
  }
  for (int cores : {1, 3}) {
    auto rt = make_runtime(cores);
    for (ExecutionMode m : kAllModes) {
      auto exe = compile_ok(*rt, g, m);
      ASSERT_TRUE(exe->set_input("x", xs).is_ok());
      ASSERT_TRUE(exe->run().is_ok());
      EXPECT_EQ(exe->output_f32("y"), expect) << execution_mode_name(m) << ", " << cores << " cores";
    }
  }
}

// Views of millions of elements: decided from their structure, not element by element.
TEST(Aliasing, LargeViewsAreDecidedExactly) {
  Graph g;
  Tensor v = g.variable("v", DType::kF32, {2048, 2048});
  Tensor pairs = g.reshape(v, {2048, 1024, 2});
  add1_into(g, g.slice(pairs, 2, 0, 1, "even"), g.slice(pairs, 2, 1, 2, "odd"), "interleaved");
  add1_into(g, g.slice(v, 1, 0, 1024, "left"), g.slice(v, 1, 1024, 2048, "right"), "side_by_side");
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  // Two 1024 x 1024 blocks sharing exactly one element, (1023, 1023).
  Tensor top_left = g.slice(g.slice(v, 0, 0, 1024), 1, 0, 1024, "top_left");
  add1_into(g, top_left, g.slice(g.slice(v, 0, 1023, 2047), 1, 1023, 2047, "shifted_block"), "corner");
  Status s = g.verify();
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "op 'corner'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "'shifted_block' [1024, 1024] overlaps")) << s.message();
}

// Exact aliasing is legal only for kernels whose cores never read what another core writes.
TEST(Aliasing, InPlaceNeedsAKernelWhoseCoresReadOnlyWhatTheyWrite) {
  auto rt = make_runtime(1);  // the check also covers two cores, whatever the machine
  {
    Graph g;
    Tensor v = g.variable("v", DType::kF32, {64});
    OpSpec spec;
    spec.kind = OpKind::kCustom;
    spec.kernel = "test.reverse_sync.f32";  // every core reads the whole input
    spec.name = "reverse_in_place";
    spec.inputs = {v};
    spec.outputs = {{DType::kF32, {64}, ""}};
    spec.write_into = {v};
    g.add_op(std::move(spec));
    g.output(v, "v");
    ASSERT_TRUE(g.verify().is_ok());
    for (ExecutionMode m : kAllModes) {
      auto exe = rt->compile(g, CompileOptions::for_mode(m));
      ASSERT_FALSE(exe.has_value()) << execution_mode_name(m);
      const std::string msg = exe.status().message();
      EXPECT_TRUE(contains(msg, "op 'reverse_in_place'")) << msg;
      EXPECT_TRUE(contains(msg, "kernel 'test.reverse_sync.f32' does not support")) << msg;
      EXPECT_TRUE(contains(msg, "in place")) << msg;
    }
  }
  {
    Graph g;
    Tensor x = g.input("x", DType::kF32, {64});
    Tensor v = g.variable("v", DType::kF32, {64});
    add1_into(g, x, v, "fill");
    add1_into(g, v, v, "add1_in_place");  // each core reads exactly what it writes
    g.output(v, "v");
    for (ExecutionMode m : kAllModes) {
      auto exe = compile_ok(*rt, g, m);
      ASSERT_TRUE(exe->set_input("x", std::vector<float>(64, 1.0f)).is_ok());
      ASSERT_TRUE(exe->run().is_ok());
      EXPECT_EQ(exe->output_f32("v"), std::vector<float>(64, 3.0f)) << execution_mode_name(m);
    }
  }
}

// ---- Sizes ----------------------------------------------------------------------------------------

TEST(Limits, ByteSizeThatOverflowsIsAnErrorNamingTheTensor) {
  Graph g;
  const int64_t big = int64_t{1} << 31;
  Tensor x = g.input("huge", DType::kF32, {big, big});  // 2^64 bytes wrap to 0 without a check
  g.output(add1(g, x), "y");
  Status s = g.verify();
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "input 'huge'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "[2147483648, 2147483648]")) << s.message();
  auto rt = make_runtime(1);
  EXPECT_FALSE(rt->compile(g, CompileOptions::for_mode(ExecutionMode::kGraph)).has_value());
}

TEST(Limits, OpOutputLargerThanTheAddressSpaceNamesTheOp) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {4});
  // 2^52 bytes: no int64 overflow, but far beyond any address space.
  call_kernel(g, "test.add1.f32", {x}, {{DType::kF32, {int64_t{1} << 40, 1024}, ""}}, {}, "giant");
  Status s = g.verify();
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "op 'giant'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "address space")) << s.message();
}

TEST(Limits, ReshapeWhoseElementCountOverflowsIsRejected) {
  Graph g;
  Tensor x = g.variable("empty", DType::kF32, {0});
  // 2^64 elements wrap to 0, the element count of the source.
  g.reshape(x, {int64_t{1} << 32, int64_t{1} << 32}, "wrapped");
  Status s = g.verify();
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "reshape 'wrapped'")) << s.message();
}

TEST(Limits, HugeConstantWithTheWrongByteCountNeitherThrowsNorAllocates) {
  Graph g;
  const float data[4] = {1, 2, 3, 4};
  // Needs 4 TiB; the 16 bytes given are a mistake that must not become a 4 TiB placeholder.
  Tensor c;
  EXPECT_NO_THROW(c = g.constant("weights", DType::kF32, {int64_t{1} << 40}, data, sizeof(data)));
  EXPECT_TRUE(g.tensor(c).data.empty());
  Status s = g.verify();
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "constant 'weights'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "got 16 bytes")) << s.message();
}

TEST(Limits, ArenaLimitIsAnErrorNamingTheLimitAndTheNeededBytes) {
  Graph g("big_arena");
  Tensor x = g.input("x", DType::kF32, {1 << 18});  // 1 MiB
  g.output(add1(g, add1(g, x)), "y");
  auto rt = make_runtime(2);
  for (ExecutionMode m : kAllModes) {
    CompileOptions o = CompileOptions::for_mode(m);
    ASSERT_TRUE(o.set("arena_limit_bytes", "1000000").is_ok());
    auto exe = rt->compile(g, o);
    ASSERT_FALSE(exe.has_value()) << execution_mode_name(m);
    const std::string msg = exe.status().message();
    EXPECT_TRUE(contains(msg, "arena_limit_bytes = 1000000")) << msg;
    EXPECT_TRUE(contains(msg, "needs an arena of")) << msg;
    EXPECT_TRUE(contains(msg, "graph 'big_arena'")) << msg;
    // Raising the limit compiles the same graph.
    ASSERT_TRUE(o.set("arena_limit_bytes", "100000000").is_ok());
    EXPECT_TRUE(rt->compile(g, o).has_value()) << execution_mode_name(m);
  }
  CompileOptions o;
  EXPECT_FALSE(o.set("arena_limit_bytes", "-1").is_ok());
  EXPECT_FALSE(o.set("arena_limit_bytes", "lots").is_ok());
}

TEST(Limits, GraphNeedingMoreMemoryThanTheMachineFailsToCompileWithoutAborting) {
  Graph g("too_big");
  // 64 TiB: within one tensor's limit, beyond any test machine's memory.
  Tensor cache = g.variable("cache", DType::kF32, {int64_t{1} << 44});
  Tensor x = g.input("x", DType::kF32, {16});
  g.output(add1(g, x), "y");
  g.output(cache, "cache_out");
  ASSERT_TRUE(g.verify().is_ok());
  auto rt = make_runtime(1);
  for (ExecutionMode m : kAllModes) {
    auto exe = rt->compile(g, CompileOptions::for_mode(m));
    ASSERT_FALSE(exe.has_value()) << execution_mode_name(m);
    EXPECT_TRUE(contains(exe.status().message(), "physical memory")) << exe.status().message();
    EXPECT_TRUE(contains(exe.status().message(), "arena_limit_bytes")) << exe.status().message();
  }
}

TEST(Limits, TooManyScopesStreamsEventsAndCoresAreErrorsNamingTheLimit) {
  {
    Graph g;
    for (int i = 0; i < 1025; ++i) SuperKernelScope scope(g, "scope_" + std::to_string(i));
    Status s = g.verify();
    ASSERT_FALSE(s.is_ok());
    EXPECT_TRUE(contains(s.message(), "at most 1024 distinct scopes")) << s.message();
  }
  {
    Graph g;
    for (int i = 0; i < 1024; ++i) g.create_stream("stream_" + std::to_string(i));
    Status s = g.verify();
    ASSERT_FALSE(s.is_ok());
    EXPECT_TRUE(contains(s.message(), "at most 1024 streams")) << s.message();
  }
  {
    RuntimeOptions o;
    o.num_cores = 100000;
    o.allow_oversubscribe = true;
    o.pin_threads = false;
    o.load_builtin_kernels = false;
    auto rt = Runtime::create(o);
    ASSERT_FALSE(rt.has_value());
    EXPECT_TRUE(contains(rt.status().message(), "num_cores")) << rt.status().message();
    EXPECT_TRUE(contains(rt.status().message(), "limit of 1024 cores")) << rt.status().message();
  }
}

// ---- Names and inputs -----------------------------------------------------------------------------

TEST(Inputs, OutputNamedLikeAnInputIsAnErrorNamingBoth) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {8});
  g.output(add1(g, x, "plus_one"), "x");
  Status s = g.verify();
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "output 'x' (tensor 'plus_one')")) << s.message();
  EXPECT_TRUE(contains(s.message(), "input 'x'")) << s.message();
  // An input that is itself an output under its own name stays legal.
  Graph ok;
  Tensor y = ok.input("y", DType::kF32, {8});
  ok.output(y, "y");
  ok.output(add1(ok, y), "z");
  EXPECT_TRUE(ok.verify().is_ok()) << ok.verify().to_string();
}

TEST(Inputs, SetInputFromNullptrIsAnError) {
  auto rt = make_runtime(1);
  Graph g;
  g.output(add1(g, g.input("x", DType::kF32, {8})), "y");
  for (ExecutionMode m : kAllModes) {
    auto exe = compile_ok(*rt, g, m);
    Status s = exe->set_input("x", nullptr, 8 * sizeof(float));
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(s.message(), "set_input('x')")) << s.message();
    EXPECT_TRUE(contains(s.message(), "nullptr")) << s.message();
  }
}

TEST(Inputs, RunRefusesAnInputNeverSetAndVariablesStartZeroed) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor a = g.input("a", DType::kF32, {8});
  Tensor b = g.input("b", DType::kF32, {8});
  Tensor v = g.variable("v", DType::kF32, {8});
  g.output(add(g, add(g, a, b), v), "y");
  for (ExecutionMode m : kAllModes) {
    auto exe = compile_ok(*rt, g, m);
    Status s = exe->run();
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_TRUE(contains(s.message(), "input 'a' was never set (and 1 more")) << s.message();
    ASSERT_TRUE(exe->set_input("a", std::vector<float>(8, 1.0f)).is_ok());
    s = exe->run();
    ASSERT_FALSE(s.is_ok());
    EXPECT_TRUE(contains(s.message(), "input 'b' was never set;")) << s.message();
    ASSERT_TRUE(exe->set_input("b", std::vector<float>(8, 2.0f)).is_ok());
    ASSERT_TRUE(exe->run().is_ok());
    EXPECT_EQ(exe->output_f32("y"), std::vector<float>(8, 3.0f)) << execution_mode_name(m);
    // Values stay set from run to run.
    ASSERT_TRUE(exe->run().is_ok());
  }
}

// ---- Concurrency and teardown ----------------------------------------------------------------------

TEST(Executable, SecondThreadCallingInDuringARunGetsAnErrorAndCorruptsNothing) {
  auto rt = make_runtime(2);
  Graph g;
  Tensor x = g.input("x", DType::kF32, {64});
  std::promise<void> entered;
  std::shared_future<void> release_future;
  std::promise<void> release;
  release_future = release.get_future().share();
  bool first_call = true;
  Tensor h = g.host_op("gate",
                       [&](HostOpContext& ctx) {
                         if (first_call) {
                           first_call = false;
                           entered.set_value();
                           release_future.wait();
                         }
                         std::memcpy(ctx.outputs[0].data, ctx.inputs[0].data, ctx.inputs[0].bytes());
                         return Status::ok();
                       },
                       {add1(g, x)}, {{DType::kF32, {64}, ""}})[0];
  g.output(add1(g, h), "y");
  auto exe = compile_ok(*rt, g, ExecutionMode::kGraph);
  ASSERT_TRUE(exe->set_input("x", std::vector<float>(64, 1.0f)).is_ok());
  Status first;
  std::thread runner([&] { first = exe->run(); });
  entered.get_future().wait();  // the runner is inside run() now
  Status second = exe->run();
  Status set = exe->set_input("x", std::vector<float>(64, 5.0f));
  release.set_value();
  runner.join();
  ASSERT_TRUE(first.is_ok()) << first.to_string();
  for (const Status& s : {second, set}) {
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_TRUE(contains(s.message(), "in use by another thread")) << s.message();
  }
  EXPECT_EQ(exe->output_f32("y"), std::vector<float>(64, 3.0f));
  // Once the first run is over the executable serves calls again.
  ASSERT_TRUE(exe->run().is_ok());
  EXPECT_EQ(exe->output_f32("y"), std::vector<float>(64, 3.0f));
}

TEST(Executable, RuntimeDestroyedRightAfterAnErrorShutsDownCleanly) {
  for (ExecutionMode m : kAllModes) {
    for (bool hang : {false, true}) {
      // A short watchdog only where the launch hangs: a failing launch must end by its error even
      // when the failing core's thread waits long for its CPU.
      auto rt = make_runtime(3, /*watchdog_seconds=*/hang ? 0.2 : 60.0);
      Graph g;
      Tensor x = g.input("x", DType::kF32, {256});
      Tensor t;
      {
        SuperKernelScope scope(g, "s");
        std::vector<uint8_t> attrs(4);
        const int32_t fail_core = 2;
        std::memcpy(attrs.data(), &fail_core, sizeof(fail_core));
        t = hang ? call_kernel(g, "test.hang.f32", {add1(g, x)}, {{DType::kF32, {256}, ""}}, {}, "bad")[0]
                 : call_kernel(g, "test.fail.f32", {add1(g, x)}, {{DType::kF32, {256}, ""}}, attrs, "bad")[0];
        t = add1(g, t);
      }
      g.output(t, "y");
      auto exe = compile_ok(*rt, g, m);
      ASSERT_TRUE(exe->set_input("x", std::vector<float>(256, 0.0f)).is_ok());
      Status s = exe->run();
      ASSERT_FALSE(s.is_ok());
      EXPECT_EQ(s.code(), hang ? StatusCode::kDeadlock : StatusCode::kKernelError) << s.to_string();
      // The runtime handle goes first; the executable keeps the device alive until it goes too.
      rt.reset();
      exe.reset();
    }
  }
}

}  // namespace
}  // namespace sk
