// The collective kernels under `mpirun -np 2` (or any number of ranks): each one against a
// single-process reference computed from every rank's inputs (which every rank can generate), for
// several sizes and dtypes, in every execution mode, bit for bit; fused between compute ops in
// one super kernel; and the errors that stop a call before any message leaves.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <immintrin.h>

#include <cmath>

#include "mpi_test_main.h"
#include "superkernel/comm.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

// Conversions of the reference, independent of the kernels' own: bf16 by choosing the nearer of
// the two bf16 neighbours in double (ties to the even one), f16 by the F16C instructions.
float bits_to_f32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint16_t to_bf16(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  if (std::isnan(v)) return static_cast<uint16_t>((b >> 16) | 0x40);
  const uint32_t lo = b & 0xffff0000u, hi = lo + 0x10000u;
  const double dlo = std::fabs(double(v) - double(bits_to_f32(lo))),
               dhi = std::fabs(double(bits_to_f32(hi)) - double(v));
  if (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1u) == 0)) return static_cast<uint16_t>(lo >> 16);
  return static_cast<uint16_t>(hi >> 16);
}
float from_bf16(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }
// (Not _cvtss_sh / _cvtsh_ss: clang's are macros with compound literals, which -Wpedantic flags in
// C++.)
__attribute__((target("f16c"))) uint16_t to_f16(float v) {
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(v), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) float from_f16(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

const std::vector<ExecutionMode> kModes = {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel};

// Rank r's input: `count` elements of `dtype` from a seed every rank knows, with magnitudes
// spread over a few orders, so that the order of a floating-point sum shows in the bits.
std::vector<uint8_t> rank_data(DType dtype, int64_t count, int32_t rank, uint32_t seed) {
  std::mt19937 rng(seed * 7919u + static_cast<uint32_t>(rank) * 104729u + 1u);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-6, 6);
  std::vector<uint8_t> out(static_cast<size_t>(count) * dtype_size(dtype));
  for (int64_t i = 0; i < count; ++i) {
    const float v = std::ldexp(mant(rng), exp(rng));
    switch (dtype) {
      case DType::kF32:
        std::memcpy(out.data() + i * 4, &v, 4);
        break;
      case DType::kBF16: {
        const uint16_t h = to_bf16(v);
        std::memcpy(out.data() + i * 2, &h, 2);
        break;
      }
      case DType::kF16: {
        const uint16_t h = to_f16(v);
        std::memcpy(out.data() + i * 2, &h, 2);
        break;
      }
      case DType::kI32: {
        const int32_t k = static_cast<int32_t>(rng()) >> 1;  // large values: the sum wraps
        std::memcpy(out.data() + i * 4, &k, 4);
        break;
      }
      default: {
        const auto b = static_cast<uint8_t>(rng());
        for (size_t j = 0; j < dtype_size(dtype); ++j) out[static_cast<size_t>(i) * dtype_size(dtype) + j] = b + j;
        break;
      }
    }
  }
  return out;
}

// The reference sum: in rank order, accumulated in f32 (i32 wrapping), written as one process
// would without any of the kernels' code paths.
std::vector<uint8_t> reference_sum(DType dtype, int64_t count, int32_t ranks, uint32_t seed) {
  std::vector<std::vector<uint8_t>> data;
  for (int32_t r = 0; r < ranks; ++r) data.push_back(rank_data(dtype, count, r, seed));
  std::vector<uint8_t> out(static_cast<size_t>(count) * dtype_size(dtype));
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == DType::kI32) {
      uint32_t acc = 0;
      for (int32_t r = 0; r < ranks; ++r) {
        uint32_t v;
        std::memcpy(&v, data[r].data() + i * 4, 4);
        acc = r == 0 ? v : acc + v;
      }
      std::memcpy(out.data() + i * 4, &acc, 4);
      continue;
    }
    float acc = 0;
    for (int32_t r = 0; r < ranks; ++r) {
      float v;
      if (dtype == DType::kF32) {
        std::memcpy(&v, data[r].data() + i * 4, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, data[r].data() + i * 2, 2);
        v = dtype == DType::kBF16 ? from_bf16(h) : from_f16(h);
      }
      acc = r == 0 ? v : acc + v;
    }
    if (dtype == DType::kF32) {
      std::memcpy(out.data() + i * 4, &acc, 4);
    } else {
      const uint16_t h = dtype == DType::kBF16 ? to_bf16(acc) : to_f16(acc);
      std::memcpy(out.data() + i * 2, &h, 2);
    }
  }
  return out;
}

std::vector<uint8_t> slice_bytes(const std::vector<uint8_t>& v, size_t begin, size_t bytes) {
  return std::vector<uint8_t>(v.begin() + static_cast<std::ptrdiff_t>(begin),
                              v.begin() + static_cast<std::ptrdiff_t>(begin + bytes));
}

std::vector<uint8_t> read(Executable& exe, const std::string& name) {
  auto t = exe.tensor(name);
  if (!t) return {};
  std::vector<uint8_t> out(t->bytes());
  if (!exe.read(name, out.data(), out.size())) return {};
  return out;
}

// Runs `g` in `mode` with the given inputs; the outputs' bytes by name order of `outputs`.
std::vector<std::vector<uint8_t>> run(const Graph& g, ExecutionMode mode,
                                      const std::vector<std::pair<std::string, std::vector<uint8_t>>>& inputs,
                                      const std::vector<std::string>& outputs, const CompileReport** report = nullptr,
                                      std::unique_ptr<Executable>* keep = nullptr) {
  auto exe = g_runtime->compile(g, CompileOptions::for_mode(mode));
  EXPECT_TRUE(exe) << exe.status().to_string();
  if (!exe) return {};
  for (const auto& [name, bytes] : inputs) EXPECT_TRUE((*exe)->set_input(name, bytes.data(), bytes.size()));
  Status s = (*exe)->run();
  EXPECT_TRUE(s) << execution_mode_name(mode) << ": " << s.to_string();
  std::vector<std::vector<uint8_t>> out;
  for (const std::string& name : outputs) out.push_back(read(**exe, name));
  if (report) *report = &(*exe)->report();
  if (keep) *keep = std::move(*exe);
  return out;
}

// Runs `g` (input "x", output "y") in every mode and expects `want`'s bytes from each.
void expect_y_in_every_mode(const Graph& g, const std::vector<uint8_t>& x, const std::vector<uint8_t>& want) {
  for (ExecutionMode mode : kModes) {
    auto got = run(g, mode, {{"x", x}}, {"y"});
    ASSERT_EQ(got.size(), 1u) << execution_mode_name(mode);
    EXPECT_TRUE(got[0] == want) << execution_mode_name(mode);
  }
}

struct SizeCase {
  DType dtype;
  Shape shape;
};

const std::vector<SizeCase> kReductionCases = {
    {DType::kF32, {1}},     {DType::kF32, {17}},     {DType::kF32, {3, 333}}, {DType::kF32, {4099}},
    {DType::kBF16, {1000}}, {DType::kF16, {4, 129}}, {DType::kI32, {513}},    {DType::kF32, {2, 4, 16}},
};

TEST(Collectives, AllReduceMatchesTheRankOrderSum) {
  const int32_t n = g_comm->size(), me = g_comm->rank();
  uint32_t seed = 1;
  for (const SizeCase& c : kReductionCases) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " " + shape_to_string(c.shape));
    const int64_t count = shape_numel(c.shape);
    Graph g("all_reduce");
    Tensor x = g.input("x", c.dtype, c.shape);
    g.output(comm::all_reduce(g, g_comm->group(), x, "sum"), "y");
    const auto want = reference_sum(c.dtype, count, n, seed);
    expect_y_in_every_mode(g, rank_data(c.dtype, count, me, seed), want);
    ++seed;
  }
}

TEST(Collectives, ReduceScatterGivesEachRankItsBlockOfTheSum) {
  const int32_t n = g_comm->size(), me = g_comm->rank();
  uint32_t seed = 100;
  for (const SizeCase& c : kReductionCases) {
    Shape shape = c.shape;
    shape[0] *= n;  // n blocks along dim 0
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " " + shape_to_string(shape));
    const int64_t count = shape_numel(shape);
    Graph g("reduce_scatter");
    Tensor x = g.input("x", c.dtype, shape);
    g.output(comm::reduce_scatter(g, g_comm->group(), x), "y");
    const auto sum = reference_sum(c.dtype, count, n, seed);
    const size_t block = sum.size() / static_cast<size_t>(n);
    const auto want = slice_bytes(sum, block * static_cast<size_t>(me), block);
    expect_y_in_every_mode(g, rank_data(c.dtype, count, me, seed), want);
    ++seed;
  }
}

const std::vector<SizeCase> kMoveCases = {
    {DType::kF32, {1}}, {DType::kBF16, {5, 7}}, {DType::kI8, {3, 1000}}, {DType::kI32, {64}}, {DType::kI64, {2, 9}},
};

TEST(Collectives, AllGatherConcatenatesTheRanksInOrder) {
  const int32_t n = g_comm->size(), me = g_comm->rank();
  uint32_t seed = 200;
  for (const SizeCase& c : kMoveCases) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " " + shape_to_string(c.shape));
    const int64_t count = shape_numel(c.shape);
    Graph g("all_gather");
    Tensor x = g.input("x", c.dtype, c.shape);
    g.output(comm::all_gather(g, g_comm->group(), x), "y");
    std::vector<uint8_t> want;
    for (int32_t r = 0; r < n; ++r) {
      auto part = rank_data(c.dtype, count, r, seed);
      want.insert(want.end(), part.begin(), part.end());
    }
    expect_y_in_every_mode(g, rank_data(c.dtype, count, me, seed), want);
    ++seed;
  }
}

TEST(Collectives, AllToAllSendsBlockQToRankQ) {
  const int32_t n = g_comm->size(), me = g_comm->rank();
  uint32_t seed = 300;
  for (const SizeCase& c : kMoveCases) {
    Shape shape = c.shape;
    shape[0] *= n;
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " " + shape_to_string(shape));
    const int64_t count = shape_numel(shape);
    const size_t block = static_cast<size_t>(count) * dtype_size(c.dtype) / static_cast<size_t>(n);
    Graph g("all_to_all");
    Tensor x = g.input("x", c.dtype, shape);
    g.output(comm::all_to_all(g, g_comm->group(), x), "y");
    std::vector<uint8_t> want;
    for (int32_t s = 0; s < n; ++s) {
      auto part = slice_bytes(rank_data(c.dtype, count, s, seed), block * static_cast<size_t>(me), block);
      want.insert(want.end(), part.begin(), part.end());
    }
    expect_y_in_every_mode(g, rank_data(c.dtype, count, me, seed), want);
    ++seed;
  }
}

// Rows of (rank, group) blocks with counts every rank can derive: rank s sends rank q
// counts(s)[q * G + g] rows of group g, each row [D] f32 holding (s, q, g, index) in its values.
std::vector<int32_t> a2av_counts(int32_t sender, int32_t n, int32_t groups, uint32_t seed) {
  std::mt19937 rng(seed + static_cast<uint32_t>(sender) * 31u);
  std::vector<int32_t> c(static_cast<size_t>(n * groups));
  for (int32_t& v : c) v = static_cast<int32_t>(rng() % 4);  // 0..3 rows, zeros included
  return c;
}

float a2av_value(int32_t s, int32_t q, int32_t g, int32_t i, int32_t col) {
  return static_cast<float>(s * 1000 + q * 100 + g * 10 + i) + static_cast<float>(col) / 8.0f;
}

// Rows of `counts` laid out in `layout` for (this, other) = (s, q) as sender or (s, q) as receiver.
std::vector<float> a2av_rows(const std::vector<int32_t>& counts, int32_t n, int32_t groups, int32_t layout,
                             int64_t rows_cap, int64_t d, bool as_sender, int32_t me) {
  std::vector<float> out(static_cast<size_t>(rows_cap * d), 0.0f);
  int64_t at = 0;
  auto emit = [&](int32_t r, int32_t g) {
    for (int32_t i = 0; i < counts[static_cast<size_t>(r * groups + g)]; ++i, ++at)
      for (int64_t col = 0; col < d; ++col)
        out[static_cast<size_t>(at * d + col)] = as_sender ? a2av_value(me, r, g, i, static_cast<int32_t>(col))
                                                           : a2av_value(r, me, g, i, static_cast<int32_t>(col));
  };
  if (layout == SK_COMM_RANK_MAJOR) {
    for (int32_t r = 0; r < n; ++r)
      for (int32_t g = 0; g < groups; ++g) emit(r, g);
  } else {
    for (int32_t g = 0; g < groups; ++g)
      for (int32_t r = 0; r < n; ++r) emit(r, g);
  }
  return out;
}

std::vector<uint8_t> as_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
std::vector<uint8_t> as_bytes(const std::vector<int32_t>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(Collectives, AllToAllVMovesEveryBlockInBothLayouts) {
  const int32_t n = g_comm->size(), me = g_comm->rank();
  const int64_t d = 5;
  uint32_t seed = 400;
  for (int32_t groups : {1, 3}) {
    for (int32_t in_layout : {SK_COMM_RANK_MAJOR, SK_COMM_GROUP_MAJOR}) {
      for (int32_t out_layout : {SK_COMM_RANK_MAJOR, SK_COMM_GROUP_MAJOR}) {
        SCOPED_TRACE("groups " + std::to_string(groups) + " layouts " + std::to_string(in_layout) + "," +
                     std::to_string(out_layout));
        const int64_t cap = 3LL * n * groups + 2;  // room for the most any rank can receive, and spare rows
        std::vector<int32_t> send = a2av_counts(me, n, groups, seed);
        std::vector<int32_t> recv(static_cast<size_t>(n * groups)), group_counts(static_cast<size_t>(groups), 0);
        for (int32_t s = 0; s < n; ++s) {
          const std::vector<int32_t> theirs = a2av_counts(s, n, groups, seed);
          for (int32_t g = 0; g < groups; ++g) {
            recv[static_cast<size_t>(s * groups + g)] = theirs[static_cast<size_t>(me * groups + g)];
            group_counts[static_cast<size_t>(g)] += theirs[static_cast<size_t>(me * groups + g)];
          }
        }
        Graph g("all_to_all_v");
        Tensor x = g.input("x", DType::kF32, {cap, d});
        Tensor counts = g.input("send_counts", DType::kI32, {static_cast<int64_t>(n) * groups});
        comm::AllToAllV out =
            comm::all_to_all_v(g, g_comm->group(), x, counts, cap, groups, in_layout, out_layout, "a2av");
        g.output(out.y, "y");
        g.output(out.recv_counts, "recv_counts");
        g.output(out.group_counts, "group_counts");
        const auto x_rows = a2av_rows(send, n, groups, in_layout, cap, d, true, me);
        const auto want_y = a2av_rows(recv, n, groups, out_layout, cap, d, false, me);
        for (ExecutionMode mode : kModes) {
          auto got = run(g, mode, {{"x", as_bytes(x_rows)}, {"send_counts", as_bytes(send)}},
                         {"y", "recv_counts", "group_counts"});
          ASSERT_EQ(got.size(), 3u);
          EXPECT_TRUE(got[0] == as_bytes(want_y)) << execution_mode_name(mode);
          EXPECT_TRUE(got[1] == as_bytes(recv)) << execution_mode_name(mode);
          EXPECT_TRUE(got[2] == as_bytes(group_counts)) << execution_mode_name(mode);
        }
        ++seed;
      }
    }
  }
}

// Compute, all-reduce, compute, all-gather in one scope: one super kernel per rank, with the
// results of every mode the same bits, and the reference's.
TEST(Collectives, FuseBetweenComputeOpsInOneSuperKernel) {
  const int32_t n = g_comm->size(), me = g_comm->rank();
  const int64_t cols = 40;
  Graph g("fused");
  Tensor x = g.input("x", DType::kF32, {2, cols});
  std::vector<float> scale(static_cast<size_t>(cols), 0.5f);
  Tensor c = g.constant_f32("c", {cols}, scale);
  {
    SuperKernelScope scope(g, "block");
    Tensor partial = mul(g, x, c, "partial");
    Tensor sum = comm::all_reduce(g, g_comm->group(), partial, "sum");
    Tensor h = add(g, sum, x, "residual");
    g.output(comm::all_gather(g, g_comm->group(), h, "gather"), "y");
  }
  const auto mine = rank_data(DType::kF32, 2 * cols, me, 7);
  // Reference: sum in rank order of 0.5 * x_r, plus this rank's x, gathered over ranks.
  std::vector<float> want;
  std::vector<std::vector<float>> xs(static_cast<size_t>(n), std::vector<float>(static_cast<size_t>(2 * cols)));
  for (int32_t r = 0; r < n; ++r) std::memcpy(xs[r].data(), rank_data(DType::kF32, 2 * cols, r, 7).data(), 8 * cols);
  for (int32_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < 2 * cols; ++i) {
      float acc = 0;
      for (int32_t s = 0; s < n; ++s) acc = s == 0 ? xs[s][i] * 0.5f : acc + xs[s][i] * 0.5f;
      want.push_back(acc + xs[r][i]);
    }
  std::vector<std::vector<uint8_t>> results;
  for (ExecutionMode mode : kModes) {
    const CompileReport* report = nullptr;
    std::unique_ptr<Executable> exe;
    auto got = run(g, mode, {{"x", mine}}, {"y"}, &report, &exe);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0] == as_bytes(want)) << execution_mode_name(mode);
    if (mode == ExecutionMode::kSuperKernel) {
      ASSERT_EQ(report->segments.size(), 1u);
      EXPECT_EQ(report->num_launches, 1u);
      EXPECT_EQ(report->segments[0].collectives.size(), 2u);
    }
  }
}

// The lines of core `core`'s instructions in the printed program of one launch.
std::vector<std::string> core_program(const std::string& program, int core) {
  std::vector<std::string> lines;
  std::istringstream in(program);
  std::string line;
  bool mine = false;
  while (std::getline(in, line)) {
    if (line.rfind("  core ", 0) == 0) {
      mine = line == "  core " + std::to_string(core) + ":";
    } else if (mine && line.rfind("    ", 0) == 0) {
      lines.push_back(line);
    }
  }
  return lines;
}

size_t first_line_with(const std::vector<std::string>& lines, const std::string& text) {
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].find(text) != std::string::npos) return i;
  return lines.size();
}

// Two cores per rank, the collective on a stream of its own with one core (LimitCoreNum 1), the
// main stream's work beside it: the collective runs on its partition's core; core 0 computes
// what does not depend on it without waiting for that core, and waits for it (like for any
// producer) only where it consumes the result.
TEST(Collectives, RunOnTheirPartitionsCoreWhileTheOtherCoresCompute) {
  const int32_t n = g_comm->size(), me = g_comm->rank();
  RuntimeOptions ro;
  ro.num_cores = 2;
  ro.allow_oversubscribe = true;  // two ranks x two cores on a 2-CPU machine: correct, only slower
  ro.pin_threads = false;
  ro.spin_us = 20;
  ro.watchdog_seconds = 20.0;
  auto rt = Runtime::create(ro);
  ASSERT_TRUE(rt) << rt.status().to_string();
  ASSERT_TRUE(g_comm->load_kernels(**rt));
  const int64_t cols = 64;
  Graph g("overlap");
  Tensor x = g.input("x", DType::kF32, {4, cols});
  Stream side = g.create_stream("comm");
  Event ready = g.create_event("ready"), reduced = g.create_event("reduced");
  Tensor sum, busy;
  {
    SuperKernelScope scope(g, "block", "stream-fusion=1");
    Tensor h = add(g, x, x, "h");
    g.record(ready);
    {
      StreamScope on(g, side);
      LimitCoreNum limit(g, 1, 1);
      g.wait(ready);
      sum = comm::all_reduce(g, g_comm->group(), h, "sum");
      g.record(reduced);
    }
    busy = mul(g, h, h, "independent");
    g.wait(reduced);
    g.output(add(g, busy, sum, "join"), "y");
  }
  auto exe = (*rt)->compile(g, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
  ASSERT_TRUE(exe) << exe.status().to_string();
  const CompileReport& r = (*exe)->report();
  ASSERT_EQ(r.segments.size(), 1u);
  ASSERT_EQ(r.segments[0].collectives.size(), 1u);
  EXPECT_NE(r.segments[0].collectives[0].find("on core 1 (stream 'comm')"), std::string::npos)
      << r.segments[0].collectives[0];
  const std::vector<std::string> core0 = core_program(r.program_text, 0);
  const size_t independent = first_line_with(core0, "# independent"), join = first_line_with(core0, "# join");
  const size_t wait_for_1 = first_line_with(core0, "WAIT core 1");
  ASSERT_LT(independent, core0.size()) << r.program_text;
  EXPECT_LT(independent, wait_for_1) << "core 0 waited for the collective's core before independent work\n"
                                     << r.program_text;
  EXPECT_LT(wait_for_1, join) << "core 0 did not wait for the collective before its consumer\n" << r.program_text;
  const std::vector<std::string> core1 = core_program(r.program_text, 1);
  EXPECT_LT(first_line_with(core1, "# sum"), core1.size()) << r.program_text;
  // And it computes the reference: (2x)^2 + sum over ranks of 2x_r, in rank order.
  const auto mine = rank_data(DType::kF32, 4 * cols, me, 21);
  ASSERT_TRUE((*exe)->set_input("x", mine.data(), mine.size()));
  Status s = (*exe)->run();
  ASSERT_TRUE(s) << s.to_string();
  std::vector<std::vector<float>> xs(static_cast<size_t>(n), std::vector<float>(static_cast<size_t>(4 * cols)));
  for (int32_t q = 0; q < n; ++q) std::memcpy(xs[q].data(), rank_data(DType::kF32, 4 * cols, q, 21).data(), 16 * cols);
  std::vector<float> want(static_cast<size_t>(4 * cols));
  for (size_t i = 0; i < want.size(); ++i) {
    float acc = 0;
    for (int32_t q = 0; q < n; ++q) acc = q == 0 ? xs[q][i] + xs[q][i] : acc + (xs[q][i] + xs[q][i]);
    const float h = xs[me][i] + xs[me][i];
    want[i] = h * h + acc;
  }
  EXPECT_TRUE((*exe)->output_f32("y") == want);
}

// Broadcast is communication that does not fuse: it cuts the segment (COMMUNICATION) and runs in
// a launch of its own; its result is the root's data on every rank.
TEST(Collectives, BroadcastCutsTheSegmentAndDeliversTheRootsData) {
  const int32_t n = g_comm->size(), me = g_comm->rank();
  for (int32_t root = 0; root < n; ++root) {
    Graph g("broadcast");
    Tensor x = g.input("x", DType::kF32, {33});
    {
      SuperKernelScope scope(g, "block");
      Tensor h = add(g, x, x, "before");
      Tensor b = comm::broadcast(g, g_comm->group(), h, root, "bcast");
      g.output(add(g, b, b, "after"), "y");
    }
    std::vector<float> want(33);
    const auto root_x = rank_data(DType::kF32, 33, root, 9);
    for (size_t i = 0; i < 33; ++i) {
      float v;
      std::memcpy(&v, root_x.data() + i * 4, 4);
      want[i] = (v + v) + (v + v);
    }
    for (ExecutionMode mode : kModes) {
      const CompileReport* report = nullptr;
      std::unique_ptr<Executable> exe;
      auto got = run(g, mode, {{"x", rank_data(DType::kF32, 33, me, 9)}}, {"y"}, &report, &exe);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(got[0] == as_bytes(want)) << execution_mode_name(mode) << " root " << root;
      if (mode == ExecutionMode::kSuperKernel) {
        ASSERT_EQ(report->segments.size(), 2u);
        EXPECT_EQ(report->segments[0].cut, CutReason::kCommunication);
        ASSERT_EQ(report->unfused.size(), 1u);
        EXPECT_EQ(report->unfused[0].reason, CutReason::kCommunication);
      }
    }
  }
}

// A graph whose attributes name no communicator of this process fails before any message leaves
// (on every rank alike, so nobody waits).
TEST(Collectives, AnUnknownCommunicatorIsAnErrorNamingTheOp) {
  comm::Group bogus = g_comm->group();
  bogus.handle = 0x7777;
  Graph g("bogus");
  Tensor x = g.input("x", DType::kF32, {4});
  g.output(comm::all_reduce(g, bogus, x, "sum"), "y");
  auto exe = g_runtime->compile(g, CompileOptions::for_mode(ExecutionMode::kGraph));
  ASSERT_TRUE(exe) << exe.status().to_string();
  const std::vector<float> v(4, 1.0f);
  ASSERT_TRUE((*exe)->set_input("x", v));
  Status s = (*exe)->run();
  EXPECT_EQ(s.code(), StatusCode::kKernelError);
  EXPECT_NE(s.message().find("op 'sum'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("not an open communicator"), std::string::npos) << s.message();
}

TEST(Collectives, BuildErrorsNameTheOp) {
  Graph g("bad");
  Tensor x = g.input("x", DType::kF32, {3, 4});
  comm::Group two = g_comm->group();
  two.size = 2;
  two.rank = 0;
  (void)comm::reduce_scatter(g, {two.handle, 0, 2}, g.input("odd", DType::kF32, {3}), "rs");
  Status s = g.verify();
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find("op 'rs' (comm.reduce_scatter.f32)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("not a multiple of the 2 ranks"), std::string::npos) << s.message();
  Graph g2("bad2");
  Tensor i8 = g2.input("x", DType::kI8, {4});
  (void)comm::all_reduce(g2, two, i8, "sum8");
  s = g2.verify();
  EXPECT_NE(s.message().find("cannot be summed"), std::string::npos) << s.message();
  Graph g3("bad3");
  Tensor t = g3.transpose(g3.input("x", DType::kF32, {2, 3}), {1, 0});
  (void)comm::all_gather(g3, two, t, "ag");
  s = g3.verify();
  EXPECT_NE(s.message().find("must be dense"), std::string::npos) << s.message();
  (void)x;
}

}  // namespace
}  // namespace sk
