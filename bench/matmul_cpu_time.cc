// sk_bench_matmul_cpu_time: the matmul kernels and oneDNN's matmul on one thread, timed in thread
// CPU time (CLOCK_THREAD_CPUTIME_ID) rather than wall time, for machines too busy for the
// wall-clock medians of sk_bench_kernels: time the thread spends descheduled is not counted
// (caches and a busy sibling still are, so compare minima of alternating runs).
//
//   build/bench/sk_bench_matmul_cpu_time bf16 16 4096 4096 [--runs 5] [--rounds 3] [--package PATH]
//
// Prints, per round, the median and minimum µs per call of ours and of oneDNN (oneDNN: f32, bf16
// activations for bf16 weights, u8 activations with per-column scales for s8 weights), then the
// minimum over all rounds and their ratio. `TYPE` is f32, bf16, f16, w8a8, w8a8_dyn, w4 or w4a8_dyn
// (4-bit weights with f16 scales, group --group, default 128). oneDNN has no dynamic quantisation
// and no 4-bit weights: its column then shows its s8 matmul (w8a8) on the shape.
#include <dlfcn.h>
#include <omp.h>
#include <superkernel/kernel_abi.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "aligned_bytes.h"

namespace {

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Stats {
  double median = 0.0;
  double min = 0.0;
};

Stats time_calls(const std::function<void()>& call, int runs) {
  call();  // warm-up
  std::vector<double> t(static_cast<size_t>(std::max(1, runs)));
  for (double& seconds : t) {
    const double start = thread_seconds();
    call();
    seconds = thread_seconds() - start;
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[0]};
}

struct Operand {
  sk::bench::AlignedBytes bytes;  // 64-byte aligned, as the runtime aligns tensors
  sk_tensor_arg arg{};
};

Operand random_operand(int32_t dtype, std::vector<int64_t> shape, uint32_t seed) {
  Operand o;
  o.arg.dtype = dtype;
  o.arg.rank = static_cast<int32_t>(shape.size());
  int64_t n = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    o.arg.shape[d] = shape[d];
    o.arg.stride[d] = n;
    n *= shape[d];
  }
  o.bytes.resize(static_cast<size_t>(n * sk_dtype_size(dtype)));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float v = u(rng);
    if (dtype == SK_DTYPE_F32) {
      std::memcpy(o.bytes.data() + 4 * i, &v, 4);
    } else if (dtype == SK_DTYPE_F16) {
      // Small positive values (scales of 4-bit weights, or f16 weights in [0, 1)).
      const auto h = static_cast<uint16_t>(0x2000 + (rng() & 0x3FF));
      std::memcpy(o.bytes.data() + 2 * i, &h, 2);
    } else if (dtype == SK_DTYPE_BF16) {
      uint32_t bits = 0;
      std::memcpy(&bits, &v, 4);
      const auto h = static_cast<uint16_t>(bits >> 16);
      std::memcpy(o.bytes.data() + 2 * i, &h, 2);
    } else {
      o.bytes[static_cast<size_t>(i)] = static_cast<unsigned char>(static_cast<int8_t>(v * 127.0f));
    }
  }
  o.arg.data = o.bytes.data();
  return o;
}

// Ours: one core's call (num_cores = 1) of the package's kernel.
bool time_ours(const std::string& package, const std::string& type, int64_t m, int64_t n, int64_t k, int64_t group,
               int runs, Stats* out) {
  void* h = dlopen(package.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    return false;
  }
  const auto table_fn = reinterpret_cast<sk_kernel_package_table_fn>(dlsym(h, SK_KERNEL_PACKAGE_SYMBOL));
  const std::string name = type == "f32" ? "matmul.f32" : "matmul." + type;
  const sk_kernel_desc* kernel = nullptr;
  const sk_kernel_package* table = table_fn != nullptr ? table_fn() : nullptr;
  for (uint32_t i = 0; table != nullptr && i < table->num_kernels; ++i) {
    if (name == table->kernels[i].name) kernel = &table->kernels[i];
  }
  if (kernel == nullptr) {
    std::fprintf(stderr, "%s: no kernel %s\n", package.c_str(), name.c_str());
    return false;
  }
  std::vector<Operand> in;
  const bool w4 = type == "w4" || type == "w4a8_dyn";
  if (type != "w8a8") in.push_back(random_operand(SK_DTYPE_F32, {m, k}, 1));
  if (type == "w8a8") {
    in.push_back(random_operand(SK_DTYPE_I8, {m, k}, 1));
    in.push_back(random_operand(SK_DTYPE_F32, {m}, 2));
  }
  if (w4) {
    // 4-bit weights [N, K/2] with f16 scales [K / group, N] (symmetric).
    in.push_back(random_operand(SK_DTYPE_I8, {n, k / 2}, 3));
    in.push_back(random_operand(SK_DTYPE_F16, {k / group, n}, 4));
  } else {
    const int32_t wt = type == "f32"    ? SK_DTYPE_F32
                       : type == "bf16" ? SK_DTYPE_BF16
                       : type == "f16"  ? SK_DTYPE_F16
                                        : SK_DTYPE_I8;
    in.push_back(random_operand(wt, {n, k}, 3));
    if (wt == SK_DTYPE_I8) in.push_back(random_operand(SK_DTYPE_F32, {n}, 4));
  }
  Operand y = random_operand(SK_DTYPE_F32, {m, n}, 5);
  std::vector<sk_tensor_arg> inputs;
  for (const Operand& o : in) inputs.push_back(o.arg);
  sk_kernel_args args{};
  args.inputs = inputs.data();
  args.num_inputs = static_cast<int32_t>(inputs.size());
  args.outputs = &y.arg;
  args.num_outputs = 1;
  char message[256] = {};
  sk_core_ctx core{};
  core.num_cores = 1;
  core.error_message = message;
  core.error_capacity = sizeof message;
  bool ok = true;
  *out = time_calls([&] { ok = ok && kernel->run(&args, &core) == SK_OK; }, runs);
  if (!ok) std::fprintf(stderr, "%s: %s\n", name.c_str(), message);
  return ok;
}

// oneDNN on this thread (one OpenMP thread), weights reordered once to the layout it prefers.
bool time_onednn(const std::string& type, int64_t m, int64_t n, int64_t k, int runs, Stats* out) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  try {
    omp_set_num_threads(1);
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    // 4-bit weights: oneDNN has none; its s8 matmul on the shape is the point of comparison.
    const bool int8 = type == "w8a8" || type == "w8a8_dyn" || type == "w4" || type == "w4a8_dyn";
    const dt src = type == "bf16" ? dt::bf16 : type == "f16" ? dt::f16 : int8 ? dt::u8 : dt::f32;
    const dt wei = type == "bf16" ? dt::bf16 : type == "f16" ? dt::f16 : int8 ? dt::s8 : dt::f32;
    dnnl::primitive_attr attr;
    // Per-column scales given when the primitive is created (as sk_bench_kernels does): oneDNN's
    // run-time scales (DNNL_RUNTIME_F32_VAL) take a path about 4x slower.
    if (int8) attr.set_output_scales(2, std::vector<float>(static_cast<size_t>(n), 0.01f));
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc({{m, k}, src, tag::ab}, {{k, n}, wei, tag::any}, {{m, n}, dt::f32, tag::ab}), attr, eng);
    dnnl::memory x(pd.src_desc(), eng);
    dnnl::memory w(pd.weights_desc(), eng);
    dnnl::memory y(pd.dst_desc(), eng);
    std::memset(x.get_data_handle(), 1, pd.src_desc().get_size());
    std::memset(w.get_data_handle(), 1, pd.weights_desc().get_size());
    std::unordered_map<int, dnnl::memory> margs = {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}};
    const dnnl::matmul prim(pd);
    std::fprintf(stderr, "oneDNN %s: %s\n", type.c_str(), pd.impl_info_str());
    *out = time_calls(
        [&] {
          prim.execute(strm, margs);
          strm.wait();
        },
        runs);
    return true;
  } catch (const dnnl::error& e) {
    std::fprintf(stderr, "oneDNN: %s\n", e.what());
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: %s f32|bf16|f16|w8a8|w8a8_dyn|w4|w4a8_dyn M N K [--runs R] [--rounds N] [--group G] "
                 "[--package PATH]\n",
                 argv[0]);
    return 2;
  }
  const std::string type = argv[1];
  const int64_t m = std::atoll(argv[2]);
  const int64_t n = std::atoll(argv[3]);
  const int64_t k = std::atoll(argv[4]);
  int runs = 5;
  int rounds = 3;
  int64_t group = 128;
  std::string package = SK_BUILTIN_PACKAGE_PATH;
  for (int i = 5; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--runs") runs = std::max(1, std::atoi(argv[i + 1]));
    if (flag == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    if (flag == "--package") package = argv[i + 1];
    if (flag == "--group") group = std::max(32, std::atoi(argv[i + 1]));
  }
  double best_ours = 1e30;
  double best_dnn = 1e30;
  for (int r = 0; r < rounds; ++r) {
    Stats ours;
    Stats dnn;
    if (!time_ours(package, type, m, n, k, group, runs, &ours)) return 1;
    const bool have_dnn = time_onednn(type, m, n, k, runs, &dnn);
    std::printf("%s %lldx%lldx%lld round %d: ours median %.1f min %.1f us", type.c_str(), static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k), r + 1, 1e6 * ours.median, 1e6 * ours.min);
    if (have_dnn) std::printf("; oneDNN median %.1f min %.1f us", 1e6 * dnn.median, 1e6 * dnn.min);
    std::printf("\n");
    best_ours = std::min(best_ours, ours.min);
    if (have_dnn) best_dnn = std::min(best_dnn, dnn.min);
  }
  if (best_dnn >= 1e30) {
    // No round had a oneDNN primitive for the type (bf16 / f16 matmul on CPUs without them).
    std::printf("%s %lldx%lldx%lld: ours %.1f us, oneDNN n/a (minima over %d rounds)\n", type.c_str(),
                static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), 1e6 * best_ours,
                rounds);
    return 0;
  }
  std::printf("%s %lldx%lldx%lld: ours %.1f us, oneDNN %.1f us, ours/oneDNN %.2f (minima over %d rounds)\n",
              type.c_str(), static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
              1e6 * best_ours, 1e6 * best_dnn, best_ours / best_dnn, rounds);
  return 0;
}
