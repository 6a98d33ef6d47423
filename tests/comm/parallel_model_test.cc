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

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model_driver.h"
#include "mpi_test_main.h"
#include "superkernel/comm.h"
#include "superkernel/weights.h"

namespace sk {
namespace {

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
                                           const std::vector<std::vector<int32_t>>& steps,
                                           WeightSource* source = nullptr) {
  std::unique_ptr<WeightSource> random = random_weights(11);
  WeightSource& weights = source ? *source : *random;
  auto build = [&](models::Phase phase) { return models::build_longcat_flash(cfg, opts, phase, weights); };
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

// With two cores per rank and the MoE branch on its own stream (LongCat's shortcut), each layer's
// second half is one super kernel in which the MoE stream's core does the all-to-alls while the
// main stream's core computes the dense MLP, the second attention and the second MLP: the main
// core waits for the MoE core only at the shortcut add that consumes the MoE's output. Compiled
// only (two ranks x two cores would oversubscribe the 2-CPU test machine; the run is the same
// schedule as the tests above, which run it on one core).
TEST(ParallelModelExplain, TheMoeStreamsAllToAllsOverlapTheMainStream) {
  const int32_t ranks = g_comm->size();
  RuntimeOptions ro;
  ro.num_cores = 2;
  ro.allow_oversubscribe = true;
  ro.pin_threads = false;
  auto rt = Runtime::create(ro);
  ASSERT_TRUE(rt) << rt.status().to_string();
  ASSERT_TRUE(g_comm->load_kernels(**rt));
  models::BuildOptions opts = tiny_options(1);
  opts.parallel = {ranks, ranks, g_comm->group()};
  opts.multi_streams = 1;
  auto weights = random_weights(11);
  auto g = models::build_longcat_flash(tiny_config(), opts, models::Phase::kDecode, *weights);
  ASSERT_TRUE(g) << g.status().to_string();
  auto exe = (*rt)->compile(*g, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
  ASSERT_TRUE(exe) << exe.status().to_string();
  const CompileReport& r = (*exe)->report();
  const SegmentReport* layer0 = nullptr;
  for (const SegmentReport& s : r.segments)
    if (s.scope.find("scope_0_part2_moe") != std::string::npos &&
        s.scope.find("scope_0_part2_main") != std::string::npos)
      layer0 = &s;
  ASSERT_NE(layer0, nullptr) << "layer 0's MoE and main branches are not one super kernel\n" << r.program_text;
  // Which core each branch's collectives run on.
  int moe_core = -1, main_core = -1;
  for (const std::string& c : layer0->collectives) {
    const size_t at = c.find(" on core ");
    ASSERT_NE(at, std::string::npos) << c;
    const int core = std::atoi(c.c_str() + at + 9);
    if (c.find("(stream 'moe')") != std::string::npos) {
      EXPECT_NE(c.find("comm.all"), std::string::npos) << c;
      moe_core = core;
    } else {
      EXPECT_NE(c.find("comm.all_reduce"), std::string::npos) << c;
      main_core = core;
    }
  }
  ASSERT_GE(moe_core, 0) << "no collective on the MoE stream";
  ASSERT_GE(main_core, 0) << "no collective on the main stream";
  ASSERT_NE(moe_core, main_core) << "the MoE stream's collectives share the main stream's core";
  // The main core's program of that launch: the second MLP's down projection (the last main-branch
  // work) comes before its first wait for the MoE core, and that wait comes before the shortcut.
  const std::string marker = "# model.layers.0.shortcut";
  const size_t shortcut_at = r.program_text.find(marker);
  ASSERT_NE(shortcut_at, std::string::npos) << r.program_text;
  const size_t launch_at = r.program_text.rfind("launch", shortcut_at);
  ASSERT_NE(launch_at, std::string::npos) << r.program_text;
  std::string launch = r.program_text.substr(launch_at);
  if (const size_t next = launch.find("launch", 6); next != std::string::npos) launch.resize(next);
  std::vector<std::string> main_lines;
  {
    std::istringstream in(launch);
    std::string line;
    bool mine = false;
    while (std::getline(in, line)) {
      if (line.rfind("  core ", 0) == 0)
        mine = line == "  core " + std::to_string(main_core) + ":";
      else if (mine)
        main_lines.push_back(line);
    }
  }
  auto first = [&](const std::string& text) {
    for (size_t i = 0; i < main_lines.size(); ++i)
      if (main_lines[i].find(text) != std::string::npos) return i;
    return main_lines.size();
  };
  const size_t mlp1 = first("mlps.1.down_proj"), wait = first("WAIT core " + std::to_string(moe_core)),
               shortcut = first("shortcut");
  ASSERT_LT(mlp1, main_lines.size()) << launch;
  ASSERT_LT(shortcut, main_lines.size()) << launch;
  EXPECT_LT(mlp1, wait) << "the main stream waited for the MoE stream before its own work\n" << launch;
  EXPECT_LE(wait, shortcut) << "the shortcut add did not wait for the MoE stream\n" << launch;
}

// A checkpoint in the published layout, one tensor per expert (`mlp.experts.{e}.gate_proj.weight`,
// ...): each rank stacks only the experts it holds, reads only those (the others stay unread, and
// the unread-tensor check leaves them to their ranks), and gets the logits of the same weights
// given whole.
TEST(ParallelModelCheckpoint, EachRankReadsOnlyItsOwnExperts) {
  const int32_t ranks = g_comm->size(), rank = g_comm->rank();
  const models::LongCatFlashConfig cfg = tiny_config();
  const int64_t E = cfg.n_routed_experts, D = cfg.hidden_size, F = cfg.expert_ffn_hidden_size;
  ASSERT_EQ(E % ranks, 0);

  // The random weights of the one-rank model, written with the experts split per expert.
  auto random = random_weights(11);
  auto whole = models::build_longcat_flash(cfg, tiny_options(1), models::Phase::kDecode, *random);
  ASSERT_TRUE(whole) << whole.status().to_string();
  std::vector<SafetensorsEntry> entries;
  int expert_tensors = 0;
  for (size_t i = 0; i < whole->num_tensors(); ++i) {
    const TensorInfo& t = whole->tensor(static_cast<int32_t>(i));
    if (t.kind != TensorKind::kConstant || t.external_data == nullptr) continue;
    const auto* bytes = static_cast<const uint8_t*>(t.external_data);
    const std::string gate_up = "mlp.experts.gate_up_proj", down = "mlp.experts.down_proj";
    const size_t at_gate_up = t.name.find(gate_up), at_down = t.name.find(down);
    if (at_gate_up != std::string::npos && at_gate_up + gate_up.size() == t.name.size()) {
      const std::string p = t.name.substr(0, at_gate_up) + "mlp.experts.";
      const size_t half = static_cast<size_t>(F * D) * sizeof(float);
      for (int64_t e = 0; e < E; ++e) {
        const uint8_t* expert = bytes + static_cast<size_t>(e) * 2 * half;
        entries.push_back({p + std::to_string(e) + ".gate_proj.weight", DType::kF32, {F, D}, expert, half});
        entries.push_back({p + std::to_string(e) + ".up_proj.weight", DType::kF32, {F, D}, expert + half, half});
        expert_tensors += 2;
      }
    } else if (at_down != std::string::npos && at_down + down.size() == t.name.size()) {
      const std::string p = t.name.substr(0, at_down) + "mlp.experts.";
      const size_t one = static_cast<size_t>(D * F) * sizeof(float);
      for (int64_t e = 0; e < E; ++e) {
        entries.push_back({p + std::to_string(e) + ".down_proj.weight",
                           DType::kF32,
                           {D, F},
                           bytes + static_cast<size_t>(e) * one,
                           one});
        ++expert_tensors;
      }
    } else {
      entries.push_back({t.name, t.dtype, t.shape, t.external_data, static_cast<size_t>(t.storage_bytes)});
    }
  }
  ASSERT_EQ(expert_tensors, cfg.num_layers * E * 3) << "the one-rank model's packed expert weights were not found";
  // Each rank writes its own copy: no rank waits for another's file.
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("sk_parallel_ckpt_" + std::to_string(getpid()) + "_rank" + std::to_string(rank)))
                              .string();
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(write_safetensors(dir + "/model.safetensors", entries));
  std::ofstream(dir + "/config.json") << "{\"model_type\": \"longcat_flash\"}\n";
  auto ckpt = Checkpoint::open(dir);
  ASSERT_TRUE(ckpt) << ckpt.status().to_string();
  std::unique_ptr<WeightSource> from_checkpoint = checkpoint_weights(*ckpt);

  const std::vector<std::vector<int32_t>> prompts = {{5, 17, 2}, {8, 1, 40}};
  const std::vector<std::vector<int32_t>> steps = {{3, 44}, {71, 0}};
  models::BuildOptions opts = tiny_options(2);
  opts.parallel = {ranks, ranks, g_comm->group()};
  const CompileOptions graph_mode = CompileOptions::for_mode(ExecutionMode::kGraph);
  auto want = drive_model(cfg, opts, graph_mode, prompts, steps);
  ASSERT_TRUE(want) << want.status().to_string();
  auto got = drive_model(cfg, opts, graph_mode, prompts, steps, from_checkpoint.get());
  ASSERT_TRUE(got) << got.status().to_string();
  ASSERT_EQ(got->logits.size(), want->logits.size());
  EXPECT_EQ(std::memcmp(got->logits.data(), want->logits.data(), got->logits.size() * sizeof(float)), 0)
      << "the checkpoint's per-expert tensors give other logits than the same weights given whole";

  // What stayed unread is exactly the other ranks' experts.
  const int64_t local = E / ranks;
  std::vector<std::string> others;
  for (int64_t layer = 0; layer < cfg.num_layers; ++layer)
    for (int64_t e = 0; e < E; ++e)
      if (e < local * rank || e >= local * (rank + 1))
        for (const char* proj : {"gate_proj", "up_proj", "down_proj"})
          others.push_back("model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(e) + "." + proj +
                           ".weight");
  std::vector<std::string> unread = from_checkpoint->unread_tensors();
  std::sort(unread.begin(), unread.end());
  std::sort(others.begin(), others.end());
  EXPECT_EQ(unread, others);
  Status mine = models::check_unread_tensors(cfg, *from_checkpoint, false, nullptr, {rank, ranks});
  EXPECT_TRUE(mine) << mine.to_string();
  // Without the expert-parallel rank, the same tensors are reported unread.
  Status alone = models::check_unread_tensors(cfg, *from_checkpoint);
  EXPECT_FALSE(alone);
  EXPECT_NE(alone.message().find(others.front()), std::string::npos) << alone.message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sk
