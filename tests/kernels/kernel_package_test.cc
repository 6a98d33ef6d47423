// Direct tests of the built-in kernel package (src/kernels), loaded with dlopen as the runtime
// loads it. For every kernel and a set of shapes (edge shapes, strided / transposed / reversed
// views, broadcasts, in-place), at every ISA level the CPU offers:
//   - run() on 1, 2, 3, 4 and 7 cores (called one core after the other, and on 4 threads) gives
//     bitwise the same output, also when every buffer is moved to another alignment or every
//     operand is made dense;
//   - the output matches the reference implementation within its documented tolerance, and
//     nothing outside the output views is written;
//   - the access callback is exact enough for the scheduler: writes of different cores are
//     disjoint and cover the outputs, ranges stay inside their operands, a core writes only
//     inside its write ranges and computes the same result when every input byte outside its
//     read ranges is poisoned.
// Error paths (bad ids, mismatched shapes, wrong dtypes, overlapping outputs) fail cleanly.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <superkernel/kernel_abi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "kernel_cases.h"
#include "kernels/reference/reference.h"
#include "manual_args.h"
#include "superkernel/attrs_core.h"
#include "util/element.h"
#include "util/half.h"

#ifndef SK_BUILTIN_PACKAGE_PATH
#error "SK_BUILTIN_PACKAGE_PATH must name the built-in kernel package"
#endif

namespace sk::kernel_test {
std::vector<Case>& case_registry() {
  static std::vector<Case> cases;
  return cases;
}
}  // namespace sk::kernel_test

namespace {

using namespace sk::kernel_test;

constexpr unsigned char kSentinel = 0xCD;
constexpr unsigned char kPoison = 0xFF;  // NaN as f32, -1 as i32
constexpr int kCoreCounts[] = {1, 2, 3, 4, 7};
constexpr int kMaxCores = 7;  // the most cores any test here runs a call on

// ---------------------------------------------------------------------------------------------
// The package

struct Package {
  void* handle = nullptr;
  const sk_kernel_package* table = nullptr;
  int32_t (*force_isa)(int32_t) = nullptr;
  std::string error;
};

const Package& package() {
  static const Package pkg = [] {
    Package p;
    p.handle = dlopen(SK_BUILTIN_PACKAGE_PATH, RTLD_NOW | RTLD_LOCAL);
    if (p.handle == nullptr) {
      p.error = dlerror();
      return p;
    }
    const auto table_fn = reinterpret_cast<sk_kernel_package_table_fn>(dlsym(p.handle, SK_KERNEL_PACKAGE_SYMBOL));
    if (table_fn == nullptr) {
      p.error = "missing " SK_KERNEL_PACKAGE_SYMBOL;
      return p;
    }
    p.table = table_fn();
    p.force_isa = reinterpret_cast<int32_t (*)(int32_t)>(dlsym(p.handle, "sk_kernels_builtin_force_isa"));
    return p;
  }();
  return pkg;
}

const sk_kernel_desc* find_kernel(std::string_view name) {
  const Package& p = package();
  if (p.table == nullptr) return nullptr;
  for (uint32_t i = 0; i < p.table->num_kernels; ++i) {
    if (name == p.table->kernels[i].name) return &p.table->kernels[i];
  }
  return nullptr;
}

// The package's ISA levels (src/kernels/cpu_isa.h), in order.
constexpr int kNumIsaLevels = 6;
constexpr int kIsaAvx512 = 2;
constexpr int kIsaAvx512Bf16 = 4;

const char* isa_name(int level) {
  static constexpr const char* kNames[kNumIsaLevels] = {"scalar",      "avx2",        "avx512",
                                                        "avx512_vnni", "avx512_bf16", "amx"};
  return level >= 0 && level < kNumIsaLevels ? kNames[level] : "default";
}

// The reference whose tolerance holds at `level`: the bf16-weight matmuls widen the weights
// exactly below avx512_bf16, so there they are held to the f32 matmuls' tolerance (their
// reference row's wider one is for the rounding of x from avx512_bf16 on, reference.h).
const sk::ref::Reference* reference_at_level(const std::string& kernel, int level) {
  const sk::ref::Reference* ref = sk::ref::find_reference(kernel);
  static const sk::ref::Reference kWidened[] = {
      {"matmul.bf16", sk::ref::matmul_bf16, sk::ref::find_reference("matmul.f32")->abs_tol,
       sk::ref::find_reference("matmul.f32")->rel_tol},
      {"grouped_matmul.bf16", sk::ref::grouped_matmul_bf16, sk::ref::find_reference("grouped_matmul.f32")->abs_tol,
       sk::ref::find_reference("grouped_matmul.f32")->rel_tol},
  };
  if (level >= kIsaAvx512Bf16) return ref;
  for (const sk::ref::Reference& r : kWidened) {
    if (kernel == r.kernel) return &r;
  }
  return ref;
}

// The levels above avx512 add dot-product instructions that only the matmul family uses
// (docs/kernels_matmul.md); every other kernel runs its avx512 code there, already covered.
bool has_paths_above_avx512(const std::string& kernel) {
  return kernel.rfind("matmul.", 0) == 0 || kernel.rfind("grouped_matmul.", 0) == 0;
}

// Forces an ISA level for the lifetime of the scope; ok() is false when the CPU lacks it.
class IsaScope {
 public:
  explicit IsaScope(int level) {
    const auto force = package().force_isa;
    ok_ = force != nullptr && force(level) == level;
  }
  ~IsaScope() {
    if (package().force_isa != nullptr) package().force_isa(-1);
  }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

struct Storage {
  std::vector<unsigned char> bytes;
  int64_t elem_size = 0;
  int64_t origin = 0;  // byte offset of the data pointer inside `bytes`
  sk_tensor_arg arg{};
  std::vector<int64_t> offsets;  // element offsets from the data pointer, in logical order

  // Storage byte index of the byte `rel` bytes from the data pointer.
  int64_t index_of(int64_t rel) const { return origin + rel; }
};

template <class Fn>
void for_each_index(const std::vector<int64_t>& shape, Fn&& fn) {
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat;
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = rest % shape[d];
      rest /= shape[d];
    }
    fn(idx);
  }
}

// `shift` extra elements in front of the storage move every address (and alignment).
Storage make_storage(const TensorDesc& d, int64_t shift) {
  Storage s;
  const size_t r = d.shape.size();
  s.elem_size = sk_dtype_size(d.dtype);
  std::vector<int64_t> extent(r);
  std::vector<int64_t> sstride(r);
  for (size_t i = 0; i < r; ++i) {
    extent[i] = d.expand[i] ? 1 : std::max<int64_t>(1, d.shape[i] * d.step[i] + d.pad[i]);
  }
  std::vector<int> perm = d.perm;
  if (perm.empty()) {
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int>(i));
  }
  int64_t total = 1;
  for (size_t i = r; i-- > 0;) {
    const auto dim = static_cast<size_t>(perm[i]);
    sstride[dim] = total;
    total *= extent[dim];
  }
  int64_t origin = shift;
  s.arg.dtype = d.dtype;
  s.arg.rank = static_cast<int32_t>(r);
  for (size_t i = 0; i < r; ++i) {
    s.arg.shape[i] = d.shape[i];
    s.arg.stride[i] = d.expand[i] ? 0 : sstride[i] * d.step[i] * (d.reverse[i] ? -1 : 1);
    if (d.reverse[i] && !d.expand[i] && d.shape[i] > 0) origin += (d.shape[i] - 1) * d.step[i] * sstride[i];
  }
  s.bytes.assign(static_cast<size_t>((total + shift) * s.elem_size), kSentinel);
  s.origin = origin * s.elem_size;
  s.arg.data = s.bytes.data() + s.origin;
  for_each_index(d.shape, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t i = 0; i < r; ++i) off += idx[i] * s.arg.stride[i];
    s.offsets.push_back(off);
  });
  return s;
}

// Fills the view's elements in logical order, so the values do not depend on the layout.
void fill_storage(Storage& s, const TensorDesc& d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(d.lo, d.hi);
  int64_t n = 0;
  for (int64_t off : s.offsets) {
    unsigned char* p = s.bytes.data() + s.index_of(off * s.elem_size);
    switch (d.fill) {
      case Fill::kUniform:
      case Fill::kMaskedLogits: {
        float v = static_cast<float>(uniform(rng));
        if (d.fill == Fill::kMaskedLogits && n % 5 == 3) v = -std::numeric_limits<float>::infinity();
        sk::store_element(d.dtype, p, v);
        break;
      }
      case Fill::kValues:
        sk::store_element(d.dtype, p, d.values[static_cast<size_t>(n) % d.values.size()]);
        break;
      case Fill::kIds:
        sk::store_element(d.dtype, p, static_cast<double>(rng() % static_cast<uint64_t>(d.hi)));
        break;
      case Fill::kBool:
        *p = static_cast<unsigned char>(rng() & 1u);
        break;
      case Fill::kBytes:
        for (int64_t b = 0; b < s.elem_size; ++b) p[b] = static_cast<unsigned char>(rng());
        break;
    }
    ++n;
  }
}

std::vector<unsigned char> view_bytes(const Storage& s) {
  std::vector<unsigned char> out;
  for (int64_t off : s.offsets) {
    const unsigned char* p = s.bytes.data() + s.index_of(off * s.elem_size);
    out.insert(out.end(), p, p + s.elem_size);
  }
  return out;
}

// Storage bytes that belong to the view.
std::vector<bool> view_mask(const Storage& s) {
  std::vector<bool> mask(s.bytes.size(), false);
  for (int64_t off : s.offsets) {
    for (int64_t b = 0; b < s.elem_size; ++b) {
      mask[static_cast<size_t>(s.index_of(off * s.elem_size + b))] = true;
    }
  }
  return mask;
}

// The same case with every operand dense and row-major: the same logical values, so every
// kernel must give the same bits (an element's value depends on its inputs, not its layout).
// Expanded dims stay expanded: their values repeat, which a dense fill would not reproduce.
Case dense_twin(Case c) {
  for (auto* list : {&c.inputs, &c.outputs}) {
    for (TensorDesc& d : *list) {
      d.perm.clear();
      std::fill(d.step.begin(), d.step.end(), 1);
      std::fill(d.pad.begin(), d.pad.end(), 0);
      std::fill(d.reverse.begin(), d.reverse.end(), false);
    }
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// Running

struct Instance {
  std::vector<Storage> in;
  std::vector<Storage> out;
  std::vector<sk_tensor_arg> in_args;
  std::vector<sk_tensor_arg> out_args;
  sk_kernel_args args{};
  std::vector<int> alias;  // per output: the input it is the very view of (in-place), or -1
  // Tiling-sink kernels: their tiling, computed from the filled inputs.
  std::vector<unsigned char> tiling;
  // The workspace, as the runtime would plan it for kMaxCores cores, filled with a different
  // byte for every instance: a kernel reading scratch it did not write gives different bits in
  // the comparisons between instances.
  std::vector<unsigned char> workspace;

  Storage& out_storage(size_t i) { return alias[i] >= 0 ? in[static_cast<size_t>(alias[i])] : out[i]; }
};

std::unique_ptr<Instance> instantiate(const Case& c, size_t case_index, int64_t shift) {
  auto inst = std::make_unique<Instance>();
  inst->alias.assign(c.outputs.size(), -1);
  if (c.alias >= 0) inst->alias[0] = c.alias;
  for (size_t o = 0; o < c.outputs.size(); ++o) {
    if (c.outputs[o].view_of >= 0) inst->alias[o] = c.outputs[o].view_of;
  }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inst->in.push_back(make_storage(c.inputs[i], shift));
    fill_storage(inst->in.back(), c.inputs[i], case_index * 1000 + i + 1);
  }
  for (const TensorDesc& d : c.outputs) inst->out.push_back(make_storage(d, shift));
  for (const Storage& s : inst->in) inst->in_args.push_back(s.arg);
  for (size_t i = 0; i < inst->out.size(); ++i) inst->out_args.push_back(inst->out_storage(i).arg);
  inst->args.inputs = inst->in_args.data();
  inst->args.outputs = inst->out_args.data();
  inst->args.num_inputs = static_cast<int32_t>(inst->in_args.size());
  inst->args.num_outputs = static_cast<int32_t>(inst->out_args.size());
  inst->args.attrs = c.attrs.empty() ? nullptr : c.attrs.data();
  inst->args.attrs_size = static_cast<uint32_t>(c.attrs.size());
  // A tiling sink's tiling reads input data: run it on the filled inputs, as the runtime does
  // once their producers have finished (so before any test poisons bytes a core does not read).
  const sk_kernel_desc* k = find_kernel(c.kernel);
  if (k != nullptr && k->workspace_size != nullptr) {
    uint64_t bytes = k->workspace_size(&inst->args);
    const bool per_core = (k->flags & SK_WORKSPACE_PER_CORE) != 0;
    if (per_core) bytes = (bytes + 63) / 64 * 64;
    static unsigned char poison = 0x5A;
    inst->workspace.assign(static_cast<size_t>(per_core ? bytes * kMaxCores : bytes) + 64, poison++);
    // 64-byte aligned, like the runtime's arena.
    const auto addr = reinterpret_cast<uintptr_t>(inst->workspace.data());
    inst->args.workspace = inst->workspace.data() + ((64 - addr % 64) % 64);
    inst->args.workspace_size = bytes;
  }
  if (k != nullptr && k->tiling != nullptr && (k->flags & SK_TILING_SINK) != 0) {
    inst->tiling.assign(64 * 1024, 0);
    uint32_t size = 0;
    const int32_t rc = k->tiling(&inst->args, inst->tiling.data(), static_cast<uint32_t>(inst->tiling.size()), &size);
    EXPECT_EQ(rc, SK_OK) << c.name << ": tiling failed";
    if (rc == SK_OK && size <= inst->tiling.size()) {
      inst->args.tiling = inst->tiling.data();
      inst->args.tiling_size = size;
    }
  }
  return inst;
}

sk_core_ctx make_ctx(int core, int n, char* msg, uint32_t capacity) {
  sk_core_ctx ctx{};
  ctx.core_id = core;
  ctx.num_cores = n;
  ctx.error_message = msg;
  ctx.error_capacity = capacity;
  return ctx;
}

// Runs cores 0..n-1 one after the other (or only `only_core`).
void run_cores(const sk_kernel_desc& k, const sk_kernel_args& args, int n, int only_core = -1) {
  for (int core = 0; core < n; ++core) {
    if (only_core >= 0 && core != only_core) continue;
    char msg[256] = {};
    const sk_core_ctx ctx = make_ctx(core, n, msg, sizeof msg);
    ASSERT_EQ(k.run(&args, &ctx), SK_OK) << "core " << core << " of " << n << ": " << msg;
  }
}

std::string first_difference(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want) {
  if (got.size() != want.size()) return "sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) return "first difference at byte " + std::to_string(i);
  }
  return "";
}

bool close_enough(float got, float want, double abs_tol, double rel_tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::fabs(static_cast<double>(got) - want) <= abs_tol + rel_tol * std::fabs(want);
}

// One unit in the last place of a bf16 / f16 value near `v`: a kernel with a tolerance rounds
// its f32 result to the narrow dtype, the reference its own, and the two may land one unit apart.
double narrow_ulp(int32_t dtype, double v) {
  const int mantissa = dtype == SK_DTYPE_BF16 ? 7 : 10;
  const double min_normal = dtype == SK_DTYPE_BF16 ? 1.17549435e-38 : 6.103515625e-05;
  const double a = std::max(std::fabs(v), min_normal);
  return std::ldexp(1.0, std::ilogb(a) - mantissa);
}

// Access ranges of one core, asking again with more room when the first call reports more.
std::vector<sk_access_range> collect_access(const sk_kernel_desc& k, const sk_kernel_args& args, int core, int n) {
  std::vector<sk_access_range> r(2);
  const int32_t count = k.access(&args, core, n, r.data(), 2);
  EXPECT_GE(count, 0) << "core " << core << " of " << n;
  if (count < 0) return {};
  if (count > 2) {
    const sk_access_range guard{-7, -7, -7, -7};
    r.assign(static_cast<size_t>(count) + 1, guard);
    EXPECT_EQ(k.access(&args, core, n, r.data(), count), count);
    EXPECT_EQ(r.back().operand, -7) << "access wrote past its capacity";
  }
  r.resize(static_cast<size_t>(count));
  return r;
}

// Storage bytes of operand `operand` covered by the ranges with `mode`.
std::vector<bool> range_mask(const Storage& s, const std::vector<sk_access_range>& ranges, int operand, int mode) {
  std::vector<bool> mask(s.bytes.size(), false);
  for (const sk_access_range& r : ranges) {
    if (r.operand != operand || (r.mode & mode) == 0) continue;
    const int64_t b = std::max<int64_t>(0, s.index_of(r.begin));
    const int64_t e = std::min<int64_t>(static_cast<int64_t>(s.bytes.size()), s.index_of(r.end));
    for (int64_t i = b; i < e; ++i) mask[static_cast<size_t>(i)] = true;
  }
  return mask;
}

// ---------------------------------------------------------------------------------------------
// Package-level checks

TEST(KernelPackage, TableIsWellFormed) {
  const Package& p = package();
  ASSERT_NE(p.table, nullptr) << p.error;
  EXPECT_EQ(p.table->abi_version, SK_KERNEL_ABI_VERSION);
  EXPECT_STREQ(p.table->name, "builtin");
  // The v0 kernels are always there; families add more (each must keep the invariants below).
  const std::set<std::string> v0 = {"add.f32",     "mul.f32",    "silu_mul.f32",  "rms_norm.f32",
                                    "softmax.f32", "matmul.f32", "embedding.f32", "copy"};
  std::set<std::string> seen;
  for (uint32_t i = 0; i < p.table->num_kernels; ++i) {
    const sk_kernel_desc& k = p.table->kernels[i];
    ASSERT_NE(k.name, nullptr);
    SCOPED_TRACE(k.name);
    EXPECT_TRUE(seen.insert(k.name).second) << "duplicate name";
    EXPECT_EQ(k.abi_version, SK_KERNEL_ABI_VERSION);
    EXPECT_TRUE(k.type >= 0 && k.type < SK_KERNEL_TYPE_COUNT);
    EXPECT_TRUE(k.flags & SK_FUSIBLE);
    EXPECT_EQ(k.flags & ~static_cast<uint32_t>(SK_KNOWN_FLAGS), 0u);
    EXPECT_NE(k.run, nullptr);
    EXPECT_NE(k.access, nullptr);
    EXPECT_EQ((k.flags & SK_USES_SYNC_ALL) != 0, k.sync_all_count != 0);
    if (k.flags & SK_CHUNKABLE) {
      EXPECT_EQ(k.workspace_size, nullptr) << "a chunkable kernel has no workspace";
      EXPECT_EQ(k.flags & (SK_USES_SYNC_ALL | SK_SYNCS_CORES | SK_TILING_SINK), 0u);
    }
    EXPECT_NE(sk::ref::find_reference(k.name), nullptr) << "no reference implementation";
    if (v0.count(k.name)) {
      EXPECT_EQ(k.type, std::string(k.name) == "matmul.f32" ? SK_KERNEL_CUBE : SK_KERNEL_VECTOR);
      // matmul.f32 writes exactly its access ranges with a nesting split: chunkable.
      EXPECT_EQ(k.flags, std::string(k.name) == "matmul.f32" ? static_cast<uint32_t>(SK_FUSIBLE | SK_CHUNKABLE)
                                                             : static_cast<uint32_t>(SK_FUSIBLE));
      EXPECT_EQ(k.workspace_size, nullptr);
    }
  }
  for (const std::string& name : v0) EXPECT_TRUE(seen.count(name)) << name;
  EXPECT_NE(p.force_isa, nullptr);
}

TEST(KernelPackage, EveryReferenceHasAKernelAndATestCase) {
  for (const sk::ref::Reference& r : sk::ref::all_references()) {
    SCOPED_TRACE(r.kernel);
    EXPECT_NE(find_kernel(r.kernel), nullptr);
    EXPECT_TRUE(
        std::any_of(all_cases().begin(), all_cases().end(), [&](const Case& c) { return c.kernel == r.kernel; }));
  }
  EXPECT_EQ(sk::ref::find_reference("no.such.kernel"), nullptr);
}

// ---------------------------------------------------------------------------------------------
// Per case, per ISA level

class KernelCaseTest : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  size_t case_index() const { return static_cast<size_t>(std::get<0>(GetParam())); }
  const Case& kase() const { return all_cases()[case_index()]; }
  int isa() const { return std::get<1>(GetParam()); }
};

TEST_P(KernelCaseTest, BitwiseStableAcrossCoresAndAddressesAndMatchesReference) {
  const Case& c = kase();
  IsaScope scope(isa());
  if (!scope.ok()) GTEST_SKIP() << "this CPU has no " << isa_name(isa());
  const sk_kernel_desc* k = find_kernel(c.kernel);
  ASSERT_NE(k, nullptr) << package().error;
  auto base = instantiate(c, case_index(), 0);
  ASSERT_NO_FATAL_FAILURE(run_cores(*k, base->args, 1));

  for (int n : kCoreCounts) {
    auto inst = instantiate(c, case_index(), 0);
    ASSERT_NO_FATAL_FAILURE(run_cores(*k, inst->args, n));
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      EXPECT_EQ(inst->out_storage(i).bytes, base->out_storage(i).bytes)
          << n << " cores, output " << i << ": "
          << first_difference(inst->out_storage(i).bytes, base->out_storage(i).bytes);
    }
  }
  {
    // Cores on threads of their own, as the runtime runs them (meaningful under TSan).
    constexpr int kThreads = 4;
    auto inst = instantiate(c, case_index(), 0);
    std::vector<int32_t> rc(kThreads, -1);
    std::vector<std::string> msg(kThreads, std::string(256, '\0'));
    std::vector<std::thread> threads;
    for (int core = 0; core < kThreads; ++core) {
      threads.emplace_back([&, core] {
        auto& m = msg[static_cast<size_t>(core)];
        const sk_core_ctx ctx = make_ctx(core, kThreads, m.data(), static_cast<uint32_t>(m.size()));
        rc[static_cast<size_t>(core)] = k->run(&inst->args, &ctx);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int core = 0; core < kThreads; ++core) {
      EXPECT_EQ(rc[static_cast<size_t>(core)], SK_OK) << msg[static_cast<size_t>(core)].c_str();
    }
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      EXPECT_EQ(inst->out_storage(i).bytes, base->out_storage(i).bytes)
          << "concurrent cores: " << first_difference(inst->out_storage(i).bytes, base->out_storage(i).bytes);
    }
  }
  if (k->tiling != nullptr && !(k->flags & SK_TILING_SINK)) {
    // Static modes run the host tiling once and pass its result to every call: the tiled call
    // must give the same bits as the untiled one (which recomputes everything itself).
    auto inst = instantiate(c, case_index(), 0);
    std::vector<unsigned char> tiling(64 * 1024);
    uint32_t size = 0;
    ASSERT_EQ(k->tiling(&inst->args, tiling.data(), static_cast<uint32_t>(tiling.size()), &size), SK_OK);
    ASSERT_LE(size, tiling.size());
    inst->args.tiling = tiling.data();
    inst->args.tiling_size = size;
    ASSERT_NO_FATAL_FAILURE(run_cores(*k, inst->args, 2));
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      EXPECT_EQ(inst->out_storage(i).bytes, base->out_storage(i).bytes)
          << "with host tiling: " << first_difference(inst->out_storage(i).bytes, base->out_storage(i).bytes);
    }
  }
  {
    const Case twin = dense_twin(c);
    auto inst = instantiate(twin, case_index(), 0);
    ASSERT_NO_FATAL_FAILURE(run_cores(*k, inst->args, 2));
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      const auto got = view_bytes(inst->out_storage(i));
      const auto want = view_bytes(base->out_storage(i));
      EXPECT_EQ(got, want) << "dense operands: " << first_difference(got, want);
    }
  }
  for (int64_t shift : {1, 3}) {
    auto inst = instantiate(c, case_index(), shift);
    ASSERT_NO_FATAL_FAILURE(run_cores(*k, inst->args, 3));
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      const auto got = view_bytes(inst->out_storage(i));
      const auto want = view_bytes(base->out_storage(i));
      EXPECT_EQ(got, want) << "buffers shifted by " << shift << " elements: " << first_difference(got, want);
    }
  }

  const sk::ref::Reference* ref = reference_at_level(c.kernel, isa());
  ASSERT_NE(ref, nullptr);
  auto want = instantiate(c, case_index(), 0);
  ASSERT_EQ(ref->run(&want->args), SK_OK);
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    const Storage& got_s = base->out_storage(i);
    const Storage& want_s = want->out_storage(i);
    if (c.outputs[i].dtype == SK_DTYPE_F32) {
      int failures = 0;
      for (size_t e = 0; e < got_s.offsets.size() && failures < 5; ++e) {
        float g = 0;
        float w = 0;
        std::memcpy(&g, got_s.bytes.data() + got_s.index_of(got_s.offsets[e] * 4), 4);
        std::memcpy(&w, want_s.bytes.data() + want_s.index_of(want_s.offsets[e] * 4), 4);
        if (!close_enough(g, w, ref->abs_tol, ref->rel_tol)) {
          ++failures;
          ADD_FAILURE() << "element " << e << ": got " << g << ", reference " << w << " (abs_tol " << ref->abs_tol
                        << ", rel_tol " << ref->rel_tol << ")";
        }
      }
    } else if ((c.outputs[i].dtype == SK_DTYPE_BF16 || c.outputs[i].dtype == SK_DTYPE_F16) &&
               (ref->abs_tol > 0 || ref->rel_tol > 0)) {
      int failures = 0;
      const int32_t dt = c.outputs[i].dtype;
      for (size_t e = 0; e < got_s.offsets.size() && failures < 5; ++e) {
        const double g = sk::load_element(dt, got_s.bytes.data() + got_s.index_of(got_s.offsets[e] * 2));
        const double w = sk::load_element(dt, want_s.bytes.data() + want_s.index_of(want_s.offsets[e] * 2));
        const bool ok = std::isnan(w) ? std::isnan(g)
                        : std::isinf(w) || std::isinf(g)
                            ? g == w
                            : std::fabs(g - w) <= ref->abs_tol + ref->rel_tol * std::fabs(w) + narrow_ulp(dt, w);
        if (!ok) {
          ++failures;
          ADD_FAILURE() << "element " << e << ": got " << g << ", reference " << w << " ("
                        << (dt == SK_DTYPE_BF16 ? "bf16" : "f16") << ", abs_tol " << ref->abs_tol << ", rel_tol "
                        << ref->rel_tol << " and one ulp)";
        }
      }
    } else {
      EXPECT_EQ(view_bytes(got_s), view_bytes(want_s));
    }
    // Bytes outside the view (gaps of strided views, padding) must be left alone.
    const std::vector<bool> in_view = view_mask(got_s);
    for (size_t b = 0; b < got_s.bytes.size(); ++b) {
      if (in_view[b]) continue;
      ASSERT_EQ(got_s.bytes[b], want_s.bytes[b]) << "byte " << b << " outside the output view";
    }
  }
}

TEST_P(KernelCaseTest, AccessRangesDescribeWhatRunTouches) {
  const Case& c = kase();
  IsaScope scope(isa());
  if (!scope.ok()) GTEST_SKIP() << "this CPU has no " << isa_name(isa());
  const sk_kernel_desc* k = find_kernel(c.kernel);
  ASSERT_NE(k, nullptr) << package().error;
  ASSERT_NE(k->access, nullptr);
  const int nin = static_cast<int>(c.inputs.size());
  const int nout = static_cast<int>(c.outputs.size());
  auto base = instantiate(c, case_index(), 0);
  ASSERT_NO_FATAL_FAILURE(run_cores(*k, base->args, 1));

  const auto storage_of = [&](Instance& inst, int operand) -> Storage& {
    return operand < nin ? inst.in[static_cast<size_t>(operand)] : inst.out_storage(static_cast<size_t>(operand - nin));
  };

  for (int n : kCoreCounts) {
    SCOPED_TRACE(std::to_string(n) + " cores");
    auto probe = instantiate(c, case_index(), 0);
    std::vector<std::vector<sk_access_range>> ranges(static_cast<size_t>(n));
    for (int core = 0; core < n; ++core) {
      ranges[static_cast<size_t>(core)] = collect_access(*k, probe->args, core, n);
    }
    // Well-formed and inside the operand's elements.
    for (int core = 0; core < n; ++core) {
      for (const sk_access_range& r : ranges[static_cast<size_t>(core)]) {
        ASSERT_GE(r.operand, 0);
        ASSERT_LT(r.operand, nin + nout);
        EXPECT_TRUE(r.mode == SK_ACCESS_READ || r.mode == SK_ACCESS_WRITE) << r.mode;
        EXPECT_LT(r.begin, r.end);
        if (r.mode == SK_ACCESS_WRITE) {
          EXPECT_GE(r.operand, nin) << "write to an input";
        }
        const Storage& s = storage_of(*probe, r.operand);
        ASSERT_FALSE(s.offsets.empty()) << "range on empty operand " << r.operand;
        const auto [lo, hi] = std::minmax_element(s.offsets.begin(), s.offsets.end());
        EXPECT_GE(r.begin, *lo * s.elem_size) << "operand " << r.operand;
        EXPECT_LE(r.end, (*hi + 1) * s.elem_size) << "operand " << r.operand;
      }
    }
    // Writes of different cores are disjoint.
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        for (const sk_access_range& ra : ranges[static_cast<size_t>(a)]) {
          for (const sk_access_range& rb : ranges[static_cast<size_t>(b)]) {
            if (ra.mode != SK_ACCESS_WRITE || rb.mode != SK_ACCESS_WRITE) continue;
            if (ra.operand != rb.operand) continue;
            EXPECT_FALSE(std::max(ra.begin, rb.begin) < std::min(ra.end, rb.end))
                << "cores " << a << " and " << b << " both write operand " << ra.operand << " bytes ["
                << std::max(ra.begin, rb.begin) << ", " << std::min(ra.end, rb.end) << ")";
          }
        }
      }
    }
    // Together the writes cover every output byte.
    for (int i = 0; i < nout; ++i) {
      const Storage& s = probe->out_storage(static_cast<size_t>(i));
      std::vector<bool> covered(s.bytes.size(), false);
      for (int core = 0; core < n; ++core) {
        const auto m = range_mask(s, ranges[static_cast<size_t>(core)], nin + i, SK_ACCESS_WRITE);
        for (size_t b = 0; b < m.size(); ++b) covered[b] = covered[b] || m[b];
      }
      const std::vector<bool> in_view = view_mask(s);
      for (size_t b = 0; b < s.bytes.size(); ++b) {
        if (in_view[b]) {
          ASSERT_TRUE(covered[b]) << "output " << i << " byte " << b << " unwritten";
        }
      }
    }
    // Each core alone: writes only inside its write ranges; with every input byte outside its
    // read ranges poisoned it still produces the right values.
    for (int core = 0; core < n; ++core) {
      SCOPED_TRACE("core " + std::to_string(core));
      const auto& mine = ranges[static_cast<size_t>(core)];
      auto inst = instantiate(c, case_index(), 0);
      std::vector<std::vector<unsigned char>> before;
      for (int i = 0; i < nout; ++i) before.push_back(inst->out_storage(static_cast<size_t>(i)).bytes);
      ASSERT_NO_FATAL_FAILURE(run_cores(*k, inst->args, n, core));
      for (int i = 0; i < nout; ++i) {
        const Storage& s = inst->out_storage(static_cast<size_t>(i));
        const auto allowed = range_mask(s, mine, nin + i, SK_ACCESS_WRITE);
        for (size_t b = 0; b < s.bytes.size(); ++b) {
          if (s.bytes[b] != before[static_cast<size_t>(i)][b]) {
            ASSERT_TRUE(allowed[b]) << "output " << i << " byte " << b << " written outside ranges";
          }
        }
      }

      auto poisoned = instantiate(c, case_index(), 0);
      for (int j = 0; j < nin; ++j) {
        Storage& s = poisoned->in[static_cast<size_t>(j)];
        const auto readable = range_mask(s, mine, j, SK_ACCESS_READ | SK_ACCESS_WRITE);
        for (size_t b = 0; b < s.bytes.size(); ++b) {
          if (!readable[b]) s.bytes[b] = kPoison;
        }
      }
      ASSERT_NO_FATAL_FAILURE(run_cores(*k, poisoned->args, n, core));
      for (int i = 0; i < nout; ++i) {
        const Storage& s = poisoned->out_storage(static_cast<size_t>(i));
        const Storage& want = base->out_storage(static_cast<size_t>(i));
        const auto written = range_mask(s, mine, nin + i, SK_ACCESS_WRITE);
        for (size_t b = 0; b < s.bytes.size(); ++b) {
          if (written[b]) {
            ASSERT_EQ(s.bytes[b], want.bytes[b])
                << "output " << i << " byte " << b << " depends on an input byte outside the "
                << "core's read ranges";
          }
        }
      }
    }
  }
}

std::string case_test_name(const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
  return all_cases()[static_cast<size_t>(std::get<0>(info.param))].name + "_" + isa_name(std::get<1>(info.param));
}

// Every case at every level up to avx512, and the matmul family's cases at the levels above too.
std::vector<std::tuple<int, int>> case_levels() {
  std::vector<std::tuple<int, int>> out;
  for (int c = 0; c < static_cast<int>(all_cases().size()); ++c) {
    for (int level = 0; level < kNumIsaLevels; ++level) {
      if (level <= kIsaAvx512 || has_paths_above_avx512(all_cases()[static_cast<size_t>(c)].kernel)) {
        out.emplace_back(c, level);
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelCaseTest, ::testing::ValuesIn(case_levels()), case_test_name);

// ---------------------------------------------------------------------------------------------
// Error paths

// Every core of a 1- and a 3-core call fails with a message naming the kernel and containing
// `detail`; access and prologue refuse too.
void expect_invalid(const char* kernel, ManualArgs& m, const char* detail) {
  SCOPED_TRACE(kernel);
  const sk_kernel_desc* k = find_kernel(kernel);
  ASSERT_NE(k, nullptr);
  const sk_kernel_args& args = m.args();
  for (int n : {1, 3}) {
    for (int core = 0; core < n; ++core) {
      char msg[256] = {};
      const sk_core_ctx ctx = make_ctx(core, n, msg, sizeof msg);
      EXPECT_EQ(k->run(&args, &ctx), SK_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::strstr(msg, kernel), nullptr) << msg;
      EXPECT_NE(std::strstr(msg, detail), nullptr) << msg;
      if (k->prologue != nullptr) {
        EXPECT_EQ(k->prologue(&args, &ctx), SK_ERR_INVALID_ARGUMENT);
      }
    }
  }
  sk_access_range ranges[4];
  EXPECT_LT(k->access(&args, 0, 1, ranges, 4), 0);
  // No message buffer: still a clean failure.
  const sk_core_ctx quiet = make_ctx(0, 1, nullptr, 0);
  EXPECT_EQ(k->run(&args, &quiet), SK_ERR_INVALID_ARGUMENT);
}

TEST(KernelErrors, EmbeddingRejectsOutOfRangeIdsOnEveryCore) {
  const sk_kernel_desc* k = find_kernel("embedding.f32");
  ASSERT_NE(k, nullptr) << package().error;
  for (int32_t bad : {50, -1}) {
    ManualArgs m;
    m.in(SK_DTYPE_I32, {2, 3}).in(SK_DTYPE_F32, {50, 8}).out(SK_DTYPE_F32, {2, 3, 8});
    int32_t* id = m.in_data<int32_t>(0);
    for (int i = 0; i < 6; ++i) id[i] = i;
    id[5] = bad;  // position [1, 2]
    std::memset(m.output(0).data, kSentinel, 2 * 3 * 8 * sizeof(float));
    const sk_kernel_args& args = m.args();
    for (int n : {1, 2, 3, 7}) {
      for (int core = 0; core < n; ++core) {
        char msg[256] = {};
        const sk_core_ctx ctx = make_ctx(core, n, msg, sizeof msg);
        EXPECT_EQ(k->run(&args, &ctx), SK_ERR_INVALID_ARGUMENT);
        const std::string text = msg;
        EXPECT_NE(text.find("ids[1, 2]"), std::string::npos) << text;
        EXPECT_NE(text.find("position 5"), std::string::npos) << text;
        EXPECT_NE(text.find(std::to_string(bad)), std::string::npos) << text;
        EXPECT_NE(text.find("50 rows"), std::string::npos) << text;
      }
    }
    const auto* out = static_cast<const unsigned char*>(m.output(0).data);
    for (size_t b = 0; b < 2 * 3 * 8 * sizeof(float); ++b) {
      ASSERT_EQ(out[b], kSentinel) << "output written despite the error";
    }
    // A tiny buffer gets a truncated, terminated message; none at all is fine too.
    char tiny[8];
    std::memset(tiny, 'x', sizeof tiny);
    const sk_core_ctx small = make_ctx(0, 1, tiny, sizeof tiny);
    EXPECT_EQ(k->run(&args, &small), SK_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(std::strlen(tiny), sizeof tiny - 1);
    const sk_core_ctx quiet = make_ctx(0, 1, nullptr, 0);
    EXPECT_EQ(k->run(&args, &quiet), SK_ERR_INVALID_ARGUMENT);
  }
}

TEST(KernelErrors, ElementwiseShapeAndDtypeMismatches) {
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {4, 5}).in(SK_DTYPE_F32, {6}).out(SK_DTYPE_F32, {4, 5});
    expect_invalid("add.f32", m, "does not broadcast");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {4, 5}).in(SK_DTYPE_F32, {2, 5}).out(SK_DTYPE_F32, {4, 5});
    expect_invalid("mul.f32", m, "does not broadcast");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {4, 5}).in(SK_DTYPE_F32, {5}).out(SK_DTYPE_F32, {4, 6});
    expect_invalid("add.f32", m, "out shape");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {4, 5}).in(SK_DTYPE_I32, {5}).out(SK_DTYPE_F32, {4, 5});
    expect_invalid("add.f32", m, "dtype");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {4, 5}).out(SK_DTYPE_F32, {4, 5});
    expect_invalid("mul.f32", m, "input");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {4, 5}).in(SK_DTYPE_F32, {5}).out(SK_DTYPE_F32, {4, 5});
    expect_invalid("silu_mul.f32", m, "differs");
  }
  {
    // An output whose rows all alias each other cannot be split between cores.
    ManualArgs m;
    m.in(SK_DTYPE_F32, {4, 5}).in(SK_DTYPE_F32, {4, 5}).out(SK_DTYPE_F32, {4, 5});
    m.output(0).stride[0] = 0;
    expect_invalid("add.f32", m, "overlap");
  }
}

TEST(KernelErrors, RowKernelMismatches) {
  const sk_rms_norm_attrs attrs{1e-5f};
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {3, 5}).in(SK_DTYPE_F32, {4}).out(SK_DTYPE_F32, {3, 5});
    m.attrs(attrs);
    expect_invalid("rms_norm.f32", m, "weight shape");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {3, 5}).in(SK_DTYPE_F32, {5}).out(SK_DTYPE_F32, {3, 5});
    expect_invalid("rms_norm.f32", m, "sk_rms_norm_attrs");
  }
  {
    const sk_rms_norm_attrs negative{-1.0f};
    ManualArgs m;
    m.in(SK_DTYPE_F32, {3, 5}).in(SK_DTYPE_F32, {5}).out(SK_DTYPE_F32, {3, 5});
    m.attrs(negative);
    expect_invalid("rms_norm.f32", m, "eps");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {3, 5}).in(SK_DTYPE_F32, {5}).out(SK_DTYPE_F32, {3, 5});
    m.attrs(attrs);
    m.input(0).stride[1] = 2;
    m.input(0).stride[0] = 10;
    expect_invalid("rms_norm.f32", m, "stride 1");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {4, 5}).out(SK_DTYPE_F32, {4, 6});
    expect_invalid("softmax.f32", m, "out shape");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {}).out(SK_DTYPE_F32, {});
    expect_invalid("softmax.f32", m, "rank");
  }
}

TEST(KernelErrors, MatmulMismatches) {
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {4, 5}).in(SK_DTYPE_F32, {3, 6}).out(SK_DTYPE_F32, {4, 3});
    expect_invalid("matmul.f32", m, "w shape");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {4, 5}).in(SK_DTYPE_F32, {3, 5}).out(SK_DTYPE_F32, {4, 4});
    expect_invalid("matmul.f32", m, "out shape");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {4, 5}).in(SK_DTYPE_F32, {5}).out(SK_DTYPE_F32, {4, 5});
    expect_invalid("matmul.f32", m, "rank");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {4, 4}).in(SK_DTYPE_F32, {4, 4}).out(SK_DTYPE_F32, {4, 4});
    m.output(0).data = m.input(0).data;
    expect_invalid("matmul.f32", m, "alias");
  }
}

TEST(KernelErrors, EmbeddingAndCopyMismatches) {
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {3}).in(SK_DTYPE_F32, {10, 4}).out(SK_DTYPE_F32, {3, 4});
    expect_invalid("embedding.f32", m, "dtype");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_I32, {3}).in(SK_DTYPE_F32, {10, 4}).out(SK_DTYPE_F32, {3, 5});
    expect_invalid("embedding.f32", m, "out shape");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_I32, {3}).in(SK_DTYPE_F32, {10, 4, 1}).out(SK_DTYPE_F32, {3, 4});
    expect_invalid("embedding.f32", m, "table shape");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {3, 4}).out(SK_DTYPE_I32, {3, 4});
    expect_invalid("copy", m, "dtype");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_I8, {3, 4}).out(SK_DTYPE_I8, {4, 3});
    expect_invalid("copy", m, "out shape");
  }
  {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {3, 4}).out(SK_DTYPE_F32, {3, 4});
    m.input(0).dtype = 99;
    expect_invalid("copy", m, "unknown dtype");
  }
}

TEST(KernelErrors, BadCoreContext) {
  const sk_kernel_desc* k = find_kernel("add.f32");
  ASSERT_NE(k, nullptr) << package().error;
  ManualArgs m;
  m.in(SK_DTYPE_F32, {8}).in(SK_DTYPE_F32, {8}).out(SK_DTYPE_F32, {8});
  const sk_kernel_args& args = m.args();
  char msg[128] = {};
  const sk_core_ctx ctx = make_ctx(3, 3, msg, sizeof msg);
  EXPECT_EQ(k->run(&args, &ctx), SK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(msg, "core 3 of 3"), nullptr) << msg;
  sk_access_range r[4];
  EXPECT_LT(k->access(&args, 0, 0, r, 4), 0);
  EXPECT_LT(k->access(&args, 2, 2, r, 4), 0);
}

// ---------------------------------------------------------------------------------------------
// Matmul prologue and ISA selection

TEST(KernelPackage, MatmulPrologueTouchesNoOperandData) {
  const sk_kernel_desc* k = find_kernel("matmul.f32");
  ASSERT_NE(k, nullptr) << package().error;
  ASSERT_NE(k->prologue, nullptr);
  ManualArgs m;
  m.in(SK_DTYPE_F32, {2, 64}).in(SK_DTYPE_F32, {100, 64}).out(SK_DTYPE_F32, {2, 100});
  std::memset(m.output(0).data, kSentinel, 2 * 100 * sizeof(float));
  const sk_kernel_args& args = m.args();
  for (int n : kCoreCounts) {
    for (int core = 0; core < n; ++core) {
      char msg[128] = {};
      const sk_core_ctx ctx = make_ctx(core, n, msg, sizeof msg);
      EXPECT_EQ(k->prologue(&args, &ctx), SK_OK) << msg;
    }
  }
  const auto* out = static_cast<const unsigned char*>(m.output(0).data);
  for (size_t b = 0; b < 2 * 100 * sizeof(float); ++b) ASSERT_EQ(out[b], kSentinel);
}

// The dot-product order of matmul is fixed per output element, so a row's result cannot depend
// on how many rows are multiplied with it (GEMV, one register tile, or the K-blocked path).
TEST(KernelPackage, MatmulRowsDoNotDependOnM) {
  const sk_kernel_desc* k = find_kernel("matmul.f32");
  ASSERT_NE(k, nullptr) << package().error;
  constexpr int64_t kM = 19;
  constexpr int64_t kK = 300;
  constexpr int64_t kN = 37;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(kM * kK);
  std::vector<float> w(kN * kK);
  for (float& v : x) v = uniform(rng);
  for (float& v : w) v = uniform(rng);
  const auto multiply = [&](int64_t row0, int64_t rows, int cores) {
    ManualArgs m;
    m.in(SK_DTYPE_F32, {rows, kK}).in(SK_DTYPE_F32, {kN, kK}).out(SK_DTYPE_F32, {rows, kN});
    std::memcpy(m.input(0).data, x.data() + row0 * kK, sizeof(float) * rows * kK);
    std::memcpy(m.input(1).data, w.data(), sizeof(float) * w.size());
    run_cores(*k, m.args(), cores);
    const auto* y = static_cast<const float*>(m.output(0).data);
    return std::vector<float>(y, y + rows * kN);
  };
  for (int level = 0; level < kNumIsaLevels; ++level) {
    IsaScope scope(level);
    if (!scope.ok()) continue;
    SCOPED_TRACE(isa_name(level));
    const std::vector<float> all = multiply(0, kM, 3);
    const std::vector<float> few = multiply(0, 3, 2);
    EXPECT_EQ(0, std::memcmp(few.data(), all.data(), few.size() * sizeof(float)));
    for (int64_t row = 0; row < kM; ++row) {
      const std::vector<float> one = multiply(row, 1, 2);
      EXPECT_EQ(0, std::memcmp(one.data(), all.data() + row * kN, kN * sizeof(float))) << "row " << row;
    }
  }
}

// Empty tensors may come without storage; K = 0 still defines out (all zeros).
TEST(KernelPackage, MatmulWithEmptyKAndNoStorageWritesZeros) {
  const sk_kernel_desc* k = find_kernel("matmul.f32");
  ASSERT_NE(k, nullptr) << package().error;
  ManualArgs m;
  m.in(SK_DTYPE_F32, {3, 0}).in(SK_DTYPE_F32, {10, 0}).out(SK_DTYPE_F32, {3, 10});
  m.input(0).data = nullptr;
  m.input(1).data = nullptr;
  std::memset(m.output(0).data, kSentinel, 3 * 10 * sizeof(float));
  const sk_kernel_args& args = m.args();
  for (int core = 0; core < 3; ++core) {
    char msg[128] = {};
    const sk_core_ctx ctx = make_ctx(core, 3, msg, sizeof msg);
    EXPECT_EQ(k->prologue(&args, &ctx), SK_OK) << msg;
    EXPECT_EQ(k->run(&args, &ctx), SK_OK) << msg;
  }
  const auto* y = static_cast<const float*>(m.output(0).data);
  for (int i = 0; i < 3 * 10; ++i) EXPECT_EQ(y[i], 0.0f) << i;
}

TEST(KernelPackage, ForcedIsaIsCappedAtTheCpu) {
  const auto force = package().force_isa;
  ASSERT_NE(force, nullptr);
  const int best = force(kNumIsaLevels - 1);
  EXPECT_GE(best, 0);
  EXPECT_LE(best, kNumIsaLevels - 1);
  EXPECT_EQ(force(0), 0);
  EXPECT_EQ(force(99), best);
  // Every level up to the CPU's is selectable, so one machine runs all the paths it has.
  for (int level = 0; level <= best; ++level) EXPECT_EQ(force(level), level);
  force(-1);
}

// Run by the separate ctest entry kernel_package_test.isa_env_scalar (SK_ISA=scalar).
TEST(IsaEnv, ScalarRequestIsHonoured) {
  const char* env = std::getenv("SK_ISA");
  if (env == nullptr || std::string(env) != "scalar") GTEST_SKIP() << "SK_ISA is not 'scalar'";
  ASSERT_NE(package().force_isa, nullptr);
  EXPECT_EQ(package().force_isa(-1), 0);
}

// Run by the ctest entry kernel_package_test.isa_env_avx512 (SK_ISA=avx512): the AVX-512 level
// without VNNI and BF16 is reachable on a CPU that has them.
TEST(IsaEnv, Avx512RequestIsHonoured) {
  const char* env = std::getenv("SK_ISA");
  if (env == nullptr || std::string(env) != "avx512") GTEST_SKIP() << "SK_ISA is not 'avx512'";
  const auto force = package().force_isa;
  ASSERT_NE(force, nullptr);
  const int best = force(99);
  EXPECT_EQ(force(-1), std::min(best, kIsaAvx512));
}

}  // namespace
