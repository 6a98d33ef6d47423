// The general tensor ops (include/superkernel/tensor_ops.h) through the graph: the builders' shape
// and dtype rules and their errors (naming the op and operand), expand views (strides, the
// aliasing rule with stride-0 views, no writes into them), and graphs of tensor ops over
// transposed, sliced and expanded views run in every mode: bit-identical in eager, graph and
// superkernel mode (interpreter and JIT) on 1 to 3 cores, under the access checker, fused into one
// super kernel, and equal to values computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/test_runtime.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"
#include "superkernel/tensor_ops.h"
#include "util/half.h"

namespace sk {
namespace {

::testing::AssertionResult FailsWith(const Status& s, const std::vector<std::string>& parts) {
  if (s.is_ok()) return ::testing::AssertionFailure() << "expected an error, got OK";
  for (const std::string& p : parts)
    if (s.message().find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "message lacks '" << p << "': " << s.to_string();
  return ::testing::AssertionSuccess();
}

// ---- expand views ------------------------------------------------------------------------------

TEST(ExpandView, RepeatsSizeOneDimsWithStrideZero) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {3, 1});
  Tensor e = g.expand(x, {2, 3, 4});
  EXPECT_EQ(g.tensor(e).shape, (Shape{2, 3, 4}));
  EXPECT_EQ(g.tensor(e).strides, (Shape{0, 1, 0}));
  EXPECT_EQ(g.tensor(e).base, x.id);
  EXPECT_EQ(g.tensor(e).kind, TensorKind::kView);
  // -1 keeps a dim; an expand of a slice keeps the slice's offset and strides.
  Tensor v = g.variable("v", DType::kF32, {4, 6});
  Tensor row = g.slice(v, 0, 2, 3);
  Tensor rows = g.expand(row, {5, -1});
  EXPECT_EQ(g.tensor(rows).shape, (Shape{5, 6}));
  EXPECT_EQ(g.tensor(rows).strides, (Shape{0, 1}));
  EXPECT_EQ(g.tensor(rows).byte_offset, 2 * 6 * 4);
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
}

TEST(ExpandView, RejectsWhatTorchRejects) {
  {
    Graph g;
    g.expand(g.input("x", DType::kF32, {3, 2}), {3, 4}, "e");
    EXPECT_TRUE(FailsWith(g.verify(), {"expand 'e'", "'x' [3, 2]", "dim 1 has size 2"}));
  }
  {
    Graph g;
    g.expand(g.input("x", DType::kF32, {3, 2}), {2}, "e");
    EXPECT_TRUE(FailsWith(g.verify(), {"expand 'e'", "fewer dims"}));
  }
  {
    Graph g;
    g.expand(g.input("x", DType::kF32, {2}), {-1, 2}, "e");
    EXPECT_TRUE(FailsWith(g.verify(), {"expand 'e'", "dim 0 is new"}));
  }
}

TEST(ExpandView, ReshapeNeedsACopyFirst) {
  Graph g;
  Tensor e = g.expand(g.input("x", DType::kF32, {1, 4}), {3, 4});
  g.reshape(e, {12}, "flat");
  EXPECT_TRUE(FailsWith(g.verify(), {"reshape 'flat'", "not dense"}));
  Graph ok;
  Tensor c = copy(ok, ok.expand(ok.input("x", DType::kF32, {1, 4}), {3, 4}));
  ok.output(ok.reshape(c, {12}), "y");
  EXPECT_TRUE(ok.verify().is_ok()) << ok.verify().to_string();
}

TEST(ExpandView, NoOpWritesAnExpandedView) {
  Graph g;
  Tensor v = g.variable("v", DType::kF32, {1, 8});
  OpSpec spec;
  spec.kind = OpKind::kCopy;
  spec.name = "fill";
  spec.inputs = {g.input("x", DType::kF32, {4, 8})};
  spec.write_into = {g.expand(v, {4, 8}, "v4")};
  g.add_op(spec);
  EXPECT_TRUE(FailsWith(g.verify(), {"op 'fill'", "'v4'", "expanded view", "stride 0"}));
}

// The aliasing rule is exact for stride-0 views: a row read four times by an expand view shares
// no byte with the other rows of its variable, and overlaps itself.
TEST(ExpandView, AliasingRuleSeesWhatAStrideZeroViewReads) {
  for (bool overlap : {false, true}) {
    Graph g;
    Tensor v = g.variable("v", DType::kF32, {5, 8});
    OpSpec spec;
    spec.kind = OpKind::kCopy;
    spec.name = "spread";
    spec.inputs = {g.expand(g.slice(v, 0, 0, 1), {4, 8}, "row0")};
    spec.write_into = {overlap ? g.slice(v, 0, 0, 4, "rows0to3") : g.slice(v, 0, 1, 5, "rows1to4")};
    g.add_op(spec);
    if (overlap) {
      EXPECT_TRUE(FailsWith(g.verify(), {"op 'spread'", "'rows0to3'", "overlaps", "'row0'"}));
    } else {
      EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
    }
  }
}

// ---- builders: inference and errors ------------------------------------------------------------

TEST(TensorOpsBuilders, BinaryBroadcastsAndPromotesLikeTorch) {
  Graph g;
  Tensor a = g.input("a", DType::kF32, {4, 1, 3});
  Tensor b = g.input("b", DType::kF32, {5, 3});
  Tensor s = binary(g, a, b, BinaryOp::kAdd);
  EXPECT_EQ(g.tensor(s).shape, (Shape{4, 5, 3}));
  EXPECT_EQ(g.op(g.num_ops() - 1).kernel, "tensor.binary");
  EXPECT_EQ(g.tensor(binary(g, a, b, BinaryOp::kLt)).dtype, DType::kBool);
  Tensor i = g.input("i", DType::kI32, {3});
  EXPECT_EQ(g.tensor(binary(g, i, i, BinaryOp::kDiv)).dtype, DType::kF32);
  EXPECT_EQ(g.tensor(binary(g, i, i, BinaryOp::kMul)).dtype, DType::kI32);
  Tensor h = g.input("h", DType::kBF16, {2, 3});
  Tensor f0 = g.input("f0", DType::kF32, {});
  EXPECT_EQ(g.tensor(binary(g, h, f0, BinaryOp::kMul)).dtype, DType::kBF16);  // same category: tensor wins
  EXPECT_EQ(g.tensor(binary(g, i, f0, BinaryOp::kAdd)).dtype, DType::kF32);   // higher category: scalar wins
  Tensor bo = g.input("bo", DType::kBool, {3});
  EXPECT_EQ(g.tensor(binary(g, bo, g.input("one", DType::kI64, {1}), BinaryOp::kAdd)).dtype, DType::kI64);
  EXPECT_EQ(g.tensor(binary(g, bo, bo, BinaryOp::kLogicalAnd)).dtype, DType::kBool);
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
}

TEST(TensorOpsBuilders, BinaryErrorsNameTheOpAndOperands) {
  {
    Graph g;
    binary(g, g.input("a", DType::kF32, {4, 3}), g.input("b", DType::kF32, {2, 3}), BinaryOp::kAdd, "bad");
    EXPECT_TRUE(FailsWith(g.verify(),
                          {"op 'bad' (tensor.binary)", "operand 0", "'a'", "operand 1", "'b'", "do not broadcast"}));
  }
  {
    Graph g;
    binary(g, g.input("a", DType::kF32, {3}), g.input("b", DType::kBF16, {3}), BinaryOp::kMul, "mixed");
    EXPECT_TRUE(FailsWith(g.verify(), {"op 'mixed'", "different dtypes", "bf16[3]"}));
  }
  {
    Graph g;
    Tensor b = g.input("b", DType::kBool, {3});
    binary(g, b, b, BinaryOp::kSub, "bools");
    EXPECT_TRUE(FailsWith(g.verify(), {"op 'bools'", "sub of bool"}));
  }
  {
    Graph g;
    binary(g, g.input("a", DType::kF32, {3}), Tensor{}, BinaryOp::kAdd, "missing");
    EXPECT_TRUE(FailsWith(g.verify(), {"op 'missing'", "operand 1"}));
  }
}

TEST(TensorOpsBuilders, UnaryAndScalarDtypeRules) {
  Graph g;
  Tensor i = g.input("i", DType::kI32, {4});
  EXPECT_EQ(g.tensor(unary(g, i, UnaryOp::kExp)).dtype, DType::kF32);
  EXPECT_EQ(g.tensor(unary(g, i, UnaryOp::kNeg)).dtype, DType::kI32);
  EXPECT_EQ(g.tensor(unary(g, i, UnaryOp::kLogicalNot)).dtype, DType::kBool);
  EXPECT_EQ(g.tensor(binary_scalar(g, i, 2.0, BinaryOp::kDiv)).dtype, DType::kF32);
  EXPECT_EQ(g.tensor(binary_scalar(g, i, 2.5, BinaryOp::kLt)).dtype, DType::kBool);
  EXPECT_EQ(g.tensor(binary_scalar(g, i, 3.0, BinaryOp::kPow)).dtype, DType::kI32);
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  {
    Graph e;
    binary_scalar(e, e.input("i", DType::kI32, {4}), 2.5, BinaryOp::kMul, false, "half");
    EXPECT_TRUE(FailsWith(e.verify(), {"op 'half' (tensor.binary_scalar)", "not an integer", "cast"}));
  }
  {
    Graph e;
    binary_scalar(e, e.input("i", DType::kI64, {4}), -1.0, BinaryOp::kPow, false, "inv");
    EXPECT_TRUE(FailsWith(e.verify(), {"op 'inv'", "negative power"}));
  }
  {
    Graph e;
    unary(e, e.input("b", DType::kBool, {4}), UnaryOp::kNeg, "negb");
    EXPECT_TRUE(FailsWith(e.verify(), {"op 'negb' (tensor.unary)", "neg", "bool"}));
  }
  {
    Graph e;
    where(e, e.input("c", DType::kF32, {4}), e.input("a", DType::kF32, {4}), e.input("b", DType::kF32, {4}), "w");
    EXPECT_TRUE(FailsWith(e.verify(), {"op 'w' (tensor.where)", "operand 0", "'c'", "must be bool"}));
  }
}

TEST(TensorOpsBuilders, ReduceShapesAndErrors) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {2, 3, 4});
  EXPECT_EQ(g.tensor(reduce(g, x, ReduceOp::kSum, {-1}, false)).shape, (Shape{2, 3}));
  EXPECT_EQ(g.tensor(reduce(g, x, ReduceOp::kMean, {0, 2}, true)).shape, (Shape{1, 3, 1}));
  EXPECT_EQ(g.tensor(reduce(g, x, ReduceOp::kMax, {}, false)).shape, Shape{});
  Tensor am = reduce(g, x, ReduceOp::kArgmax, {1}, false);
  EXPECT_EQ(g.tensor(am).shape, (Shape{2, 4}));
  EXPECT_EQ(g.tensor(am).dtype, DType::kI64);
  EXPECT_EQ(g.tensor(reduce(g, g.input("i", DType::kI32, {5}), ReduceOp::kSum, {}, false)).dtype, DType::kI64);
  EXPECT_EQ(g.tensor(cumsum(g, g.input("j", DType::kI32, {5}), 0)).dtype, DType::kI64);
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  const auto fails = [](auto&& build, std::vector<std::string> parts) {
    Graph e;
    build(e);
    EXPECT_TRUE(FailsWith(e.verify(), parts));
  };
  fails([](Graph& e) { reduce(e, e.input("x", DType::kI32, {3}), ReduceOp::kMean, {0}, false, "m"); },
        {"op 'm' (tensor.reduce)", "mean", "float"});
  fails(
      [](Graph& e) {
        reduce(e, e.input("x", DType::kF32, {3, 2}), ReduceOp::kArgmax, {0, 1}, false, "a");
      },
      {"op 'a'", "one dim"});
  fails(
      [](Graph& e) {
        reduce(e, e.input("x", DType::kF32, {3, 2}), ReduceOp::kSum, {1, -1}, false, "d");
      },
      {"op 'd'", "listed twice"});
  fails(
      [](Graph& e) {
        reduce(e, e.input("x", DType::kF32, {3, 2}), ReduceOp::kSum, {2}, false, "r");
      },
      {"op 'r'", "dim 2 is out of range for rank 2"});
  fails(
      [](Graph& e) {
        reduce(e, e.input("x", DType::kF32, {3, 0}), ReduceOp::kMax, {1}, false, "z");
      },
      {"op 'z'", "empty reduction"});
}

TEST(TensorOpsBuilders, IndexingShapesAndErrors) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {6, 5, 4});
  Tensor idx = g.input("idx", DType::kI64, {3});
  EXPECT_EQ(g.tensor(index_select(g, x, -2, idx)).shape, (Shape{6, 3, 4}));
  EXPECT_EQ(g.tensor(gather(g, x, 1, g.input("gi", DType::kI32, {2, 7, 4}))).shape, (Shape{2, 7, 4}));
  TopK t = topk(g, x, 2, 1, false);
  EXPECT_EQ(g.tensor(t.values).shape, (Shape{6, 2, 4}));
  EXPECT_EQ(g.tensor(t.indices).dtype, DType::kI64);
  Tensor cache = g.variable("cache", DType::kF32, {1, 2, 16, 8});
  index_copy(g, cache, 2, idx, g.input("kv", DType::kF32, {1, 2, 3, 8}));
  EXPECT_EQ(g.op(g.num_ops() - 1).outputs[0], cache.id);
  Tensor table = g.variable("table", DType::kF32, {10, 4});
  EXPECT_EQ(index_put(g, table, {g.input("rows", DType::kI32, {5})}, g.input("vals", DType::kF32, {4}), true).id,
            table.id);
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();

  const auto fails = [](auto&& build, std::vector<std::string> parts) {
    Graph e;
    build(e);
    EXPECT_TRUE(FailsWith(e.verify(), parts));
  };
  fails([](Graph& e) { index_select(e, e.input("x", DType::kF32, {4}), 0, e.input("i", DType::kF32, {2}), "s"); },
        {"op 's' (tensor.index_select)", "operand 1", "'i'", "i32 or i64"});
  fails(
      [](Graph& e) {
        gather(e, e.input("x", DType::kF32, {4, 2}), 0, e.input("i", DType::kI64, {2, 3}), "g");
      },
      {"op 'g' (tensor.gather)", "dim 1", "exceeds"});
  fails(
      [](Graph& e) {
        index_copy(e, e.variable("c", DType::kF32, {8, 4}), 0, e.input("i", DType::kI64, {2}),
                   e.input("s", DType::kF32, {3, 4}), "ic");
      },
      {"op 'ic' (tensor.index_copy)", "operand 2", "'s'", "f32[2, 4]"});
  fails(
      [](Graph& e) {
        index_copy(e, e.input("c", DType::kF32, {8, 4}), 0, e.input("i", DType::kI64, {2}),
                   e.input("s", DType::kF32, {2, 4}), "into_input");
      },
      {"op 'into_input'", "writes input 'c'"});
  fails(
      [](Graph& e) {
        topk(e, e.input("x", DType::kF32, {4, 3}), 5, -1, true, true, "t");
      },
      {"op 't' (tensor.topk)", "k = 5", "[0, 3]"});
  fails(
      [](Graph& e) {
        index_put(e, e.variable("d", DType::kF32, {4, 3}), {e.input("i", DType::kI32, {2})},
                  e.input("v", DType::kF32, {2, 5}), false, "ip");
      },
      {"op 'ip' (tensor.index_put)", "operand 1", "'v'", "does not broadcast to [2, 3]"});
}

TEST(TensorOpsBuilders, CatCopiesIntoSlicesOfOneTensor) {
  Graph g;
  Tensor a = g.input("a", DType::kF32, {2, 3});
  Tensor b = g.input("b", DType::kF32, {2, 5});
  Tensor c = cat(g, {a, b}, -1, "joined");
  EXPECT_EQ(g.tensor(c).shape, (Shape{2, 8}));
  EXPECT_EQ(g.num_ops(), 2u);
  EXPECT_EQ(g.op(0).kernel, "copy");
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  Graph e;
  cat(e, {e.input("a", DType::kF32, {2, 3}), e.input("b", DType::kF32, {3, 3})}, 1, "bad_cat");
  EXPECT_TRUE(FailsWith(e.verify(), {"op 'bad_cat'", "operand 1", "'b'", "outside dim 1"}));
}

TEST(TensorOpsBuilders, BatchedMmBroadcastsAndUsesTheWeightKernelForTransposedWeights) {
  Graph g;
  Tensor a = g.input("a", DType::kF32, {3, 1, 5, 16});
  Tensor b = g.input("b", DType::kF32, {4, 16, 7});
  Tensor y = batched_mm(g, a, b);
  EXPECT_EQ(g.tensor(y).shape, (Shape{3, 4, 5, 7}));
  EXPECT_EQ(g.op(g.num_ops() - 1).kernel, "tensor.batched_mm");
  std::vector<float> w(7 * 16, 0.5f);
  Tensor wt = g.transpose(g.constant_f32("w", {7, 16}, w), {1, 0});  // x @ w.t()
  Tensor z = batched_mm(g, a, wt, "proj");
  EXPECT_EQ(g.tensor(z).shape, (Shape{3, 1, 5, 7}));
  EXPECT_EQ(g.op(g.num_ops() - 1).kernel, "matmul.f32");
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  Graph e;
  batched_mm(e, e.input("a", DType::kF32, {5, 16}), e.input("b", DType::kF32, {15, 7}), "mm");
  EXPECT_TRUE(FailsWith(e.verify(), {"op 'mm' (tensor.batched_mm)", "K differs", "f32[15, 7]"}));
}

TEST(TensorOpsBuilders, SdpaChecksHeadsMaskAndCausal) {
  Graph g;
  Tensor q = g.input("q", DType::kF32, {1, 4, 3, 8});
  Tensor k = g.input("k", DType::kF32, {1, 2, 6, 8});
  Tensor v = g.input("v", DType::kF32, {1, 2, 6, 5});
  Tensor mask = g.input("mask", DType::kBool, {3, 6});
  Tensor o = sdpa(g, q, k, v, mask);
  EXPECT_EQ(g.tensor(o).shape, (Shape{1, 4, 3, 5}));
  // The mask reaches the kernel as a [B, H, Lq, Lk] expand view of itself.
  const OpInfo& op = g.op(g.num_ops() - 1);
  const TensorInfo& m = g.tensor(op.inputs[3]);
  EXPECT_EQ(m.shape, (Shape{1, 4, 3, 6}));
  EXPECT_EQ(m.strides, (Shape{0, 0, 6, 1}));
  EXPECT_EQ(m.base, mask.id);
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  const auto fails = [](auto&& build, std::vector<std::string> parts) {
    Graph e;
    build(e);
    EXPECT_TRUE(FailsWith(e.verify(), parts));
  };
  fails(
      [](Graph& e) {
        sdpa(e, e.input("q", DType::kF32, {1, 3, 2, 8}), e.input("k", DType::kF32, {1, 2, 4, 8}),
             e.input("v", DType::kF32, {1, 2, 4, 8}), {}, false, 0.0, "gqa");
      },
      {"op 'gqa' (tensor.sdpa)", "not a multiple of the kv heads"});
  fails(
      [](Graph& e) {
        sdpa(e, e.input("q", DType::kF32, {1, 2, 2, 8}), e.input("k", DType::kF32, {1, 2, 4, 8}),
             e.input("v", DType::kF32, {1, 2, 4, 8}), e.input("m", DType::kBool, {2, 4}), true, 0.0, "both");
      },
      {"op 'both'", "exclude each other"});
  fails(
      [](Graph& e) {
        sdpa(e, e.input("q", DType::kF32, {1, 2, 2, 8}), e.input("k", DType::kF32, {1, 2, 4, 8}),
             e.input("v", DType::kF32, {1, 2, 4, 8}), e.input("m", DType::kBool, {3, 4}), false, 0.0, "mask");
      },
      {"op 'mask'", "operand 3", "'m'", "does not broadcast to [B, H, Lq, Lk] = [1, 2, 2, 4]"});
}

// ---- graphs in every mode ----------------------------------------------------------------------

using testing::RunResult;

struct ModeRun {
  std::string where;
  RunResult result;
};

// Compiles `g` in eager, graph and superkernel mode (interpreter and JIT) on 1, 2 and 3 cores,
// and superkernel mode under the access checker, and lets `drive` set the inputs and run it;
// expects every result to be bit-identical and superkernel mode to fuse every op into one
// segment. Returns the first run's outputs.
RunResult run_everywhere(const Graph& g, const std::function<void(Executable&)>& drive) {
  std::vector<ModeRun> all;
  for (int cores : {1, 2, 3}) {
    auto rt = testing::make_runtime(cores);
    struct M {
      ExecutionMode mode;
      bool jit;
      bool check;
    };
    for (M m : {M{ExecutionMode::kEager, false, false}, M{ExecutionMode::kGraph, false, false},
                M{ExecutionMode::kSuperKernel, false, false}, M{ExecutionMode::kSuperKernel, true, false},
                M{ExecutionMode::kSuperKernel, false, true}}) {
      CompileOptions o = CompileOptions::for_mode(m.mode);
      o.super_kernel_optimize_options.jit = m.jit;
      o.super_kernel_debug_options.debug_cross_core_sync_check = m.check;
      const std::string where = std::string(execution_mode_name(m.mode)) + (m.jit ? "+jit" : "") +
                                (m.check ? "+access-check" : "") + " on " + std::to_string(cores) + " cores";
      SCOPED_TRACE(where);
      auto exe = rt->compile(g, o);
      if (!exe) {
        ADD_FAILURE() << exe.status().to_string();
        return {};
      }
      if (m.mode == ExecutionMode::kSuperKernel) {
        const CompileReport& rep = (*exe)->report();
        EXPECT_EQ(rep.segments.size(), 1u) << rep.program_text;
        EXPECT_TRUE(rep.unfused.empty());
      }
      drive(**exe);
      if (::testing::Test::HasFatalFailure()) return {};
      all.push_back({where, testing::collect_outputs(**exe)});
    }
  }
  for (size_t i = 1; i < all.size(); ++i) {
    std::string why;
    EXPECT_TRUE(testing::bitwise_equal(all[i].result, all[0].result, &why))
        << all[i].where << " vs " << all[0].where << ": " << why;
  }
  return all.empty() ? RunResult{} : all[0].result;
}

std::vector<float> floats_of(const RunResult& r, const std::string& name) {
  for (size_t i = 0; i < r.names.size(); ++i) {
    if (r.names[i] != name) continue;
    std::vector<float> v(r.bytes[i].size() / 4);
    std::memcpy(v.data(), r.bytes[i].data(), r.bytes[i].size());
    return v;
  }
  ADD_FAILURE() << "no output '" << name << "'";
  return {};
}

template <class T>
std::vector<T> values_of(const RunResult& r, const std::string& name) {
  for (size_t i = 0; i < r.names.size(); ++i) {
    if (r.names[i] != name) continue;
    std::vector<T> v(r.bytes[i].size() / sizeof(T));
    std::memcpy(v.data(), r.bytes[i].data(), r.bytes[i].size());
    return v;
  }
  ADD_FAILURE() << "no output '" << name << "'";
  return {};
}

// tensor.cast between f16 and f32 gives util/half.h's bits for every half and for f32 values
// around each rounding boundary, NaNs and infinities included, on the vector path (contiguous,
// lengths not a multiple of 8) and the strided one, in every mode.
TEST(TensorOpsGraph, HalfCastsGiveTheScalarConversionsBits) {
  constexpr int64_t kHalves = 65536 + 3;  // a tail after the vector body
  std::vector<uint16_t> halves(kHalves);
  for (int64_t i = 0; i < kHalves; ++i) halves[static_cast<size_t>(i)] = static_cast<uint16_t>(i * 40503 % 65536);
  std::vector<float> floats;
  for (uint32_t h = 0; h < 0x10000u; h += 7) {  // each half, just below / above its midpoints
    uint32_t bits;
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    std::memcpy(&bits, &f, 4);
    for (uint32_t d : {0u, 0xfffu, 0x1000u, 0x1001u}) {
      const uint32_t b = bits + d;
      float v;
      std::memcpy(&v, &b, 4);
      floats.push_back(v);
    }
  }
  for (float v : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::infinity(), 65520.0f, 65519.99f, 1e-8f, -3e-8f, 0.0f, -0.0f})
    floats.push_back(v);
  if (floats.size() % 2 != 0) floats.push_back(1.0f);
  const auto n_floats = static_cast<int64_t>(floats.size());
  Graph g("half_casts");
  Tensor h = g.input("h", DType::kF16, {kHalves});
  Tensor f = g.input("f", DType::kF32, {n_floats});
  g.output(cast(g, h, DType::kF32, "widen"), "widened");
  g.output(cast(g, f, DType::kF16, "narrow"), "narrowed");
  // Every other element: the strided path.
  Tensor every_other = g.slice(g.reshape(f, {n_floats / 2, 2}), 1, 0, 1);
  g.output(cast(g, every_other, DType::kF16, "narrow_strided"), "narrowed_strided");
  const RunResult r = run_everywhere(g, [&](Executable& e) {
    ASSERT_TRUE(e.set_input("h", halves.data(), halves.size() * 2).is_ok());
    ASSERT_TRUE(e.set_input("f", floats.data(), floats.size() * 4).is_ok());
    ASSERT_TRUE(e.run().is_ok());
  });
  const std::vector<uint32_t> widened = values_of<uint32_t>(r, "widened");
  const std::vector<uint16_t> narrowed = values_of<uint16_t>(r, "narrowed");
  const std::vector<uint16_t> strided = values_of<uint16_t>(r, "narrowed_strided");
  ASSERT_EQ(widened.size(), halves.size());
  ASSERT_EQ(narrowed.size(), floats.size());
  for (size_t i = 0; i < halves.size(); ++i) {
    const float want = f16_to_f32(halves[i]);
    uint32_t want_bits;
    std::memcpy(&want_bits, &want, 4);
    ASSERT_EQ(widened[i], want_bits) << "half " << halves[i];
  }
  for (size_t i = 0; i < floats.size(); ++i) ASSERT_EQ(narrowed[i], f32_to_f16(floats[i])) << "float " << floats[i];
  for (size_t i = 0; i < strided.size(); ++i) ASSERT_EQ(strided[i], f32_to_f16(floats[2 * i])) << i;
}

// Element-wise ops over broadcast, expanded and transposed operands, a norm built from reductions,
// and a where: one super kernel, the same bits everywhere, torch's broadcasting semantics.
TEST(TensorOpsGraph, ElementwiseOverViewsFusesAndMatches) {
  constexpr int64_t kRows = 6;
  constexpr int64_t kCols = 40;
  Graph g("views");
  Tensor x = g.input("x", DType::kF32, {kCols, kRows});      // used transposed: [rows, cols]
  Tensor bias = g.input("bias", DType::kF32, {1, kCols});    // expanded over rows
  Tensor scale = g.input("scale", DType::kF32, {kRows, 1});  // broadcast over cols by the op
  auto scope = std::make_unique<SuperKernelScope>(g, "block");
  Tensor xt = g.transpose(x, {1, 0});
  Tensor h = binary(g, xt, g.expand(bias, {kRows, kCols}), BinaryOp::kAdd, "add_bias");
  h = binary(g, h, scale, BinaryOp::kMul, "scale");
  // rms norm from reductions: h * rsqrt(mean(h^2) + eps)
  Tensor ms = reduce(g, binary_scalar(g, h, 2.0, BinaryOp::kPow), ReduceOp::kMean, {-1}, true, "mean_sq");
  Tensor inv = unary(g, binary_scalar(g, ms, 1e-6, BinaryOp::kAdd), UnaryOp::kRsqrt, "inv_rms");
  Tensor n = binary(g, h, inv, BinaryOp::kMul, "normed");
  Tensor pos = binary_scalar(g, n, 0.0, BinaryOp::kGt, false, "positive");
  Tensor y = where(g, pos, unary(g, n, UnaryOp::kSilu), g.expand(scale, {kRows, kCols}), "select");
  g.output(y, "y");
  g.output(reduce(g, y, ReduceOp::kArgmax, {1}, false, "best"), "best");
  scope.reset();
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().to_string();

  const std::vector<float> xv = testing::random_floats(kCols * kRows, 1);
  const std::vector<float> bv = testing::random_floats(kCols, 2);
  const std::vector<float> sv = testing::random_floats(kRows, 3, 0.5f, 2.0f);
  const RunResult r = run_everywhere(g, [&](Executable& e) {
    ASSERT_TRUE(e.set_input("x", xv).is_ok());
    ASSERT_TRUE(e.set_input("bias", bv).is_ok());
    ASSERT_TRUE(e.set_input("scale", sv).is_ok());
    const Status s = e.run();
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  });
  const std::vector<float> got = floats_of(r, "y");
  const std::vector<int64_t> best = values_of<int64_t>(r, "best");
  ASSERT_EQ(got.size(), static_cast<size_t>(kRows * kCols));
  ASSERT_EQ(best.size(), static_cast<size_t>(kRows));
  for (int64_t i = 0; i < kRows; ++i) {
    double hv[kCols];
    double sq = 0.0;
    for (int64_t j = 0; j < kCols; ++j) {
      hv[j] = (static_cast<double>(xv[j * kRows + i]) + bv[j]) * sv[i];
      sq += hv[j] * hv[j];
    }
    const double inv_rms = 1.0 / std::sqrt(sq / kCols + 1e-6);
    int64_t arg = 0;
    for (int64_t j = 0; j < kCols; ++j) {
      const double nv = hv[j] * inv_rms;
      const double want = nv > 0 ? nv / (1.0 + std::exp(-nv)) : sv[i];
      EXPECT_NEAR(got[i * kCols + j], want, 1e-5 + 1e-5 * std::fabs(want)) << i << ", " << j;
      if (got[i * kCols + j] > got[i * kCols + arg]) arg = j;
    }
    EXPECT_EQ(best[i], arg) << "row " << i;
  }
}

// A decode step's attention from tensor ops: the projection as x @ w.t() (matmul.f32), the new key
// and value written into static caches with index_copy (variables that keep their contents across
// runs), sdpa over the caches with GQA and a bool mask broadcast from [Lk], top-k and cat.
TEST(TensorOpsGraph, StaticCacheAttentionAcrossRuns) {
  constexpr int64_t kHeads = 4;
  constexpr int64_t kKvHeads = 2;
  constexpr int64_t kDim = 8;
  constexpr int64_t kSlots = 6;
  Graph g("decode");
  Tensor x = g.input("x", DType::kF32, {1, kHeads * kDim});
  Tensor kv_new = g.input("kv_new", DType::kF32, {2, 1, kKvHeads, 1, kDim});  // [k | v]
  Tensor position = g.input("position", DType::kI64, {1});
  Tensor allowed = g.input("allowed", DType::kBool, {kSlots});
  Tensor k_cache = g.variable("k_cache", DType::kF32, {1, kKvHeads, kSlots, kDim});
  Tensor v_cache = g.variable("v_cache", DType::kF32, {1, kKvHeads, kSlots, kDim});
  std::vector<float> wv = testing::random_floats(kHeads * kDim * kHeads * kDim, 7, -0.2f, 0.2f);
  Tensor w = g.constant_f32("wq", {kHeads * kDim, kHeads * kDim}, wv);
  auto scope = std::make_unique<SuperKernelScope>(g, "attention");
  Tensor q = batched_mm(g, x, g.transpose(w, {1, 0}), "q_proj");
  q = g.transpose(g.reshape(q, {1, 1, kHeads, kDim}), {0, 2, 1, 3});  // [1, H, 1, D]
  index_copy(g, k_cache, 2, position, g.reshape(g.slice(kv_new, 0, 0, 1), {1, kKvHeads, 1, kDim}), "k_update");
  index_copy(g, v_cache, 2, position, g.reshape(g.slice(kv_new, 0, 1, 2), {1, kKvHeads, 1, kDim}), "v_update");
  Tensor o = sdpa(g, q, k_cache, v_cache, allowed, false, 0.0, "attn");
  Tensor flat = g.reshape(o, {1, kHeads * kDim});
  TopK best = topk(g, flat, 3, -1, true, true, "top3");
  g.output(cat(g, {flat, best.values}, 1, "joined"), "joined");
  g.output(best.indices, "top_idx");
  scope.reset();
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().to_string();

  // Three decode steps: positions 0, 1, 2 with the mask allowing the filled slots.
  const std::vector<float> xv = testing::random_floats(kHeads * kDim, 11);
  std::vector<std::vector<float>> kvs;
  for (int step = 0; step < 3; ++step) kvs.push_back(testing::random_floats(2 * kKvHeads * kDim, 20 + step));
  const RunResult last = run_everywhere(g, [&](Executable& e) {
    ASSERT_TRUE(e.set_input("x", xv).is_ok());
    for (int step = 0; step < 3; ++step) {
      const int64_t p = step;
      bool mask[kSlots] = {};
      for (int s = 0; s <= step; ++s) mask[s] = true;
      ASSERT_TRUE(e.set_input("kv_new", kvs[static_cast<size_t>(step)]).is_ok());
      ASSERT_TRUE(e.set_input("position", &p, sizeof p).is_ok());
      ASSERT_TRUE(e.set_input("allowed", mask, sizeof mask).is_ok());
      const Status s = e.run();
      ASSERT_TRUE(s.is_ok()) << s.to_string();
    }
  });
  // Reference of the last step: caches hold steps 0..2 at slots 0..2.
  std::vector<double> qv(kHeads * kDim, 0.0);
  for (int64_t n = 0; n < kHeads * kDim; ++n)
    for (int64_t c = 0; c < kHeads * kDim; ++c) qv[n] += static_cast<double>(xv[c]) * wv[n * kHeads * kDim + c];
  const std::vector<float> joined = floats_of(last, "joined");
  ASSERT_EQ(joined.size(), static_cast<size_t>(kHeads * kDim + 3));
  for (int64_t h = 0; h < kHeads; ++h) {
    const int64_t kvh = h / (kHeads / kKvHeads);
    double s[3];
    double m = -1e300;
    for (int j = 0; j < 3; ++j) {
      s[j] = 0.0;
      for (int64_t d = 0; d < kDim; ++d) s[j] += qv[h * kDim + d] * kvs[j][kvh * kDim + d];
      s[j] /= std::sqrt(static_cast<double>(kDim));
      m = std::max(m, s[j]);
    }
    double den = 0.0;
    for (double& e : s) den += (e = std::exp(e - m));
    for (int64_t d = 0; d < kDim; ++d) {
      double num = 0.0;
      for (int j = 0; j < 3; ++j) num += s[j] * kvs[j][kKvHeads * kDim + kvh * kDim + d];
      EXPECT_NEAR(joined[h * kDim + d], num / den, 1e-5) << "head " << h << " dim " << d;
    }
  }
  // The top 3 of the attention output, best first, as cat put them after it.
  const std::vector<int64_t> idx = values_of<int64_t>(last, "top_idx");
  ASSERT_EQ(idx.size(), 3u);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(joined[kHeads * kDim + j], joined[idx[j]]);
  EXPECT_GE(joined[idx[0]], joined[idx[1]]);
  EXPECT_GE(joined[idx[1]], joined[idx[2]]);
}

// A decode step over a static cache: the float mask (0 for the written positions, -inf for the
// rest, as transformers builds it) excludes the unwritten positions whatever they hold, so the
// kernel need not read them. The same bits with NaN there as with zeros (a -inf entry used to be
// added to the score, and NaN + -inf made the row NaN), and the same as the written keys alone.
TEST(TensorOpsGraph, SdpaMaskedStaticCacheIgnoresUnwrittenPositions) {
  constexpr int64_t kSlots = 40;
  constexpr int64_t kWritten = 11;
  constexpr int64_t kDim = 16;
  const auto build = [](Graph& g, int64_t slots) {
    Tensor q = g.input("q", DType::kF32, {1, 4, 1, kDim});
    Tensor k = g.input("k", DType::kF32, {1, 2, slots, kDim});
    Tensor v = g.input("v", DType::kF32, {1, 2, slots, kDim});
    Tensor mask = g.input("mask", DType::kF32, {1, 4, 1, slots});
    g.output(sdpa(g, q, k, v, mask, false, 0.0, "attn"), "out");
    ASSERT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  };
  const std::vector<float> qv = testing::random_floats(4 * kDim, 3);
  const std::vector<float> kw = testing::random_floats(2 * kWritten * kDim, 4);
  const std::vector<float> vw = testing::random_floats(2 * kWritten * kDim, 5);
  // [1, 2, slots, D] caches holding the written rows, `fill` elsewhere.
  const auto cache = [](const std::vector<float>& rows, int64_t slots, float fill) {
    std::vector<float> c(static_cast<size_t>(2 * slots * kDim), fill);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t j = 0; j < kWritten; ++j)
        for (int64_t d = 0; d < kDim; ++d) c[(h * slots + j) * kDim + d] = rows[(h * kWritten + j) * kDim + d];
    return c;
  };
  const auto mask_of = [](int64_t slots) {
    std::vector<float> m(static_cast<size_t>(4 * slots), -std::numeric_limits<float>::infinity());
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t j = 0; j < kWritten; ++j) m[h * slots + j] = 0.0f;
    return m;
  };
  const auto run = [&](int64_t slots, float fill) {
    Graph g("decode_attention");
    build(g, slots);
    const RunResult r = run_everywhere(g, [&](Executable& e) {
      ASSERT_TRUE(e.set_input("q", qv).is_ok());
      ASSERT_TRUE(e.set_input("k", cache(kw, slots, fill)).is_ok());
      ASSERT_TRUE(e.set_input("v", cache(vw, slots, fill)).is_ok());
      ASSERT_TRUE(e.set_input("mask", mask_of(slots)).is_ok());
      const Status s = e.run();
      ASSERT_TRUE(s.is_ok()) << s.to_string();
    });
    return floats_of(r, "out");
  };
  const std::vector<float> with_nan = run(kSlots, std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> with_zeros = run(kSlots, 0.0f);
  const std::vector<float> written_only = run(kWritten, 0.0f);
  ASSERT_EQ(with_nan.size(), static_cast<size_t>(4 * kDim));
  for (size_t i = 0; i < with_nan.size(); ++i) {
    ASSERT_TRUE(std::isfinite(with_nan[i])) << i;
    EXPECT_EQ(std::memcmp(&with_nan[i], &with_zeros[i], sizeof(float)), 0) << i;
    EXPECT_EQ(std::memcmp(&with_nan[i], &written_only[i], sizeof(float)), 0) << i;
  }
}

// The access callbacks let the scheduler sync point to point: in a chain of element-wise ops and
// reductions over the last dim, every core consumes only what it produced, so the super kernel
// needs no wait and no barrier; an op reading across rows (a reduction over dim 0) makes cores
// wait for exactly the producers of what they read.
TEST(TensorOpsGraph, AccessRangesLetTheScheduleSyncPointToPoint) {
  const auto schedule_of = [](bool across_rows) {
    Graph g;
    Tensor x = g.input("x", DType::kF32, {48, 64});
    Tensor h = unary(g, binary_scalar(g, x, 3.0, BinaryOp::kMul), UnaryOp::kTanh);
    h = binary(g, h, reduce(g, h, ReduceOp::kMax, {1}, true), BinaryOp::kSub);
    if (across_rows) h = binary(g, h, reduce(g, h, ReduceOp::kMean, {0}, true), BinaryOp::kAdd);
    // (The chain ends at full size: a small result placed by the memory plan in a big freed
    // buffer would meet other cores' earlier writes there, a wait the access ranges cannot avoid.)
    g.output(h, "h");
    auto rt = testing::make_runtime(3);
    CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
    o.super_kernel_optimize_options.sync_choice = SyncChoice::kPointToPoint;
    auto exe = rt->compile(g, o);
    EXPECT_TRUE(exe) << exe.status().to_string();
    return exe ? (*exe)->report().segments.at(0).schedule : std::string();
  };
  const std::string local = schedule_of(false);
  EXPECT_NE(local.find(": 0 waits, 0 signals, 0 barriers"), std::string::npos) << local;
  const std::string across = schedule_of(true);
  EXPECT_EQ(across.find(": 0 waits"), std::string::npos) << across;
  EXPECT_NE(across.find(" 0 barriers"), std::string::npos) << across;
}

// A stride-0 view as an op's input at run time: one row of a variable copied into the four rows
// after it, in every mode and under the access checker.
TEST(TensorOpsGraph, ExpandedRowSpreadsIntoTheSameVariable) {
  Graph g;
  Tensor v = g.variable("v", DType::kF32, {5, 8});
  Tensor row = g.input("row", DType::kF32, {1, 8});
  OpSpec first;
  first.kind = OpKind::kCopy;
  first.inputs = {row};
  first.write_into = {g.slice(v, 0, 0, 1)};
  g.add_op(first);
  OpSpec spread;
  spread.kind = OpKind::kCopy;
  spread.inputs = {g.expand(g.slice(v, 0, 0, 1), {4, 8})};
  spread.write_into = {g.slice(v, 0, 1, 5)};
  g.add_op(spread);
  g.output(reduce(g, binary(g, v, g.expand(row, {5, 8}), BinaryOp::kSub), ReduceOp::kSum, {}, false), "diff");
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  const std::vector<float> rv = testing::random_floats(8, 5);
  const RunResult r = run_everywhere(g, [&](Executable& e) {
    ASSERT_TRUE(e.set_input("row", rv).is_ok());
    const Status s = e.run();
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    std::vector<float> got(40);
    ASSERT_TRUE(e.read("v", got.data(), got.size() * 4).is_ok());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], rv[i % 8]) << i;
  });
  EXPECT_EQ(floats_of(r, "diff"), std::vector<float>{0.0f});
}

TEST(TensorOpsGraph, OutOfRangeIndexFailsTheRunNamingTheOp) {
  Graph g;
  Tensor cache = g.variable("cache", DType::kF32, {4, 3});
  Tensor pos = g.input("pos", DType::kI64, {1});
  index_copy(g, cache, 0, pos, g.input("row", DType::kF32, {1, 3}), "write_row");
  g.output(reduce(g, cache, ReduceOp::kSum, {}, false), "total");
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  auto rt = testing::make_runtime(2);
  for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    auto exe = rt->compile(g, CompileOptions::for_mode(mode));
    ASSERT_TRUE(exe) << exe.status().to_string();
    const int64_t bad = 4;
    const std::vector<float> row = {1, 2, 3};
    ASSERT_TRUE((*exe)->set_input("row", row).is_ok());
    ASSERT_TRUE((*exe)->set_input("pos", &bad, sizeof bad).is_ok());
    const Status s = (*exe)->run();
    EXPECT_TRUE(FailsWith(s, {"write_row", "tensor.index_copy", "index[0] = 4 is out of range", "size 4"}))
        << execution_mode_name(mode);
    std::vector<float> c(12, -1.0f);
    ASSERT_TRUE((*exe)->read("cache", c.data(), c.size() * 4).is_ok());
    for (float v : c) EXPECT_EQ(v, 0.0f) << "the cache was written despite the error";
  }
}

}  // namespace
}  // namespace sk
