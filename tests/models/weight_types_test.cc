// The Llama model on every weight type a user can ask for: f16 checkpoints bound in place (and
// bit-identical to the f32 model on the same values), 4-bit weights quantised at load (logits
// within a stated tolerance of the f32 model, greedy ids equal), published AWQ / GPTQ packed
// checkpoints (bit-identical to quantising the same values at load), the layouts and
// quantization_config fields that are refused, and a batch of sequences against each sequence
// decoded alone. Every build runs in every execution mode with bit-identical logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "model_driver.h"
#include "superkernel/models.h"
#include "superkernel/nn.h"
#include "superkernel/runtime.h"
#include "superkernel/weights.h"
#include "test_runtime.h"

namespace sk {
namespace {

namespace fs = std::filesystem;
using models::WeightDType;

models::LlamaConfig small_llama() {
  models::LlamaConfig c;
  c.vocab_size = 48;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  return c;
}

models::BuildOptions options(WeightDType dtype, int64_t batch = 2) {
  models::BuildOptions o;
  o.weight_dtype = dtype;
  o.int4_group = 32;
  o.batch = batch;
  o.prefill_tokens = 8;
  o.block_size = 4;
  o.max_context = 16;
  return o;
}

const std::vector<std::vector<int32_t>> kPrompts = {{1, 7, 30, 2}, {45, 3, 9}};
const std::vector<std::vector<int32_t>> kSteps = {{4, 8}, {15, 16}, {23, 42}};

// Logits of `cfg` built from `weights` in eager, graph and superkernel mode on 2 cores; the
// modes must agree bit for bit. Returns the eager logits.
std::vector<float> logits_every_mode(const models::LlamaConfig& cfg, const models::BuildOptions& o,
                                     WeightSource& weights, const std::vector<std::vector<int32_t>>& prompts = kPrompts,
                                     const std::vector<std::vector<int32_t>>& steps = kSteps) {
  auto rt = testing::make_runtime(2);
  std::vector<float> first;
  for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    auto r = testing::drive(
        *rt, CompileOptions::for_mode(mode),
        [&](models::Phase phase) { return models::build_llama(cfg, o, phase, weights); }, o, models::cache_names(cfg),
        prompts, steps, cfg.vocab_size);
    if (!r) {
      ADD_FAILURE() << execution_mode_name(mode) << ": " << r.status().to_string();
      return {};
    }
    if (first.empty()) {
      first = r->logits;
    } else {
      EXPECT_EQ(0, std::memcmp(first.data(), r->logits.data(), first.size() * sizeof(float)))
          << execution_mode_name(mode) << " differs from eager";
    }
  }
  return first;
}

std::vector<int64_t> argmax_rows(const std::vector<float>& logits, int64_t vocab) {
  std::vector<int64_t> ids;
  for (size_t r = 0; r + vocab <= logits.size(); r += vocab)
    ids.push_back(std::max_element(logits.begin() + r, logits.begin() + r + vocab) - (logits.begin() + r));
  return ids;
}

// The constant named `name` (Graph::find_tensor finds inputs, variables and outputs only).
const TensorInfo* constant_named(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.num_tensors(); ++i)
    if (g.tensor(static_cast<int32_t>(i)).kind == TensorKind::kConstant &&
        g.tensor(static_cast<int32_t>(i)).name == name)
      return &g.tensor(static_cast<int32_t>(i));
  return nullptr;
}

// The kernel of the op named `op` in the decode graph.
std::string kernel_of(const Graph& g, const std::string& op) {
  for (size_t i = 0; i < g.num_ops(); ++i)
    if (g.op(i).name == op) return g.op(i).kernel;
  return "";
}

class WeightTypesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "sk_weight_types_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  void write_config(const std::string& quantization = "") {
    const models::LlamaConfig c = small_llama();
    std::ofstream out(dir_ + "/config.json");
    out << "{\n  \"model_type\": \"llama\",\n  \"vocab_size\": " << c.vocab_size
        << ",\n  \"hidden_size\": " << c.hidden_size << ",\n  \"intermediate_size\": " << c.intermediate_size
        << ",\n  \"num_hidden_layers\": " << c.num_hidden_layers
        << ",\n  \"num_attention_heads\": " << c.num_attention_heads
        << ",\n  \"num_key_value_heads\": " << c.num_key_value_heads;
    if (!quantization.empty()) out << ",\n  \"quantization_config\": " << quantization;
    out << "\n}\n";
  }

  // The tensors of a decode graph built from random weights with Linear weights in `dtype`.
  void write_float_checkpoint(WeightDType dtype) {
    auto weights = random_weights(11);
    auto g = models::build_llama(small_llama(), options(dtype), models::Phase::kDecode, *weights);
    ASSERT_TRUE(g) << g.status().to_string();
    std::vector<SafetensorsEntry> entries;
    for (size_t i = 0; i < g->num_tensors(); ++i) {
      const TensorInfo& t = g->tensor(static_cast<int32_t>(i));
      if (t.kind != TensorKind::kConstant || t.external_data == nullptr) continue;
      entries.push_back({t.name, t.dtype, t.shape, t.external_data, static_cast<size_t>(t.storage_bytes)});
    }
    ASSERT_TRUE(write_safetensors(dir_ + "/model.safetensors", entries));
    write_config();
  }

  models::LlamaConfig load_config() {
    auto ckpt = Checkpoint::open(dir_);
    EXPECT_TRUE(ckpt) << ckpt.status().to_string();
    models::LlamaConfig c;
    if (ckpt) {
      Status s = models::load_config_json(**ckpt, c);
      EXPECT_TRUE(s) << s.to_string();
    }
    return c;
  }

  std::string dir_;
};

// A tolerance for 4-bit weights: the logits' error against the f32 model, relative to the
// largest f32 logit. Group-wise 4-bit weights with 32 values per scale perturb each weight by up
// to half a step (range / 30, 16 times int8's); over two layers of random weights the measured
// error is 0.10-0.12 of the largest logit (w4a8 and w4, min/max and symmetric groups).
constexpr double kInt4Tolerance = 0.2;

double max_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return scale > 0 ? err / scale : err;
}

TEST_F(WeightTypesTest, F16CheckpointBindsInPlaceAndMatchesF32BitForBit) {
  write_float_checkpoint(WeightDType::kF16);
  const models::LlamaConfig cfg = load_config();
  auto ckpt = Checkpoint::open(dir_);
  ASSERT_TRUE(ckpt);
  auto f16_weights = checkpoint_weights(*ckpt);
  auto g = models::build_llama(cfg, options(WeightDType::kF16), models::Phase::kDecode, *f16_weights);
  ASSERT_TRUE(g) << g.status().to_string();
  EXPECT_EQ("matmul.f16", kernel_of(*g, "model.layers.0.self_attn.q_proj"));
  // In place: the constant's bytes are the file's.
  const TensorInfo* q = constant_named(*g, "model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  auto stored = (*ckpt)->find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_TRUE(stored);
  EXPECT_EQ(q->dtype, DType::kF16);
  EXPECT_EQ(static_cast<const void*>(stored->tensor->data), q->external_data);

  const std::vector<float> f16 = logits_every_mode(cfg, options(WeightDType::kF16), *f16_weights);
  auto f32_weights = checkpoint_weights(*ckpt);  // the same f16 values widened to f32 at load
  const std::vector<float> f32 = logits_every_mode(cfg, options(WeightDType::kF32), *f32_weights);
  ASSERT_FALSE(f16.empty());
  ASSERT_EQ(f16.size(), f32.size());
  // matmul.f16 is matmul.f32 on the widened weights bit for bit (docs/kernels_matmul.md).
  EXPECT_EQ(0, std::memcmp(f16.data(), f32.data(), f16.size() * sizeof(float)));
}

TEST_F(WeightTypesTest, Int4AtLoadWithinToleranceOfF32) {
  const models::LlamaConfig cfg = small_llama();
  auto weights = random_weights(5);
  const std::vector<float> f32 = logits_every_mode(cfg, options(WeightDType::kF32), *weights);
  ASSERT_FALSE(f32.empty());
  for (WeightDType dtype : {WeightDType::kW4A8, WeightDType::kW4}) {
    for (bool symmetric : {false, true}) {
      SCOPED_TRACE(std::string(models::weight_dtype_name(dtype)) + (symmetric ? " symmetric" : " min/max"));
      models::BuildOptions o = options(dtype);
      o.int4_symmetric = symmetric;
      auto g = models::build_llama(cfg, o, models::Phase::kDecode, *weights);
      ASSERT_TRUE(g) << g.status().to_string();
      EXPECT_EQ(dtype == WeightDType::kW4 ? "matmul.w4" : "matmul.w4a8_dyn",
                kernel_of(*g, "model.layers.1.mlp.down_proj"));
      const std::vector<float> q = logits_every_mode(cfg, o, *weights);
      ASSERT_EQ(q.size(), f32.size());
      EXPECT_LT(max_relative_error(q, f32), kInt4Tolerance);
      EXPECT_GT(max_relative_error(q, f32), 0.0);  // it did quantise
      // Greedy ids: the f32 model's in most rows (random tiny-model logits are close together, so
      // a row may flip; measured 12-13 of 13).
      const std::vector<int64_t> want = argmax_rows(f32, cfg.vocab_size), got = argmax_rows(q, cfg.vocab_size);
      size_t same = 0;
      for (size_t r = 0; r < want.size(); ++r) same += want[r] == got[r];
      std::printf("greedy ids equal to f32's in %zu of %zu rows, max error %.3f of the largest logit\n", same,
                  want.size(), max_relative_error(q, f32));
      EXPECT_GE(4 * same, 3 * want.size());
    }
  }
}

TEST_F(WeightTypesTest, Int4GroupMustDivideEveryLayer) {
  models::BuildOptions o = options(WeightDType::kW4A8);
  o.int4_group = 64;  // intermediate_size 96 is not a multiple
  auto weights = random_weights(5);
  auto g = models::build_llama(small_llama(), o, models::Phase::kDecode, *weights);
  ASSERT_FALSE(g);
  EXPECT_NE(g.status().message().find("down_proj"), std::string::npos) << g.status().to_string();
  EXPECT_NE(g.status().message().find("int4_group"), std::string::npos) << g.status().to_string();
  o.int4_group = 48;
  EXPECT_FALSE(o.validate());
}

// ---- packed AWQ / GPTQ checkpoints ------------------------------------------------------------

// Packs 4-bit values q[n][k] (our layout) and zeros into AWQ's GEMM layout or GPTQ's, as their
// packers write them (AutoAWQ's WQLinear_GEMM.from_linear, AutoGPTQ's QuantLinear.pack).
struct Packed {
  std::vector<int32_t> qweight, qzeros, g_idx;
  Shape qweight_shape, qzeros_shape;
};

int nibble(const nn::Int4Weights& w, int64_t n, int64_t k) {
  return (w.packed[static_cast<size_t>(n * w.in / 2 + k / 2)] >> (4 * (k % 2))) & 15;
}

Packed pack(const nn::Int4Weights& w, bool awq, bool gptq_v1) {
  const int64_t N = w.out, K = w.in, G = w.group, groups = K / G;
  const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // AWQ: word bits 4t hold column 8c + order[t]
  Packed p;
  if (awq) {
    p.qweight_shape = {K, N / 8};
    p.qweight.assign(static_cast<size_t>(K * N / 8), 0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < N / 8; ++c)
        for (int t = 0; t < 8; ++t)
          p.qweight[k * (N / 8) + c] |=
              static_cast<int32_t>(static_cast<uint32_t>(nibble(w, 8 * c + order[t], k)) << (4 * t));
  } else {
    p.qweight_shape = {K / 8, N};
    p.qweight.assign(static_cast<size_t>(K / 8 * N), 0);
    for (int64_t i = 0; i < K / 8; ++i)
      for (int64_t n = 0; n < N; ++n)
        for (int t = 0; t < 8; ++t)
          p.qweight[i * N + n] |= static_cast<int32_t>(static_cast<uint32_t>(nibble(w, n, 8 * i + t)) << (4 * t));
    for (int64_t k = 0; k < K; ++k) p.g_idx.push_back(static_cast<int32_t>(k / G));
  }
  p.qzeros_shape = {groups, N / 8};
  p.qzeros.assign(static_cast<size_t>(groups * N / 8), 0);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < N / 8; ++c)
      for (int t = 0; t < 8; ++t) {
        const int64_t n = 8 * c + (awq ? order[t] : t);
        const int z = w.zero[static_cast<size_t>(g * N + n)] - (gptq_v1 ? 1 : 0);
        p.qzeros[g * (N / 8) + c] |= static_cast<int32_t>((static_cast<uint32_t>(z) & 15u) << (4 * t));
      }
  return p;
}

class PackedCheckpointTest : public WeightTypesTest {
 protected:
  // A float checkpoint (f32) and, beside it in dir_/packed, the same Linear weights quantised with
  // group 32 (min/max, f16 scales) and packed as `method`; the LM head too when `pack_head`.
  void write_pair(const std::string& method, bool gptq_v1, bool pack_head, const std::string& extra_fields = "") {
    write_float_checkpoint(WeightDType::kF32);
    packed_dir_ = dir_ + "/packed";
    fs::create_directories(packed_dir_);
    auto ckpt = Checkpoint::open(dir_);
    ASSERT_TRUE(ckpt);
    std::vector<SafetensorsEntry> entries;
    std::vector<std::vector<uint8_t>> keep;
    auto add = [&](const std::string& name, DType dtype, const Shape& shape, const void* data, size_t bytes) {
      keep.emplace_back(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
      entries.push_back({name, dtype, shape, nullptr, bytes});
    };
    for (const std::string& name : (*ckpt)->tensor_names()) {
      auto t = (*ckpt)->find(name);
      ASSERT_TRUE(t);
      const SafetensorsTensor& st = *t->tensor;
      const bool linear = name.find("_proj.weight") != std::string::npos || (pack_head && name == "lm_head.weight");
      if (!linear) {
        add(name, st.dtype, st.shape, st.data, st.bytes);
        continue;
      }
      const std::string module = name.substr(0, name.size() - std::string(".weight").size());
      nn::Int4Options o;
      o.group = 32;
      auto q = nn::quantize_int4(st.data, DType::kF32, st.shape[0], st.shape[1], o);
      ASSERT_TRUE(q) << q.status().to_string();
      const Packed p = pack(*q, method == "awq", gptq_v1);
      add(module + ".qweight", DType::kI32, p.qweight_shape, p.qweight.data(), p.qweight.size() * 4);
      add(module + ".qzeros", DType::kI32, p.qzeros_shape, p.qzeros.data(), p.qzeros.size() * 4);
      add(module + ".scales", DType::kF16, {q->in / 32, q->out}, q->scale.data(), q->scale.size());
      if (!p.g_idx.empty()) add(module + ".g_idx", DType::kI32, {q->in}, p.g_idx.data(), p.g_idx.size() * 4);
    }
    for (size_t i = 0; i < entries.size(); ++i) entries[i].data = keep[i].data();
    ASSERT_TRUE(write_safetensors(packed_dir_ + "/model.safetensors", entries));
    const std::string float_dir = dir_;
    dir_ = packed_dir_;
    std::string q = "{\"quant_method\": \"" + method + "\", \"bits\": 4, \"group_size\": 32";
    if (method == "awq") q += ", \"zero_point\": true, \"version\": \"gemm\", \"modules_to_not_convert\": null";
    if (method == "gptq")
      q += std::string(", \"desc_act\": false, \"sym\": false, \"damp_percent\": 0.01, \"checkpoint_format\": \"") +
           (gptq_v1 ? "gptq" : "gptq_v2") + "\"";
    write_config(q + extra_fields + "}");
    dir_ = float_dir;
  }

  std::string packed_dir_;
};

TEST_F(PackedCheckpointTest, AwqAndGptqLoadAsTheSameWeightsQuantisedAtLoad) {
  struct Case {
    const char* method;
    bool gptq_v1;
  };
  for (const Case& c : {Case{"awq", false}, Case{"gptq", true}, Case{"gptq", false}}) {
    SCOPED_TRACE(std::string(c.method) + (c.gptq_v1 ? " v1" : ""));
    write_pair(c.method, c.gptq_v1, /*pack_head=*/true);
    auto float_ckpt = Checkpoint::open(dir_);
    auto packed_ckpt = Checkpoint::open(packed_dir_);
    ASSERT_TRUE(float_ckpt && packed_ckpt);
    const models::LlamaConfig float_cfg = load_config();
    models::LlamaConfig packed_cfg;
    ASSERT_TRUE(models::load_config_json(**packed_ckpt, packed_cfg));
    ASSERT_TRUE(packed_cfg.quantization.present());
    auto float_weights = checkpoint_weights(*float_ckpt);
    auto packed_weights = checkpoint_weights(*packed_ckpt);
    const models::BuildOptions o = options(WeightDType::kW4A8);
    const std::vector<float> at_load = logits_every_mode(float_cfg, o, *float_weights);
    const std::vector<float> packed = logits_every_mode(packed_cfg, o, *packed_weights);
    ASSERT_FALSE(packed.empty());
    ASSERT_EQ(at_load.size(), packed.size());
    EXPECT_EQ(0, std::memcmp(at_load.data(), packed.data(), packed.size() * sizeof(float)));
    EXPECT_TRUE(models::check_unread_tensors(packed_cfg, *packed_weights));
  }
}

TEST_F(PackedCheckpointTest, FloatLmHeadStaysInItsStoredDtype) {
  write_pair("gptq", true, /*pack_head=*/false);
  auto ckpt = Checkpoint::open(packed_dir_);
  ASSERT_TRUE(ckpt);
  models::LlamaConfig cfg;
  ASSERT_TRUE(models::load_config_json(**ckpt, cfg));
  auto weights = checkpoint_weights(*ckpt);
  auto g = models::build_llama(cfg, options(WeightDType::kW4), models::Phase::kDecode, *weights);
  ASSERT_TRUE(g) << g.status().to_string();
  EXPECT_EQ("matmul.f32", kernel_of(*g, "lm_head"));
  EXPECT_EQ("matmul.w4", kernel_of(*g, "model.layers.0.mlp.gate_proj"));
  // A packed checkpoint needs a 4-bit build.
  auto f32 = models::build_llama(cfg, options(WeightDType::kF32), models::Phase::kDecode, *weights);
  ASSERT_FALSE(f32);
  EXPECT_NE(f32.status().message().find("w4a8 or w4"), std::string::npos) << f32.status().to_string();
}

TEST_F(PackedCheckpointTest, PermutedGptqGroupsAreRefused) {
  write_pair("gptq", true, false);
  // Rewrite one g_idx with a permutation (what act-order stores).
  auto ckpt = Checkpoint::open(packed_dir_);
  ASSERT_TRUE(ckpt);
  std::vector<SafetensorsEntry> entries;
  std::vector<int32_t> permuted;
  for (const std::string& name : (*ckpt)->tensor_names()) {
    auto t = (*ckpt)->find(name);
    const SafetensorsTensor& st = *t->tensor;
    if (name == "model.layers.0.mlp.up_proj.g_idx") {
      permuted.assign(reinterpret_cast<const int32_t*>(st.data), reinterpret_cast<const int32_t*>(st.data) + 64);
      std::swap(permuted[0], permuted[40]);
      entries.push_back({name, st.dtype, st.shape, permuted.data(), st.bytes});
    } else {
      entries.push_back({name, st.dtype, st.shape, st.data, st.bytes});
    }
  }
  const std::string rewritten = dir_ + "/permuted";
  fs::create_directories(rewritten);
  ASSERT_TRUE(write_safetensors(rewritten + "/model.safetensors", entries));
  fs::copy_file(packed_dir_ + "/config.json", rewritten + "/config.json");
  auto permuted_ckpt = Checkpoint::open(rewritten);
  ASSERT_TRUE(permuted_ckpt);
  models::LlamaConfig cfg;
  ASSERT_TRUE(models::load_config_json(**permuted_ckpt, cfg));
  auto weights = checkpoint_weights(*permuted_ckpt);
  auto g = models::build_llama(cfg, options(WeightDType::kW4A8), models::Phase::kDecode, *weights);
  ASSERT_FALSE(g);
  EXPECT_NE(g.status().message().find("model.layers.0.mlp.up_proj.g_idx"), std::string::npos) << g.status().to_string();
  EXPECT_NE(g.status().message().find("act-order"), std::string::npos) << g.status().to_string();
}

TEST_F(WeightTypesTest, QuantizationConfigFieldsOutsideTheSupportedLayoutsAreRefusedByName) {
  struct Case {
    std::string json, key;
  };
  const std::vector<Case> cases = {
      {R"({"quant_method": "fp8", "weight_block_size": [128, 128]})", "quantization_config.quant_method"},
      {R"({"quant_method": "gptq", "bits": 8, "group_size": 128})", "quantization_config.bits"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": true})", "quantization_config.desc_act"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"})", "quantization_config.version"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 100})", "quantization_config.group_size"},
      {R"({"quant_method": "awq", "bits": 4, "zero_point": false})", "quantization_config.zero_point"},
      {R"({"quant_method": "gptq", "bits": 4, "checkpoint_format": "marlin"})",
       "quantization_config.checkpoint_format"},
      {R"({"quant_method": "awq", "bits": 4, "modules_to_not_convert": ["mlp"]})",
       "quantization_config.modules_to_not_convert"},
      {R"({"quant_method": "gptq", "bits": 4, "lm_head": true})", "quantization_config.lm_head"},
      {R"({"quant_method": "gptq", "bits": 4, "frobnicate": 1})", "quantization_config.frobnicate"},
      {R"({"bits": 4})", "quantization_config.quant_method"},
  };
  const float one = 1.0f;
  ASSERT_TRUE(write_safetensors(dir_ + "/model.safetensors", {{"placeholder", DType::kF32, {1}, &one, 4}}));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    write_config(c.json);
    auto ckpt = Checkpoint::open(dir_);
    ASSERT_TRUE(ckpt);
    models::LlamaConfig cfg;
    Status s = models::load_config_json(**ckpt, cfg);
    ASSERT_FALSE(s);
    EXPECT_NE(s.message().find("config.json:"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("'" + c.key + "'"), std::string::npos) << s.to_string();
  }
  // LongCat-Flash reads no quantised checkpoint at all.
  write_config(R"({"quant_method": "awq", "bits": 4})");
  auto ckpt = Checkpoint::open(dir_);
  ASSERT_TRUE(ckpt);
  models::LongCatFlashConfig longcat;
  Status s = models::load_config_json(**ckpt, longcat);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("quantization_config"), std::string::npos) << s.to_string();
}

// ---- batched decode ---------------------------------------------------------------------------

// A batch of sequences decodes each one as it decodes alone: same greedy ids, logits equal up to
// the summation order of batched matmul tiles.
TEST_F(WeightTypesTest, BatchOfSequencesMatchesEachSequenceAlone) {
  const models::LlamaConfig cfg = small_llama();
  auto weights = random_weights(3);
  const std::vector<std::vector<int32_t>> prompts = {{1, 7, 30}, {45, 3, 9}, {2, 2, 11}};
  const std::vector<std::vector<int32_t>> steps = {{4, 8, 16}, {15, 16, 17}};
  for (WeightDType dtype : {WeightDType::kF32, WeightDType::kW4A8}) {
    SCOPED_TRACE(models::weight_dtype_name(dtype));
    models::BuildOptions batched = options(dtype, 3);
    batched.prefill_tokens = 9;
    const std::vector<float> all = logits_every_mode(cfg, batched, *weights, prompts, steps);
    ASSERT_EQ(all.size(), static_cast<size_t>((9 + 2 * 3) * cfg.vocab_size));
    for (size_t b = 0; b < prompts.size(); ++b) {
      models::BuildOptions alone = options(dtype, 1);
      alone.prefill_tokens = 3;
      const std::vector<float> one =
          logits_every_mode(cfg, alone, *weights, {prompts[b]}, {{steps[0][b]}, {steps[1][b]}});
      ASSERT_EQ(one.size(), static_cast<size_t>(5 * cfg.vocab_size));
      // Rows of sequence b in the batched run: its 3 prompt rows, then row b of each step.
      std::vector<size_t> rows = {3 * b, 3 * b + 1, 3 * b + 2, 9 + b, 12 + b};
      for (size_t r = 0; r < rows.size(); ++r) {
        const float* want = one.data() + r * cfg.vocab_size;
        const float* got = all.data() + rows[r] * cfg.vocab_size;
        for (int64_t v = 0; v < cfg.vocab_size; ++v)
          ASSERT_NEAR(got[v], want[v], 1e-4f * (1.0f + std::fabs(want[v]))) << "sequence " << b << " row " << r;
        EXPECT_EQ(std::max_element(want, want + cfg.vocab_size) - want,
                  std::max_element(got, got + cfg.vocab_size) - got);
      }
    }
  }
}

}  // namespace
}  // namespace sk
