// Graph construction, views and the verifier's error cases.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "superkernel/graph.h"
#include "superkernel/ops.h"

namespace sk {
namespace {

::testing::AssertionResult FailsWith(const Status& s, const std::vector<std::string>& parts) {
  if (s.is_ok()) return ::testing::AssertionFailure() << "expected an error, got OK";
  for (const std::string& p : parts)
    if (s.message().find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "message lacks '" << p << "': " << s.to_string();
  return ::testing::AssertionSuccess();
}

std::vector<float> zeros(size_t n) { return std::vector<float>(n, 0.0f); }

TEST(Graph, BuildsOpsInProgramOrderAndInfersShapes) {
  Graph g("mlp");
  Tensor x = g.input("x", DType::kF32, {2, 8});
  auto wv = zeros(16 * 8);
  Tensor w = g.constant_f32("w", {16, 8}, wv);
  Tensor h = matmul(g, x, w, "mm");
  auto gv = zeros(16);
  Tensor y = rms_norm(g, h, g.constant_f32("gamma", {16}, gv), 1e-6f, "norm");
  g.output(y, "y");
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  ASSERT_EQ(g.num_ops(), 2u);
  EXPECT_EQ(g.op(0).name, "mm");
  EXPECT_EQ(g.op(0).kernel, "matmul.f32");
  EXPECT_EQ(g.op(1).kernel, "rms_norm.f32");
  EXPECT_EQ(g.tensor(h).shape, (Shape{2, 16}));
  EXPECT_EQ(g.find_tensor("y"), y.id);
  EXPECT_EQ(g.find_tensor("x"), x.id);
}

TEST(Graph, ViewsAliasTheirRootStorage) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {4, 6});
  Tensor r = g.reshape(x, {24});
  Tensor t = g.transpose(x, {1, 0});
  Tensor s = g.slice(t, 0, 2, 5);
  EXPECT_EQ(g.tensor(r).base, x.id);
  EXPECT_EQ(g.tensor(s).base, x.id);
  EXPECT_EQ(g.tensor(t).shape, (Shape{6, 4}));
  EXPECT_EQ(g.tensor(t).strides, (Shape{1, 6}));
  EXPECT_EQ(g.tensor(s).shape, (Shape{3, 4}));
  EXPECT_EQ(g.tensor(s).byte_offset, 2 * 4);
  EXPECT_TRUE(g.verify().is_ok());
}

TEST(Graph, ReshapeOfNonDenseViewIsAnError) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {4, 6});
  g.reshape(g.transpose(x, {1, 0}), {24}, "bad_reshape");
  EXPECT_TRUE(FailsWith(g.verify(), {"bad_reshape", "not dense"}));
}

TEST(Graph, SliceOutOfBoundsIsAnError) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {4});
  g.slice(x, 0, 2, 9, "s");
  EXPECT_TRUE(FailsWith(g.verify(), {"slice 's'", "out of bounds"}));
}

TEST(Graph, SteppedSliceMultipliesTheStride) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {4, 7});
  Tensor odd = g.slice(x, 1, 1, 7, 2, "odd");    // columns 1, 3, 5
  Tensor rows = g.slice(x, 0, 0, 4, 3, "rows");  // rows 0, 3
  EXPECT_EQ(g.tensor(odd).shape, (Shape{4, 3}));
  EXPECT_EQ(g.tensor(odd).strides, (Shape{7, 2}));
  EXPECT_EQ(g.tensor(odd).byte_offset, 1 * 4);
  EXPECT_EQ(g.tensor(rows).shape, (Shape{2, 7}));
  EXPECT_EQ(g.tensor(rows).strides, (Shape{21, 1}));
  EXPECT_TRUE(g.verify().is_ok());
}

TEST(Graph, SliceStepBelowOneIsAnError) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {4});
  g.slice(x, 0, 0, 4, 0, "s");
  EXPECT_TRUE(FailsWith(g.verify(), {"slice 's'", "step 0"}));
}

TEST(Verifier, ShapeMismatchNamesOpAndOperand) {
  Graph g;
  Tensor a = g.input("a", DType::kF32, {2, 8});
  Tensor b = g.input("b", DType::kF32, {3});
  add(g, a, b, "bad_add");
  EXPECT_TRUE(FailsWith(g.verify(), {"bad_add", "operand 1", "'b'", "[3]"}));
}

TEST(Verifier, MatmulKMismatchNamesOperand) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {1, 8});
  Tensor w = g.input("w", DType::kF32, {4, 9});
  matmul(g, x, w, "mm");
  EXPECT_TRUE(FailsWith(g.verify(), {"op 'mm'", "operand 1", "K mismatch"}));
}

TEST(Verifier, DtypeMismatchNamesOpAndOperand) {
  Graph g;
  Tensor a = g.input("a", DType::kF32, {4});
  Tensor b = g.input("b", DType::kI32, {4});
  mul(g, a, b, "m");
  EXPECT_TRUE(FailsWith(g.verify(), {"op 'm'", "operand 1", "i32"}));
}

TEST(Verifier, NormWeightShapeIsChecked) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {2, 8});
  Tensor w = g.input("w", DType::kF32, {7});
  rms_norm(g, x, w, 1e-5f, "n");
  EXPECT_TRUE(FailsWith(g.verify(), {"op 'n'", "operand 1", "'weight'"}));
}

TEST(Verifier, UseBeforeDefinition) {
  Graph g;
  Tensor later = g.declare("later", DType::kF32, {4});
  Tensor x = g.input("x", DType::kF32, {4});
  add(g, x, later, "reader");
  OpSpec def;
  def.kind = OpKind::kCopy;
  def.name = "definer";
  def.inputs = {x};
  def.write_into = {later};
  g.add_op(def);
  EXPECT_TRUE(FailsWith(g.verify(), {"op 'reader'", "operand 1", "'later'", "before any op defines it"}));
}

TEST(Verifier, DeclaredTensorWrittenThenReadIsFine) {
  Graph g;
  Tensor later = g.declare("later", DType::kF32, {4});
  Tensor x = g.input("x", DType::kF32, {4});
  OpSpec def;
  def.kind = OpKind::kCopy;
  def.inputs = {x};
  def.write_into = {later};
  g.add_op(def);
  g.output(add(g, x, later), "y");
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
}

TEST(Verifier, WritingAConstantIsAnError) {
  Graph g;
  auto v = zeros(4);
  Tensor c = g.constant_f32("c", {4}, v);
  Tensor x = g.input("x", DType::kF32, {4});
  OpSpec spec;
  spec.kind = OpKind::kCopy;
  spec.name = "overwrite";
  spec.inputs = {x};
  spec.write_into = {c};
  g.add_op(spec);
  EXPECT_TRUE(FailsWith(g.verify(), {"op 'overwrite'", "constant 'c'"}));
}

TEST(Verifier, EventWaitedButNeverRecorded) {
  Graph g;
  Event e = g.create_event("kv_ready");
  g.wait(e);
  EXPECT_TRUE(FailsWith(g.verify(), {"kv_ready", "never recorded"}));
}

TEST(Verifier, EventWaitedBeforeItsRecord) {
  Graph g;
  Event e = g.create_event("e1");
  g.wait(e);
  g.record(e);
  EXPECT_TRUE(FailsWith(g.verify(), {"e1", "before it is recorded"}));
}

TEST(Verifier, EventsInOrderAreFine) {
  Graph g;
  Stream s = g.create_stream("side");
  Event e = g.create_event("e");
  {
    StreamScope on(g, s);
    g.record(e);
  }
  g.wait(e);
  EXPECT_TRUE(g.verify().is_ok());
  EXPECT_EQ(g.op(0).stream, s.id);
  EXPECT_EQ(g.op(1).stream, 0);
}

TEST(Verifier, TensorFromAnotherGraphIsRejected) {
  Graph g1, g2;
  Tensor a = g1.input("a", DType::kF32, {4});
  Tensor b = g2.input("b", DType::kF32, {4});
  add(g2, b, a, "cross");
  EXPECT_TRUE(FailsWith(g2.verify(), {"op 'cross'", "operand 1", "another graph"}));
}

TEST(Verifier, DynamicShapesAreRejected) {
  Graph g;
  g.input("x", DType::kF32, {-1, 4});
  EXPECT_TRUE(FailsWith(g.verify(), {"'x'", "dynamic"}));
}

TEST(Verifier, DuplicateInputNames) {
  Graph g;
  g.input("x", DType::kF32, {4});
  g.input("x", DType::kF32, {4});
  EXPECT_TRUE(FailsWith(g.verify(), {"'x'"}));
}

TEST(Verifier, ConstantWithWrongByteCount) {
  Graph g;
  std::vector<float> v(3);
  g.constant_f32("w", {4}, v);
  EXPECT_TRUE(FailsWith(g.verify(), {"constant 'w'", "12 bytes", "needs 16"}));
}

TEST(Scopes, RaiiScopeTagsOps) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {4});
  Tensor y;
  {
    SuperKernelScope s(g, "layer0", "feed-sync-all=1");
    y = add(g, x, x);
  }
  Tensor z = add(g, y, x);
  g.output(z, "z");
  ASSERT_TRUE(g.verify().is_ok());
  ASSERT_EQ(g.op(0).scopes.size(), 1u);
  EXPECT_EQ(g.scope(g.op(0).scopes[0]).name, "layer0");
  EXPECT_EQ(g.scope(g.op(0).scopes[0]).options, "feed-sync-all=1");
  EXPECT_TRUE(g.op(1).scopes.empty());
}

TEST(Scopes, SameNameInSeveralBlocksIsOneScope) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {4});
  {
    SuperKernelScope s(g, "a");
    add(g, x, x);
  }
  {
    SuperKernelScope s(g, "a");
    add(g, x, x);
  }
  EXPECT_EQ(g.op(0).scopes, g.op(1).scopes);
}

TEST(Scopes, EmptyOrNullRaiiNameMeansDoNotFuse) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {4});
  {
    SuperKernelScope s(g, static_cast<const char*>(nullptr));
    add(g, x, x);
  }
  ASSERT_EQ(g.op(0).scopes.size(), 1u);
  EXPECT_EQ(g.scope(g.op(0).scopes[0]).name, "");
  EXPECT_TRUE(g.verify().is_ok());
}

TEST(Scopes, BeginEndRejectBlankNames) {
  Graph g;
  EXPECT_TRUE(FailsWith(super_kernel_scope_begin(g, ""), {"empty or whitespace"}));
  EXPECT_TRUE(FailsWith(super_kernel_scope_begin(g, "  \t"), {"empty or whitespace"}));
  EXPECT_TRUE(FailsWith(super_kernel_scope_end(g, " "), {"empty or whitespace"}));
}

TEST(Scopes, MismatchedEndNamesBothScopes) {
  Graph g;
  ASSERT_TRUE(super_kernel_scope_begin(g, "alpha").is_ok());
  EXPECT_TRUE(FailsWith(super_kernel_scope_end(g, "beta"), {"'beta'", "'alpha'"}));
  EXPECT_TRUE(FailsWith(g.verify(), {"'beta'", "'alpha'"}));
}

TEST(Scopes, UnclosedBeginFailsVerification) {
  Graph g;
  ASSERT_TRUE(super_kernel_scope_begin(g, "open_one").is_ok());
  EXPECT_TRUE(FailsWith(g.verify(), {"'open_one'", "never closed"}));
}

TEST(Scopes, EndWithoutBegin) {
  Graph g;
  EXPECT_TRUE(FailsWith(super_kernel_scope_end(g, "lonely"), {"'lonely'", "without a matching"}));
}

TEST(Scopes, NameLengthLimitIs255Bytes) {
  Graph g;
  EXPECT_TRUE(super_kernel_scope_begin(g, std::string(255, 'a')).is_ok());
  EXPECT_TRUE(super_kernel_scope_end(g, std::string(255, 'a')).is_ok());
  EXPECT_TRUE(FailsWith(super_kernel_scope_begin(g, std::string(256, 'b')), {"256 bytes", "255"}));
}

TEST(Scopes, AtMost1024DistinctScopes) {
  Graph g;
  for (int i = 0; i < 1024; ++i) {
    std::string n = "s" + std::to_string(i);
    ASSERT_TRUE(super_kernel_scope_begin(g, n).is_ok()) << i;
    ASSERT_TRUE(super_kernel_scope_end(g, n).is_ok());
  }
  EXPECT_TRUE(super_kernel_scope_begin(g, "s0").is_ok());  // reopening an existing one is fine
  EXPECT_TRUE(super_kernel_scope_end(g, "s0").is_ok());
  EXPECT_TRUE(FailsWith(super_kernel_scope_begin(g, "one_too_many"), {"'one_too_many'", "1024"}));
}

TEST(Scopes, ReopenWithDifferentOptionsIsAnError) {
  Graph g;
  ASSERT_TRUE(super_kernel_scope_begin(g, "a", "feed-sync-all=1").is_ok());
  ASSERT_TRUE(super_kernel_scope_end(g, "a").is_ok());
  EXPECT_TRUE(FailsWith(super_kernel_scope_begin(g, "a", "feed-sync-all=0"), {"'a'", "differ"}));
}

TEST(Attributes, LimitCoreNumAndStreamsNest) {
  Graph g;
  Tensor x = g.input("x", DType::kF32, {4});
  Stream s = g.create_stream("s1");
  {
    LimitCoreNum lim(g, 1, 2);
    StreamScope st(g, s);
    add(g, x, x);
  }
  add(g, x, x);
  EXPECT_EQ(g.op(0).core_limit_cube, 1);
  EXPECT_EQ(g.op(0).core_limit_vector, 2);
  EXPECT_EQ(g.op(0).stream, s.id);
  EXPECT_EQ(g.op(1).core_limit_cube, 0);
  EXPECT_EQ(g.op(1).stream, 0);
}

}  // namespace
}  // namespace sk
