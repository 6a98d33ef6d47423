// LongCat-Flash across processes (under `mpirun -np 2`): the tensor- and expert-parallel model
// against the one-rank model on the same random weights, prefill plus decode steps, in every mode.
//
// Agreement: expert parallelism alone (tp = 1) changes no sum, so its logits are the one-rank
// model's bit for bit. Tensor parallelism splits the o_proj / down_proj dot products between the
// ranks and adds the partial sums (in rank order), so its logits differ from the one-rank model's
// by f32 rounding: within |got - want| <= 1e-5 + 1e-4 |want| (docs/COMM.md; the largest error is
// printed). Among themselves the parallel runs of every mode are bit-identical, and every rank
// holds the same logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "model_driver.h"
#include "superkernel/comm.h"
#include "superkernel/weights.h"

namespace sk {
namespace {

std::shared_ptr<comm::Communicator> g_comm;
std::shared_ptr<Runtime> g_runtime;

models::LongCatFlashConfig tiny_config() {
  models::LongCatFlashConfig c;
  c.vocab_size = 96;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_attention_heads = 4;
  c.q_lora_rank = 16;
  c.kv_lora_rank = 16;
  c.qk_nope_head_dim = 8;
  c.qk_rope_head_dim = 4;
  c.v_head_dim = 8;
  c.ffn_hidden_size = 48;
  c.expert_ffn_hidden_size = 16;
  c.n_routed_experts = 4;
  c.zero_expert_num = 2;
  c.moe_topk = 3;
  c.routed_scaling_factor = 2.0;
  return c;
}

models::BuildOptions tiny_options(int32_t batch) {
  models::BuildOptions o;
  o.batch = batch;
  o.prefill_tokens = 6 * batch;
  o.block_size = 4;
  o.max_context = 16;
  return o;
}

struct Layout {
  const char* name;
  int32_t tp, ep;
};

struct RunMode {
  const char* name;
  CompileOptions options;
  int32_t multi_streams;
};

std::vector<RunMode> run_modes() {
  CompileOptions sk_jit = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
#if defined(__x86_64__)
  sk_jit.super_kernel_optimize_options.jit = true;
#endif
  return {{"eager", CompileOptions::for_mode(ExecutionMode::kEager), 0},
          {"graph", CompileOptions::for_mode(ExecutionMode::kGraph), 0},
          {"superkernel", CompileOptions::for_mode(ExecutionMode::kSuperKernel), 0},
          // The MoE branch on its own stream, fused with the main branch (LongCat's shortcut):
          // its all-to-alls overlap the main stream's work where cores allow.
          {"superkernel+streams", CompileOptions::for_mode(ExecutionMode::kSuperKernel), 1},
          {"superkernel+jit", sk_jit, 0}};
}

Expected<testing::DriveResult> drive_model(const models::LongCatFlashConfig& cfg, const models::BuildOptions& opts,
                                           const CompileOptions& compile,
                                           const std::vector<std::vector<int32_t>>& prompts,
                                           const std::vector<std::vector<int32_t>>& steps) {
  auto weights = random_weights(11);
  auto build = [&](models::Phase phase) { return models::build_longcat_flash(cfg, opts, phase, *weights); };
  return testing::drive(*g_runtime, compile, build, opts, models::cache_names(cfg), prompts, steps, cfg.vocab_size);
}

// Every rank's logits, gathered through the collectives themselves, must be the same bits.
bool same_on_every_rank(const std::vector<float>& logits) {
  Graph g("compare");
  Tensor x = g.input("x", DType::kF32, {static_cast<int64_t>(logits.size())});
  g.output(comm::all_gather(g, g_comm->group(), x), "all");
  auto exe = g_runtime->compile(g, CompileOptions::for_mode(ExecutionMode::kGraph));
  if (!exe || !(*exe)->set_input("x", logits) || !(*exe)->run()) return false;
  const std::vector<float> all = (*exe)->output_f32("all");
  for (int32_t r = 0; r < g_comm->size(); ++r)
    if (std::memcmp(all.data() + r * logits.size(), logits.data(), logits.size() * sizeof(float)) != 0) return false;
  return true;
}

class ParallelModel : public ::testing::TestWithParam<Layout> {};

TEST_P(ParallelModel, AgreesWithTheOneRankModelInEveryMode) {
  const Layout layout = GetParam();
  const int32_t ranks = g_comm->size();
  const models::LongCatFlashConfig cfg = tiny_config();
  // Odd batch and prompt lengths: the tokens do not divide between the expert-parallel ranks.
  const int32_t batch = 3;
  const std::vector<std::vector<int32_t>> prompts = {{5, 17, 2, 90, 33}, {8, 1}, {64, 12, 7, 7}};
  const std::vector<std::vector<int32_t>> steps = {{3, 44, 9}, {71, 0, 28}, {15, 15, 2}};

  // The one-rank model (every rank computes it alone, as a reference).
  models::BuildOptions single = tiny_options(batch);
  auto want = drive_model(cfg, single, CompileOptions::for_mode(ExecutionMode::kGraph), prompts, steps);
  ASSERT_TRUE(want) << want.status().to_string();

  std::vector<float> first;
  for (const RunMode& mode : run_modes()) {
    SCOPED_TRACE(std::string(layout.name) + " " + mode.name);
    models::BuildOptions opts = tiny_options(batch);
    opts.parallel = {layout.tp == 0 ? ranks : layout.tp, layout.ep == 0 ? ranks : layout.ep, g_comm->group()};
    opts.multi_streams = mode.multi_streams;
    auto got = drive_model(cfg, opts, mode.options, prompts, steps);
    ASSERT_TRUE(got) << got.status().to_string();
    ASSERT_EQ(got->logits.size(), want->logits.size());
    if (first.empty()) {
      first = got->logits;
      EXPECT_TRUE(same_on_every_rank(first));
    } else {
      EXPECT_EQ(std::memcmp(first.data(), got->logits.data(), first.size() * sizeof(float)), 0)
          << "the parallel model's modes disagree";
    }
    double worst = 0, worst_rel = 0;
    for (size_t i = 0; i < got->logits.size(); ++i) {
      const double err = std::fabs(double(got->logits[i]) - double(want->logits[i]));
      worst = std::max(worst, err);
      EXPECT_LE(err, 1e-5 + 1e-4 * std::fabs(want->logits[i])) << "logit " << i;
      worst_rel = std::max(worst_rel, err / (1e-5 + 1e-4 * std::fabs(want->logits[i])));
    }
    if (opts.parallel.tp == 1) {
      EXPECT_EQ(std::memcmp(got->logits.data(), want->logits.data(), first.size() * sizeof(float)), 0)
          << "expert parallelism alone should not change a bit";
    }
    if (g_comm->rank() == 0)
      std::printf("[ %s, %s ] largest |parallel - one rank| = %.3g (%.2f of the tolerance)\n", layout.name, mode.name,
                  worst, worst_rel);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ParallelModel,
    ::testing::Values(Layout{"tp=ranks ep=ranks", 0, 0}, Layout{"tp=1 ep=ranks", 1, 0}, Layout{"tp=ranks ep=1", 0, 1}),
    [](const auto& param_info) {
      return std::string(param_info.param.tp == 1 ? "EP" : param_info.param.ep == 1 ? "TP" : "TPxEP");
    });

// The collectives sit inside the layers' super kernels, and explain names each with its core.
TEST(ParallelModelExplain, CollectivesAreInsideTheLayersSegments) {
  const int32_t ranks = g_comm->size();
  models::BuildOptions opts = tiny_options(1);
  opts.parallel = {ranks, ranks, g_comm->group()};
  opts.multi_streams = 1;
  auto weights = random_weights(11);
  auto g = models::build_longcat_flash(tiny_config(), opts, models::Phase::kDecode, *weights);
  ASSERT_TRUE(g) << g.status().to_string();
  auto exe = g_runtime->compile(*g, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
  ASSERT_TRUE(exe) << exe.status().to_string();
  int collectives = 0;
  for (const SegmentReport& s : (*exe)->report().segments) {
    for (const std::string& c : s.collectives) {
      ++collectives;
      EXPECT_NE(s.scope.find("scope_"), std::string::npos) << c;
    }
  }
  // Per layer: two MLAs and two MLPs all-reduce (4), the MoE dispatches, combines (two
  // all-to-all-v) and gathers (1).
  EXPECT_EQ(collectives, 2 * 7);
  auto text = explain(*g_runtime, *g, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
  ASSERT_TRUE(text);
  EXPECT_NE(text->find("collective: op 'model.layers.0.self_attn.0.o_proj.all_reduce' (comm.all_reduce.f32) on core"),
            std::string::npos)
      << *text;
  EXPECT_NE(text->find("(comm.all_to_all_v) on core"), std::string::npos);
}

}  // namespace
}  // namespace sk

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = sk::comm::Communicator::world({20.0});
  if (!world) {
    std::fprintf(stderr, "%s\n", world.status().to_string().c_str());
    return 1;
  }
  sk::g_comm = *world;
  sk::RuntimeOptions ro;
  ro.num_cores = 1;  // one core per rank: two ranks share a 2-CPU machine
  ro.pin_threads = false;
  ro.watchdog_seconds = 20.0;
  auto rt = sk::Runtime::create(ro);
  if (!rt) {
    std::fprintf(stderr, "%s\n", rt.status().to_string().c_str());
    return 1;
  }
  sk::g_runtime = *rt;
  if (sk::Status s = sk::g_comm->load_kernels(*sk::g_runtime); !s) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 1;
  }
  const int rc = RUN_ALL_TESTS();
  sk::g_runtime.reset();
  sk::g_comm.reset();
  (void)sk::comm::finalize(rc != 0);
  return rc;
}
