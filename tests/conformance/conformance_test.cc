// Runs every registered conformance case (cases_*.cc) through the runtime: one-op graphs in
// eager, graph and superkernel mode on 1, 2 and 3 cores. Every run must be bit-identical to the
// first, and the first must match the kernel's reference implementation within its tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "common/test_runtime.h"
#include "conformance.h"
#include "kernels/reference/reference.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"
#include "util/element.h"

namespace sk::conformance {

std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

namespace {

// ---- Element conversions -------------------------------------------------------------------------

bool is_float(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

using Bytes = std::vector<uint8_t>;

Bytes make_data(const Input& in, uint32_t seed) {
  const size_t n = static_cast<size_t>(shape_numel(in.shape));
  const size_t elem = dtype_size(in.dtype);
  Bytes b(n * elem);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) {
    double v;
    if (!in.values.empty()) {
      v = in.values[i % in.values.size()];
    } else if (is_float(in.dtype)) {
      v = std::uniform_real_distribution<double>(in.lo, in.hi)(rng);
    } else {
      v = static_cast<double>(
          std::uniform_int_distribution<int64_t>(static_cast<int64_t>(in.lo), static_cast<int64_t>(in.hi))(rng));
    }
    store_element(static_cast<int32_t>(in.dtype), b.data() + i * elem, v);
  }
  return b;
}

sk_tensor_arg dense_arg(DType d, const Shape& shape, void* data) {
  sk_tensor_arg a{};
  a.data = data;
  a.dtype = static_cast<int32_t>(d);
  a.rank = static_cast<int32_t>(shape.size());
  int64_t stride = 1;
  for (int i = a.rank - 1; i >= 0; --i) {
    a.shape[i] = shape[i];
    a.stride[i] = stride;
    stride *= shape[i];
  }
  return a;
}

std::vector<Bytes> run_reference(const ref::Reference& r, const Case& c, std::vector<Bytes> inputs) {
  std::vector<Bytes> outputs;
  for (const TensorSpec& o : c.outputs)
    outputs.emplace_back(static_cast<size_t>(shape_numel(o.shape)) * dtype_size(o.dtype), 0);
  for (auto [o, i] : c.in_place) outputs[o] = inputs[i];
  std::vector<sk_tensor_arg> in_args, out_args;
  for (size_t i = 0; i < inputs.size(); ++i)
    in_args.push_back(dense_arg(c.inputs[i].dtype, c.inputs[i].shape, inputs[i].data()));
  for (size_t o = 0; o < outputs.size(); ++o)
    out_args.push_back(dense_arg(c.outputs[o].dtype, c.outputs[o].shape, outputs[o].data()));
  // In-place operands share one buffer, as they do in a graph.
  for (auto [o, i] : c.in_place) in_args[i].data = out_args[o].data;
  sk_kernel_args args{};
  args.inputs = in_args.data();
  args.outputs = out_args.data();
  args.num_inputs = static_cast<int32_t>(in_args.size());
  args.num_outputs = static_cast<int32_t>(out_args.size());
  args.attrs = c.attrs.empty() ? nullptr : c.attrs.data();
  args.attrs_size = static_cast<uint32_t>(c.attrs.size());
  EXPECT_EQ(r.run(&args), SK_OK) << "reference of " << c.kernel << " rejected case " << c.name;
  return outputs;
}

// `access_check`: under debug_cross_core_sync_check, so a write outside the kernel's declared
// ranges fails the run.
std::vector<Bytes> run_mode(Runtime& rt, const Case& c, const std::vector<Bytes>& inputs, ExecutionMode mode,
                            bool access_check = false, bool jit = false) {
  Graph g("conformance_" + c.name);
  std::vector<Tensor> ins;
  std::vector<Tensor> write_into(c.outputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Input& in = c.inputs[i];
    const std::string name = "in" + std::to_string(i);
    bool state = false;
    for (auto [o, src] : c.in_place) state |= src == static_cast<int>(i);
    if (state) {
      ins.push_back(g.variable(name, in.dtype, in.shape));
    } else if (in.weight) {
      ins.push_back(g.constant(name, in.dtype, in.shape, inputs[i].data(), inputs[i].size()));
    } else {
      ins.push_back(g.input(name, in.dtype, in.shape));
    }
  }
  for (auto [o, i] : c.in_place) write_into[o] = ins[i];
  OpSpec spec;
  spec.kind = OpKind::kCustom;
  spec.kernel = c.kernel;
  spec.name = c.name;
  spec.inputs = ins;
  spec.outputs = c.outputs;
  spec.attrs = c.attrs;
  bool any_in_place = !c.in_place.empty();
  if (any_in_place) spec.write_into = write_into;
  std::vector<Tensor> outs = g.add_op(spec);
  for (size_t o = 0; o < outs.size(); ++o) g.output(outs[o], "out" + std::to_string(o));

  CompileOptions options = CompileOptions::for_mode(mode);
  options.super_kernel_debug_options.debug_cross_core_sync_check = access_check;
  options.super_kernel_optimize_options.jit = jit;
  auto exe = rt.compile(g, options);
  if (!exe) {
    ADD_FAILURE() << c.name << " (" << execution_mode_name(mode) << "): " << exe.status().to_string();
    return {};
  }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i].weight) continue;
    Status s = (*exe)->set_input("in" + std::to_string(i), inputs[i].data(), inputs[i].size());
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  Status s = (*exe)->run();
  if (!s) {
    ADD_FAILURE() << c.name << " (" << execution_mode_name(mode) << ", " << rt.num_cores()
                  << " cores): " << s.to_string();
    return {};
  }
  std::vector<Bytes> out;
  for (size_t o = 0; o < c.outputs.size(); ++o) {
    Bytes b(static_cast<size_t>(shape_numel(c.outputs[o].shape)) * dtype_size(c.outputs[o].dtype));
    EXPECT_TRUE((*exe)->read("out" + std::to_string(o), b.data(), b.size()).is_ok());
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<std::shared_ptr<Runtime>>& runtimes() {
  static std::vector<std::shared_ptr<Runtime>> rts = {testing::make_runtime(1), testing::make_runtime(2),
                                                      testing::make_runtime(3)};
  return rts;
}

class Conformance : public ::testing::TestWithParam<size_t> {};

TEST_P(Conformance, MatchesReferenceInEveryModeAndCoreCount) {
  const Case& c = registry()[GetParam()];
  const ref::Reference* r = ref::find_reference(c.kernel);
  ASSERT_NE(r, nullptr) << "no reference implementation for kernel '" << c.kernel << "'";
  std::vector<Bytes> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    inputs.push_back(make_data(c.inputs[i], static_cast<uint32_t>(std::hash<std::string>{}(c.name) + i)));
  const std::vector<Bytes> want = run_reference(*r, c, inputs);

  std::vector<Bytes> first;
  std::string first_where;
  for (auto& rt : runtimes()) {
    // The plain modes on the interpreter, then superkernel mode as the JIT's generated code.
    for (auto [m, jit] :
         {std::pair{ExecutionMode::kEager, false}, std::pair{ExecutionMode::kGraph, false},
          std::pair{ExecutionMode::kSuperKernel, false}, std::pair{ExecutionMode::kSuperKernel, true}}) {
      const std::string where = std::string(execution_mode_name(m)) + (jit ? "+jit" : "") + " on " +
                                std::to_string(rt->num_cores()) + " cores";
      std::vector<Bytes> got = run_mode(*rt, c, inputs, m, false, jit);
      ASSERT_EQ(got.size(), c.outputs.size()) << where;
      if (first.empty()) {
        first = got;
        first_where = where;
        continue;
      }
      for (size_t o = 0; o < got.size(); ++o)
        ASSERT_EQ(got[o], first[o]) << "output " << o << ": " << where << " differs bitwise from " << first_where;
    }
  }
  {
    // Every sub-kernel writes only what its access callback declares (3 cores: uneven splits).
    std::vector<Bytes> got = run_mode(*runtimes().back(), c, inputs, ExecutionMode::kSuperKernel, true);
    ASSERT_EQ(got.size(), c.outputs.size()) << "under the access checker";
    for (size_t o = 0; o < got.size(); ++o)
      ASSERT_EQ(got[o], first[o]) << "output " << o << " under the access checker differs from " << first_where;
  }
  for (size_t o = 0; o < first.size(); ++o) {
    const DType d = c.outputs[o].dtype;
    const size_t elem = dtype_size(d);
    const size_t n = first[o].size() / elem;
    int reported = 0;
    for (size_t k = 0; k < n && reported < 5; ++k) {
      const double g = load_element(static_cast<int32_t>(d), first[o].data() + k * elem),
                   w = load_element(static_cast<int32_t>(d), want[o].data() + k * elem);
      // bf16 / f16 results of a kernel with a tolerance may also be one unit in the last place
      // apart: the kernel rounds its f32 result to the narrow dtype, the reference its own.
      const bool narrow = (d == DType::kBF16 || d == DType::kF16) && (r->abs_tol > 0 || r->rel_tol > 0);
      const double ulp =
          narrow ? std::ldexp(1.0,
                              std::ilogb(std::max(std::fabs(w), d == DType::kBF16 ? 1.17549435e-38 : 6.103515625e-05)) -
                                  (d == DType::kBF16 ? 7 : 10))
                 : 0.0;
      const bool ok = is_float(d) ? (std::isnan(g) && std::isnan(w)) || g == w ||
                                        std::fabs(g - w) <= r->abs_tol + r->rel_tol * std::fabs(w) + ulp
                                  : g == w;
      if (!ok) {
        ADD_FAILURE() << c.name << " output " << o << " element " << k << ": got " << g << ", reference " << w
                      << " (abs_tol " << r->abs_tol << ", rel_tol " << r->rel_tol << ")";
        ++reported;
      }
    }
  }
}

std::vector<size_t> case_indices() {
  std::vector<size_t> v(registry().size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

INSTANTIATE_TEST_SUITE_P(Kernels, Conformance, ::testing::ValuesIn(case_indices()),
                         [](const ::testing::TestParamInfo<size_t>& p) { return registry()[p.param].name; });

TEST(ConformanceCoverage, EveryReferencedKernelHasACase) {
  std::map<std::string, int> cases;
  for (const Case& c : registry()) ++cases[c.kernel];
  for (const ref::Reference& r : ref::all_references())
    EXPECT_GT(cases[r.kernel], 0) << "kernel '" << r.kernel << "' has a reference but no conformance case";
}

}  // namespace
}  // namespace sk::conformance
