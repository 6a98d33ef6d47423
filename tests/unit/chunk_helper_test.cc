// Sharing a call's chunks with a helper thread (src/runtime/cpu/chunk_layout.h, chunk_helper.h):
// sk_split_range's splits nest; a layout is built only where the kernel's chunks write exactly
// what the call writes; the helper's chunks land in place; a helper chunk that stalls is redone
// by the owner and its late writes never reach the outputs; failures on either side; and a
// runtime whose launches run on one thread with a helper gives the same bits as one without.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "common/abi_args.h"
#include "common/test_runtime.h"
#include "runtime/cpu/chunk_helper.h"
#include "runtime/cpu/chunk_layout.h"
#include "runtime/cpu/device.h"
#include "superkernel/compile.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using cpu::build_chunk_layout;
using cpu::ChunkHelper;
using cpu::ChunkLayout;

TEST(SplitRange, SplitsNestSoThatAChunkOfACallIsExactlyItsSubChunks) {
  for (int64_t n : {0, 1, 15, 16, 17, 100, 1000, 4096, 4099, 123457}) {
    for (int64_t align : {1, 16}) {
      for (int32_t parts : {1, 2, 3, 7}) {
        int64_t next = 0;
        for (int32_t k = 0; k < parts; ++k) {
          const sk_range call = sk_split_range(n, k, parts, align);
          EXPECT_EQ(call.begin, next) << "n " << n << " part " << k << " of " << parts;
          next = call.end;
          for (int32_t m : {2, 5, 64}) {
            int64_t at = call.begin;
            for (int32_t j = 0; j < m; ++j) {
              const sk_range sub = sk_split_range(n, k * m + j, parts * m, align);
              ASSERT_EQ(sub.begin, at) << "n " << n << " call " << k << "/" << parts << " chunk " << j << "/" << m;
              at = sub.end;
            }
            EXPECT_EQ(at, call.end);
          }
        }
        EXPECT_EQ(next, n);
      }
    }
  }
}

// ---- A test kernel: y[i] = x[i] * w[i] + 1 over the core's share of n ----

thread_local bool t_helper_thread = false;
std::atomic<int> g_helper_started{0};
std::atomic<int> g_helper_finished{0};
std::atomic<bool> g_owner_waits_for_helper{false};
std::atomic<bool> g_helper_stalls{false};
std::atomic<bool> g_release_helper{false};
std::atomic<bool> g_helper_fails{false};
std::atomic<bool> g_owner_fails{false};
std::atomic<bool> g_wait_timed_out{false};
std::atomic<float> g_helper_saw_x{0.0f};

// Spins until `done()` (at most 10 s: a broken helper fails the test instead of hanging it).
template <class F>
void bounded_wait(F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) {
      g_wait_timed_out = true;
      return;
    }
    std::this_thread::yield();
  }
}

// The share of core `core` of `cores`: with the nesting split, or, `old_split`, the one that
// gives the remainder to the first parts (which does not nest).
sk_range share(int64_t n, int32_t core, int32_t cores, bool old_split) {
  if (!old_split) return sk_split_range(n, core, cores, 16);
  const int64_t units = (n + 15) / 16, per = units / cores, rem = units % cores;
  const int64_t b = core * per + std::min<int64_t>(core, rem);
  const int64_t e = b + per + (core < rem ? 1 : 0);
  return {std::min(b * 16, n), std::min(e * 16, n)};
}

template <bool kOldSplit>
int32_t fma_run(const sk_kernel_args* a, const sk_core_ctx* c) {
  const auto* x = static_cast<const float*>(a->inputs[0].data);
  const auto* w = static_cast<const float*>(a->inputs[1].data);
  auto* y = static_cast<float*>(a->outputs[0].data);
  const sk_range r = share(a->outputs[0].shape[0], c->core_id, c->num_cores, kOldSplit);
  if (t_helper_thread) {
    const int started = g_helper_started.fetch_add(1);
    if (g_helper_fails) return SK_ERR_INTERNAL;
    if (g_helper_stalls && started == 0) bounded_wait([] { return g_release_helper.load(); });
  } else {
    if (g_owner_waits_for_helper) bounded_wait([] { return g_helper_finished.load() > 0; });
    if (g_owner_fails) {
      std::snprintf(c->error_message, c->error_capacity, "chunk refused on the owner");
      return SK_ERR_INVALID_ARGUMENT;
    }
  }
  for (int64_t i = r.begin; i < r.end; ++i) y[i] = x[i] * w[i] + 1.0f;
  if (t_helper_thread && r.begin < r.end) g_helper_saw_x.store(x[r.begin]);
  if (t_helper_thread) g_helper_finished.fetch_add(1);
  return SK_OK;
}

template <bool kOldSplit>
int32_t fma_access(const sk_kernel_args* a, int32_t core, int32_t cores, sk_access_range* out, int32_t capacity) {
  const sk_range r = share(a->outputs[0].shape[0], core, cores, kOldSplit);
  if (capacity >= 3) {
    const int64_t b = r.begin * 4, e = r.end * 4;
    out[0] = {0, SK_ACCESS_READ, b, e};
    out[1] = {1, SK_ACCESS_READ, b, e};
    out[2] = {2, SK_ACCESS_WRITE, b, e};
  }
  return 3;
}

sk_kernel_desc fma_desc(uint32_t flags = SK_FUSIBLE | SK_CHUNKABLE, bool old_split = false) {
  return {SK_KERNEL_ABI_VERSION,
          "test.fma.f32",
          SK_KERNEL_VECTOR,
          flags,
          old_split ? fma_run<true> : fma_run<false>,
          nullptr,
          nullptr,
          nullptr,
          old_split ? fma_access<true> : fma_access<false>,
          0};
}

struct Call {
  static constexpr int64_t kN = 4096;
  std::vector<float> x, w, y;
  sk_tensor_arg in[2], out[1];
  sk_kernel_args args{};
  Call() : x(kN), w(kN), y(kN, -7.0f) {
    for (int64_t i = 0; i < kN; ++i) {
      x[static_cast<size_t>(i)] = 0.5f + static_cast<float>(i % 97);
      w[static_cast<size_t>(i)] = 1.0f / static_cast<float>(1 + i % 13);
    }
    in[0] = testing::dense_arg(x.data(), SK_DTYPE_F32, kN);
    in[1] = testing::dense_arg(w.data(), SK_DTYPE_F32, kN);
    out[0] = testing::dense_arg(y.data(), SK_DTYPE_F32, kN);
    args.inputs = in;
    args.outputs = out;
    args.num_inputs = 2;
    args.num_outputs = 1;
  }
  // What core `core` of `cores` must leave in y.
  bool correct(int32_t core, int32_t cores) const {
    const sk_range r = sk_split_range(kN, core, cores, 16);
    for (int64_t i = r.begin; i < r.end; ++i) {
      const auto k = static_cast<size_t>(i);
      const float want = x[k] * w[k] + 1.0f;
      if (std::memcmp(&y[k], &want, 4) != 0) return false;
    }
    return true;
  }
};

void reset_hooks() {
  g_helper_started = 0;
  g_helper_finished = 0;
  g_owner_waits_for_helper = false;
  g_helper_stalls = false;
  g_release_helper = false;
  g_helper_fails = false;
  g_owner_fails = false;
  g_wait_timed_out = false;
}

TEST(ChunkLayout, SplitsALargeCallIntoChunksThatWriteExactlyIt) {
  Call c;
  const sk_kernel_desc d = fma_desc();
  // Core 1 of 2 reads 2 x 8 KiB: four chunks of 4 KiB read.
  std::string why;
  auto layout = build_chunk_layout(d, c.args, 1, 2, 4096, {}, &why);
  ASSERT_TRUE(layout) << why;
  EXPECT_EQ(layout->parts, 4);
  int64_t at = sk_split_range(Call::kN, 1, 2, 16).begin * 4;
  for (int j = 0; j < layout->parts; ++j) {
    ASSERT_EQ(layout->writes[static_cast<size_t>(j)].size(), 1u);
    const ChunkLayout::Write& w = layout->writes[static_cast<size_t>(j)][0];
    EXPECT_EQ(w.output, 0);
    EXPECT_EQ(w.begin, at);
    at = w.end;
  }
  EXPECT_EQ(at, sk_split_range(Call::kN, 1, 2, 16).end * 4);
  EXPECT_GE(layout->scratch_bytes, static_cast<size_t>(Call::kN * 4 / 2));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(layout->scratch) % 64, 0u);
  auto capped = build_chunk_layout(d, c.args, 0, 1, 4096);
  ASSERT_TRUE(capped);
  EXPECT_EQ(capped->parts, 8);
  // Every input not known constant is snapshotted (the call's read span of it); a constant is not.
  ASSERT_EQ(layout->snapshot.size(), 2u);
  EXPECT_EQ(layout->snapshot[0].operand, 0);
  EXPECT_EQ(layout->snapshot[0].begin, sk_split_range(Call::kN, 1, 2, 16).begin * 4);
  EXPECT_EQ(layout->snapshot[0].end, sk_split_range(Call::kN, 1, 2, 16).end * 4);
  auto w_constant = build_chunk_layout(d, c.args, 1, 2, 4096, {0, 1});
  ASSERT_TRUE(w_constant);
  ASSERT_EQ(w_constant->snapshot.size(), 1u);
  EXPECT_EQ(w_constant->snapshot[0].operand, 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w_constant->snapshots[1]) % 64, 0u);
}

TEST(ChunkLayout, RefusesCallsItCannotShareAndSaysWhy) {
  Call c;
  std::string why;
  EXPECT_FALSE(build_chunk_layout(fma_desc(SK_FUSIBLE), c.args, 0, 2, 4096, {}, &why));
  EXPECT_NE(why.find("not SK_CHUNKABLE"), std::string::npos) << why;
  EXPECT_FALSE(build_chunk_layout(fma_desc(SK_FUSIBLE | SK_CHUNKABLE | SK_SYNCS_CORES), c.args, 0, 2, 4096, {}, &why));
  EXPECT_NE(why.find("syncs"), std::string::npos) << why;
  EXPECT_FALSE(build_chunk_layout(fma_desc(), c.args, 0, 2, 1 << 20, {}, &why));
  EXPECT_NE(why.find("too little"), std::string::npos) << why;
  // A kernel whose split does not nest: of 10 units, core 1 of 3 owns [4, 7), and chunks 2 and 3
  // of 6 own [4, 8). Its chunks would write past the call; the nesting split's do not.
  Call odd;
  odd.out[0].shape[0] = odd.in[0].shape[0] = odd.in[1].shape[0] = 16 * 10;
  EXPECT_FALSE(build_chunk_layout(fma_desc(SK_FUSIBLE | SK_CHUNKABLE, true), odd.args, 1, 3, 192, {}, &why));
  EXPECT_NE(why.find("what the call does not"), std::string::npos) << why;
  auto nested = build_chunk_layout(fma_desc(), odd.args, 1, 3, 192, {}, &why);
  ASSERT_TRUE(nested) << why;
  EXPECT_EQ(nested->parts, 2);
  sk_kernel_args with_workspace = c.args;
  with_workspace.workspace_size = 64;
  EXPECT_FALSE(build_chunk_layout(fma_desc(), with_workspace, 0, 2, 4096, {}, &why));
  EXPECT_NE(why.find("workspace"), std::string::npos) << why;
}

// One call of `desc` in chunks of 4 KiB, and a helper thread that help()s until the test ends
// (declared last: it stops, its chunk done, before the call and its layout go).
struct SharedCall {
  Call c;
  sk_kernel_desc desc;
  std::unique_ptr<ChunkLayout> layout;
  ChunkHelper helper;
  std::thread thread;
  char error[128] = {};
  explicit SharedCall(sk_kernel_desc d) : desc(d), layout(build_chunk_layout(desc, c.args, 0, 1, 4096)) {
    reset_hooks();
    helper.start();
    thread = std::thread([this] {
      t_helper_thread = true;
      helper.help();
    });
  }
  ~SharedCall() {
    helper.stop();
    thread.join();
  }
  // The owner's side: the call's return code (its message in `error`).
  int32_t run() {
    sk_core_ctx ctx{};
    ctx.error_message = error;
    ctx.error_capacity = sizeof(error);
    return helper.run(desc, c.args, *layout, ctx);
  }
};

TEST(ChunkHelper, TheHelpersChunksLandInPlace) {
  SharedCall s(fma_desc());
  ASSERT_TRUE(s.layout);
  // The owner's chunks wait until the helper has finished one, so the helper surely does some.
  g_owner_waits_for_helper = true;
  ASSERT_EQ(s.run(), SK_OK) << s.error;
  EXPECT_FALSE(g_wait_timed_out) << "the helper never took a chunk";
  EXPECT_GT(s.helper.chunks_helped(), 0);
  EXPECT_TRUE(s.c.correct(0, 1));
  // And again on the same layout: the helper's scratch from the first call is not mistaken for this one's.
  std::fill(s.c.y.begin(), s.c.y.end(), -7.0f);
  ASSERT_EQ(s.run(), SK_OK) << s.error;
  EXPECT_TRUE(s.c.correct(0, 1));
}

// The owner's chunks first wait until the helper has started one, which then stalls.
int32_t gated_run(const sk_kernel_args* a, const sk_core_ctx* ctx) {
  if (!t_helper_thread) bounded_wait([] { return g_helper_started.load() > 0; });
  return fma_run<false>(a, ctx);
}

TEST(ChunkHelper, AStalledHelperChunkIsRedoneAndItsLateWritesNeverReachTheOutputs) {
  sk_kernel_desc d = fma_desc();
  d.run = gated_run;
  SharedCall s(d);
  ASSERT_TRUE(s.layout);
  g_helper_stalls = true;
  ASSERT_EQ(s.run(), SK_OK) << s.error;
  EXPECT_FALSE(g_wait_timed_out);
  EXPECT_EQ(g_helper_finished.load(), 0) << "the owner returned while the helper's chunk was stalled";
  EXPECT_TRUE(s.c.correct(0, 1)) << "the owner redid the stalled chunk";
  EXPECT_EQ(s.helper.chunks_helped(), 0);
  // We move on and overwrite x (as the next ops would overwrite an activation's memory); the
  // helper then finishes its abandoned chunk, from the call's snapshot of x, into scratch: it
  // never reads the new x nor writes y.
  const std::vector<float> x_then = s.c.x;
  std::fill(s.c.y.begin(), s.c.y.end(), -7.0f);
  std::fill(s.c.x.begin(), s.c.x.end(), 1e9f);
  g_release_helper = true;
  bounded_wait([] { return g_helper_finished.load() > 0; });
  s.helper.wait_idle();
  EXPECT_EQ(g_helper_finished.load(), 1);
  for (float v : s.c.y) ASSERT_EQ(v, -7.0f);
  EXPECT_NE(g_helper_saw_x.load(), 1e9f) << "the abandoned chunk read x after the owner had moved on";
  EXPECT_NE(std::find(x_then.begin(), x_then.end(), g_helper_saw_x.load()), x_then.end());
}

TEST(ChunkHelper, AChunkThatFailsOnTheHelperIsRedoneAndOneThatFailsOnTheOwnerIsReported) {
  SharedCall s(fma_desc());
  ASSERT_TRUE(s.layout);
  g_helper_fails = true;
  ASSERT_EQ(s.run(), SK_OK) << s.error;
  EXPECT_TRUE(s.c.correct(0, 1));
  // The owner's chunks fail (the helper's too, or it could take every chunk before the owner
  // takes one): the owner's failure is the call's.
  g_owner_fails = true;
  EXPECT_EQ(s.run(), SK_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(s.error, "chunk refused on the owner");
}

// ---- Through the runtime: launches on one thread with a helper give the same bits ----

std::unique_ptr<Graph> mlp(int64_t hidden, int64_t ffn) {
  auto g = std::make_unique<Graph>("mlp");
  Tensor x = g->input("x", DType::kF32, {1, hidden});
  Tensor up = g->constant_f32("up", {ffn, hidden}, testing::random_floats(ffn * hidden, 1, -0.1f, 0.1f));
  Tensor down = g->constant_f32("down", {hidden, ffn}, testing::random_floats(ffn * hidden, 2, -0.1f, 0.1f));
  g->output(matmul(*g, matmul(*g, x, up), down), "y");
  return g;
}

TEST(ChunkHelper, OneThreadWithAHelperGivesTheSameBitsInEveryMode) {
  auto g = mlp(256, 512);
  const std::vector<float> x = testing::random_floats(256, 3);
  auto spread = testing::make_runtime(2, 60.0, 0, LoadPolicy::kStatic);
  auto one = testing::make_runtime(2, 60.0, 0, LoadPolicy::kOneThread);
  for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    std::vector<float> want, got;
    for (Runtime* rt : {spread.get(), one.get()}) {
      auto exe = rt->compile(*g, CompileOptions::for_mode(mode));
      ASSERT_TRUE(exe) << exe.status().to_string();
      ASSERT_TRUE((*exe)->set_input("x", x));
      for (int i = 0; i < 3; ++i) ASSERT_TRUE((*exe)->run());
      (rt == spread.get() ? want : got) = (*exe)->output_f32("y");
    }
    ASSERT_EQ(want.size(), got.size());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << execution_mode_name(mode);
  }
  EXPECT_GT(one->one_thread_launches(), 0);
  EXPECT_GT(one->shared_calls(), 0) << "no call was shared with the helper";
  EXPECT_EQ(spread->shared_calls(), 0);
}

TEST(ChunkHelper, ADeviceDestroyedRightAfterStartingItsHelperDoesNotHang) {
  // The helper's start is a message to worker 1; destroying the device before the worker has read
  // it once left the destructor waiting for a helper that never ran.
  cpu::CpuDeviceOptions o;
  o.num_cores = 2;
  o.pin_threads = false;
  o.allow_oversubscribe = true;
  o.load_policy = LoadPolicy::kOneThread;
  for (int i = 0; i < 200; ++i) {
    auto dev = cpu::CpuDevice::create(o);
    ASSERT_TRUE(dev);
    int ran = 0;
    auto each = [](void* ctx, int) { ++*static_cast<int*>(ctx); };
    (*dev)->launch(2, each, &ran, each);
    EXPECT_EQ(ran, 1) << "the launch ran on one thread";
  }
}

TEST(ChunkHelper, ChunkBytesOutOfRangeIsAnErrorNamingTheOption) {
  RuntimeOptions o;
  o.chunk_bytes = 100;
  auto rt = Runtime::create(o);
  ASSERT_FALSE(rt);
  EXPECT_NE(rt.status().message().find("'chunk_bytes' = 100"), std::string::npos) << rt.status().message();
  o.chunk_bytes = 0;
  EXPECT_TRUE(Runtime::create(o));
}

}  // namespace
}  // namespace sk
