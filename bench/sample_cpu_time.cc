// sk_bench_sample_cpu_time: sample.f32 at batch 1 on one thread, timed in thread CPU time
// (CLOCK_THREAD_CPUTIME_ID), for machines too busy for sk_bench_kernels' wall-clock medians, and
// for packages side by side: each round times every package once, in turn, on the same rows.
//
//   build/bench/sk_bench_sample_cpu_time [--runs N] [--rounds R] [--row NAME] [--package PATH]...
//
// Rows: sk_bench_kernels' sampling rows over V = 131072 (uniform logits in [-12, 4], the "flat"
// row with a ~19k-token nucleus at top_p 0.9; "peaked": 40 logits in [8, 14] over that tail;
// "peaked2": the same drawn in float; top_k 50 with top_p 0.9 at temperature 0.8). Prints per package and row the
// minimum and median µs of each round, then the minima over all rounds. Without --package, the built package.
#include <dlfcn.h>
#include <superkernel/attrs_moe.h>
#include <superkernel/kernel_abi.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int64_t kVocab = 131072;

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Row {
  const char* name;
  std::vector<float> logits;
  sk_sample_attrs attrs;
};

// The logits of kernels_moe.cc's peaked_logits(1), the same draws: the flat row is its tail.
std::vector<Row> rows() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> tail(-12.0, 4.0);
  std::uniform_real_distribution<double> top(8.0, 14.0);
  std::vector<double> l(kVocab);
  for (double& x : l) x = tail(rng);
  std::vector<float> flat(l.begin(), l.end());
  for (int j = 0; j < 40; ++j) l[static_cast<size_t>(static_cast<int64_t>(rng() % kVocab))] = top(rng);
  std::vector<float> peaked(l.begin(), l.end());
  // The same construction drawn in float: other strong tokens, some of them in the nucleus
  // path's sampled profile (a case that once made an earlier version gather the flat prefix).
  std::mt19937 rng2(7);
  std::uniform_real_distribution<float> tail2(-12.0f, 4.0f);
  std::uniform_real_distribution<float> top2(8.0f, 14.0f);
  std::vector<float> peaked2(kVocab);
  for (float& x : peaked2) x = tail2(rng2);
  for (int j = 0; j < 40; ++j) peaked2[rng2() % kVocab] = top2(rng2);
  return {{"flat_p0.9", flat, {42, 1.0f, 0.9f, 0, 0}},
          {"peaked_p0.9", peaked, {42, 1.0f, 0.9f, 0, 0}},
          {"peaked2_p0.9", peaked2, {42, 1.0f, 0.9f, 0, 0}},
          {"flat_k50_p0.9", flat, {42, 0.8f, 0.9f, 50, 0}}};
}

const sk_kernel_desc* sample_kernel(const std::string& package) {
  void* h = dlopen(package.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    return nullptr;
  }
  const auto table_fn = reinterpret_cast<sk_kernel_package_table_fn>(dlsym(h, SK_KERNEL_PACKAGE_SYMBOL));
  const sk_kernel_package* table = table_fn != nullptr ? table_fn() : nullptr;
  for (uint32_t i = 0; table != nullptr && i < table->num_kernels; ++i) {
    if (std::strcmp(table->kernels[i].name, "sample.f32") == 0) return &table->kernels[i];
  }
  std::fprintf(stderr, "%s: no kernel sample.f32\n", package.c_str());
  return nullptr;
}

// µs of thread CPU time per call: {median, minimum} of `runs` calls after one warm-up call.
bool time_row(const sk_kernel_desc* kernel, Row& row, int runs, double* median, double* minimum, int32_t* token) {
  sk_tensor_arg in[2] = {};
  in[0].dtype = SK_DTYPE_F32;
  in[0].rank = 2;
  in[0].shape[0] = 1;
  in[0].shape[1] = kVocab;
  in[0].stride[0] = kVocab;
  in[0].stride[1] = 1;
  in[0].data = row.logits.data();
  int64_t step = 7;
  in[1].dtype = SK_DTYPE_I64;
  in[1].rank = 1;
  in[1].shape[0] = 1;
  in[1].stride[0] = 1;
  in[1].data = &step;
  sk_tensor_arg out{};
  out.dtype = SK_DTYPE_I32;
  out.rank = 1;
  out.shape[0] = 1;
  out.stride[0] = 1;
  out.data = token;
  sk_kernel_args args{};
  args.inputs = in;
  args.num_inputs = 2;
  args.outputs = &out;
  args.num_outputs = 1;
  args.attrs = &row.attrs;
  args.attrs_size = sizeof row.attrs;
  // The per-core scratch the kernel asks for (one core here), 64-byte aligned.
  std::vector<unsigned char> workspace;
  if (kernel->workspace_size != nullptr) {
    const uint64_t bytes = kernel->workspace_size(&args);
    workspace.resize(static_cast<size_t>(bytes) + 64);
    args.workspace = workspace.data() + (64 - reinterpret_cast<uintptr_t>(workspace.data()) % 64) % 64;
    args.workspace_size = bytes;
  }
  char message[256] = {};
  sk_core_ctx core{};
  core.num_cores = 1;
  core.error_message = message;
  core.error_capacity = sizeof message;
  if (kernel->run(&args, &core) != SK_OK) {
    std::fprintf(stderr, "sample.f32: %s\n", message);
    return false;
  }
  std::vector<double> t(static_cast<size_t>(std::max(1, runs)));
  for (double& s : t) {
    const double start = thread_seconds();
    kernel->run(&args, &core);
    s = thread_seconds() - start;
  }
  std::sort(t.begin(), t.end());
  *median = 1e6 * t[t.size() / 2];
  *minimum = 1e6 * t[0];
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 31;
  int rounds = 3;
  std::vector<std::string> packages;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) {
      runs = std::max(1, std::atoi(argv[i + 1]));
    } else if (std::strcmp(argv[i], "--rounds") == 0) {
      rounds = std::max(1, std::atoi(argv[i + 1]));
    } else if (std::strcmp(argv[i], "--row") == 0) {
      only = argv[i + 1];
    } else if (std::strcmp(argv[i], "--package") == 0) {
      packages.emplace_back(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (packages.empty()) packages.emplace_back(SK_BUILTIN_PACKAGE_PATH);
  std::vector<const sk_kernel_desc*> kernels;
  for (const std::string& p : packages) {
    kernels.push_back(sample_kernel(p));
    if (kernels.back() == nullptr) return 1;
  }
  std::vector<Row> rs = rows();
  if (!only.empty()) {
    std::erase_if(rs, [&](const Row& r) { return only != r.name; });
    if (rs.empty()) {
      std::fprintf(stderr, "no row %s (rows: flat_p0.9, peaked_p0.9, peaked2_p0.9, flat_k50_p0.9)\n", only.c_str());
      return 2;
    }
  }
  std::vector<double> best(packages.size() * rs.size(), 1e30);
  for (int round = 1; round <= rounds; ++round) {
    for (size_t r = 0; r < rs.size(); ++r) {
      for (size_t p = 0; p < packages.size(); ++p) {
        double median = 0.0, minimum = 0.0;
        int32_t token = -1;
        if (!time_row(kernels[p], rs[r], runs, &median, &minimum, &token)) return 1;
        best[p * rs.size() + r] = std::min(best[p * rs.size() + r], minimum);
        std::printf("round %d %-14s package %zu: median %8.1f min %8.1f us (token %d)\n", round, rs[r].name, p, median,
                    minimum, token);
      }
    }
  }
  for (size_t r = 0; r < rs.size(); ++r) {
    std::printf("%-14s", rs[r].name);
    for (size_t p = 0; p < packages.size(); ++p) std::printf("  package %zu: %8.1f us", p, best[p * rs.size() + r]);
    if (packages.size() == 2) std::printf("  ratio 1/0: %.2f", best[rs.size() + r] / best[r]);
    std::printf("\n");
  }
  for (size_t p = 0; p < packages.size(); ++p) std::printf("package %zu: %s\n", p, packages[p].c_str());
  return 0;
}
