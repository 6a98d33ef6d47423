// Model builders: LongCat-Flash (decode step and prefill), its FFN-only AFD variant, DeepSeek-V2/V3
// and a Llama-style decoder (dense or MoE), built with the public graph API from a config, build
// options and a weight source. The same graph runs in every execution mode; the per-layer fusion
// scopes are always there and only matter when the compile options enable super kernels.
//
//   sk::models::LongCatFlashConfig cfg;                      // the published defaults
//   if (sk::Status s = sk::models::load_config_json(*checkpoint, cfg); !s) ...  // every key or an error
//   sk::models::BuildOptions opts;
//   opts.batch = 2; opts.block_size = 16; opts.max_context = 256; opts.prefill_tokens = 8;
//   auto weights = sk::random_weights(42);
//   auto prefill = sk::models::build_longcat_flash(cfg, opts, sk::models::Phase::kPrefill, *weights);
//   auto decode = sk::models::build_longcat_flash(cfg, opts, sk::models::Phase::kDecode, *weights);
//   // compile both, bind both to one CacheStorage (names from cache_names()), then drive them
//   // with PagedCacheLayout: prefill(prompts) once, decode(next_ids) per generated token.
//
// Graph inputs (all i32): `input_ids [T]`, `positions [T]`, `slot_mapping [T]`,
// `block_tables [B, max_blocks]`, and `context_lens [B]` (decode) or `seq_ids [T]` (prefill);
// T = batch at decode, prefill_tokens at prefill. Output `logits f32 [T, vocab_size]` (prefill with
// PrefillLogits::kLastToken: [batch, vocab_size], for the rows in the input `logit_rows`). Caches are
// graph variables named by cache_names(). The AFD variant takes `hidden_states f32 [B, hidden]`
// and returns `hidden_states_out`. docs/MODELS.md describes the graphs and scopes.
#ifndef SUPERKERNEL_MODELS_H_
#define SUPERKERNEL_MODELS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "superkernel/comm.h"
#include "superkernel/graph.h"
#include "superkernel/nn.h"
#include "superkernel/status.h"

namespace sk {
class Checkpoint;
class WeightSource;
class Executable;
}  // namespace sk

namespace sk::models {

// The RoPE keys of config.json as written, set through the dotted keys "rope_parameters.<field>"
// (current transformers) or "rope_scaling.<field>" (the older form, beside a top-level
// `rope_theta`; `type` is the older spelling of `rope_type`). A config's rope_scaling() turns them
// into what transformers computes, or an error naming the key it cannot honour.
struct RopeKeys {
  std::string object;     // "rope_parameters" or "rope_scaling"; empty: neither was given
  std::string rope_type;  // `rope_type`
  std::string type;       // `type`, used when rope_type is empty
  std::optional<double> rope_theta, factor, attention_factor, beta_fast, beta_slow, mscale, mscale_all_dim,
      low_freq_factor, high_freq_factor, partial_rotary_factor;
  std::optional<int64_t> original_max_position_embeddings;
  std::optional<bool> truncate;
  std::vector<std::string> fields;  // every field given, in order (unknown ones too: refused later)
};

// Keys are the published config.json names (and "rope_parameters.<field>" for the RoPE object).
// set() parses one value ("6144", "1e-5", "true", "yarn"); a key the published definition does not
// read is StatusCode::kNotFound (load_config_json lists those as ignored); a key it reads that
// this implementation does not honour is kUnimplemented, a malformed or out-of-range value
// kInvalidArgument, both naming the key. validate() checks ranges and relations.
struct LongCatFlashConfig {
  int64_t vocab_size = 131072;
  int64_t hidden_size = 6144;
  int64_t num_layers = 28;
  int64_t num_attention_heads = 64;
  int64_t q_lora_rank = 1536;
  int64_t kv_lora_rank = 512;
  int64_t qk_nope_head_dim = 128;
  int64_t qk_rope_head_dim = 64;
  int64_t v_head_dim = 128;
  int64_t ffn_hidden_size = 12288;
  int64_t expert_ffn_hidden_size = 2048;
  int64_t n_routed_experts = 512;
  int64_t zero_expert_num = 256;
  int64_t moe_topk = 12;
  double routed_scaling_factor = 6.0;
  double rms_norm_eps = 1e-5;
  double rope_theta = 1e7;
  bool mla_scale_q_lora = true;              // q_nope, q_rope *= sqrt(hidden / q_lora_rank)
  bool mla_scale_kv_lora = true;             // kv *= sqrt(hidden / kv_lora_rank)
  int64_t max_position_embeddings = 131072;  // RoPE scaling (dynamic, yarn's default context)
  bool attention_bias = false;               // q_a_proj, kv_a_proj_with_mqa, o_proj biases
  bool tie_word_embeddings = false;          // the LM head is model.embed_tokens.weight
  // Keys the published code reads that admit one value only (0: absent, the value it implies):
  int64_t num_key_value_heads = 0;  // = num_attention_heads (MLA expands every head from the latent)
  int64_t qk_head_dim = 0;          // = qk_nope_head_dim + qk_rope_head_dim
  int64_t head_dim = 0;             // = qk_rope_head_dim (transformers' rotary embedding reads head_dim)
  int64_t num_hidden_layers = 0;    // = 2 * num_layers (transformers counts the attention sublayers)
  RopeKeys rope;

  Status set(std::string_view key, std::string_view value);
  Status validate() const;
  static std::vector<std::string> keys();
  // The RoPE scaling of rope, rope_theta and max_position_embeddings, or an error naming the key.
  Expected<nn::RopeScaling> rope_scaling() const;
};

// A checkpoint's packed 4-bit weights, from config.json's `quantization_config` (Llama only):
// AWQ (GEMM layout: `qweight` i32 [in, out / 8], `qzeros` i32 [in / G, out / 8], `scales` f16
// [in / G, out]) or GPTQ (`qweight` i32 [in / 8, out], `qzeros` i32 [in / G, out / 8], `scales`
// f16 [in / G, out], `g_idx` i32 [in]), 4 bits, a group G that is a power of two >= 32 (or -1:
// one group over `in`). Set through the dotted keys "quantization_config.<field>"; a field whose
// value the 4-bit kernels cannot run (other bits, act-order, AWQ's GEMV layout, other methods)
// or that this loader does not know is refused naming it. Loaded with BuildOptions::weight_dtype
// kW4A8 or kW4 (docs/WEIGHTS.md, "Packed 4-bit checkpoints").
struct CheckpointQuantization {
  enum class Method { kNone, kAwq, kGptq };
  bool given = false;  // config.json has a quantization_config object
  Method method = Method::kNone;
  int64_t bits = 4;
  int64_t group_size = 128;   // -1: one group over the whole input
  bool desc_act = false;      // GPTQ act-order (refused)
  bool gptq_v1_zeros = true;  // GPTQ checkpoint_format "gptq": zeros stored minus one
  bool present() const { return given; }
};

struct LlamaConfig {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 0;  // 0: num_attention_heads (the published default)
  int64_t head_dim = 0;             // 0: hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 2048;  // RoPE scaling (dynamic, yarn's default context)
  bool attention_bias = false;             // q_proj, k_proj, v_proj, o_proj biases
  bool mlp_bias = false;                   // gate_proj, up_proj, down_proj biases
  RopeKeys rope;
  CheckpointQuantization quantization;  // config.json's quantization_config (absent: float weights)
  // The family, config.json's model_type: transformers' LlamaForCausalLM and the decoders that
  // differ from it by biases, q/k norms, sliding windows or a sparse MoE MLP. set("model_type",
  // ...) chooses the family and its published config class's defaults; each family reads its own
  // keys (a bias is not a Mixtral key, experts are not Llama's), so load_config_json() applies
  // model_type before the other keys.
  //   llama      LlamaForCausalLM: attention_bias (q, k, v, o), mlp_bias
  //   mistral    MistralForCausalLM: no biases, a sliding_window
  //   mixtral    MixtralForCausalLM: every MLP a sparse mixture of num_local_experts SwiGLU experts
  //              of intermediate_size, routed by `mlp.gate` [E, hidden] (softmax over the experts,
  //              the top num_experts_per_tok renormalised)
  //   qwen2      Qwen2ForCausalLM: q, k, v biases (no o_proj bias), windows on layers >=
  //              max_window_layers when use_sliding_window
  //   qwen3      Qwen3ForCausalLM: q_norm / k_norm (RMSNorm over head_dim before RoPE), attention_bias
  //   qwen2_moe  Qwen2MoeForCausalLM: qwen2's attention (qkv_bias), sparse layers of num_experts
  //              experts of moe_intermediate_size plus a shared expert of shared_expert_intermediate_size
  //              scaled by sigmoid(`mlp.shared_expert_gate`), norm_topk_prob, dense layers
  //              (intermediate_size) in mlp_only_layers or off decoder_sparse_step
  //   qwen3_moe  Qwen3MoeForCausalLM: qwen3's attention, qwen2_moe's experts without the shared one
  enum class Family { kLlama, kMistral, kMixtral, kQwen2, kQwen3, kQwen2Moe, kQwen3Moe };
  Family family = Family::kLlama;
  bool qkv_bias = false;  // q_proj, k_proj, v_proj biases without o_proj's (qwen2, qwen2_moe)
  bool qk_norm = false;   // q_norm, k_norm (qwen3, qwen3_moe)
  // Sliding-window attention: a layer with a window of W attends to the W most recent positions.
  // Builds refuse a max_context beyond a layer's window (windowed attention is not implemented;
  // a cache no longer than the window masks nothing). attention_window() resolves the keys.
  int64_t sliding_window = 0;            // 0: null
  bool use_sliding_window = false;       // qwen families: the window applies only when true
  int64_t max_window_layers = 0;         // qwen2, qwen2_moe: which layers get the window
  std::vector<std::string> layer_types;  // qwen2, qwen3, qwen2_moe: "full_attention" | "sliding_attention"
  int64_t num_local_experts = 0;         // E (Qwen's num_experts); 0: a dense model
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;            // an expert's hidden size; 0: intermediate_size (mixtral)
  int64_t shared_expert_intermediate_size = 0;  // qwen2_moe's shared expert
  bool norm_topk_prob = true;                   // renormalise the top-k weights (mixtral: always)
  int64_t decoder_sparse_step = 1;              // qwen MoE: layer i is sparse when (i + 1) % step == 0
  std::vector<int64_t> mlp_only_layers;         // qwen MoE: layers with a dense MLP
  bool is_moe() const { return num_local_experts > 0; }
  // Whether `layer`'s MLP is the sparse MoE block (every layer of mixtral; the qwen rule).
  bool is_sparse_layer(int64_t layer) const;
  int64_t expert_intermediate_size() const {
    return moe_intermediate_size > 0 ? moe_intermediate_size : intermediate_size;
  }
  // The window of `layer` in tokens, 0 for full attention.
  int64_t attention_window(int64_t layer) const;
  const char* model_type() const;  // "llama", "mixtral", ...
  // The published class name ("Llama", "Qwen2Moe", ...), for messages.
  const char* model_name() const;

  Status set(std::string_view key, std::string_view value);
  Status validate() const;
  // Every config.json key of every family (those of some families only marked with them).
  static std::vector<std::string> keys();
  // The RoPE scaling of rope, rope_theta and max_position_embeddings, or an error naming the key.
  Expected<nn::RopeScaling> rope_scaling() const;
  int64_t resolved_head_dim() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
  int64_t resolved_kv_heads() const { return num_key_value_heads > 0 ? num_key_value_heads : num_attention_heads; }
};

// DeepSeek-V2 and DeepSeek-V3 (config.json's model_type deepseek_v2 / deepseek_v3, transformers'
// DeepseekV2Config / DeepseekV3Config): MLA attention (absorbed, as LongCat-Flash's), dense SwiGLU
// MLPs in the first first_k_dense_replace layers, then a MoE of n_routed_experts routed experts
// (num_experts_per_tok of them per token) plus n_shared_experts shared ones. V2 routes by softmax
// and plain top-k (topk_method greedy); V3 by sigmoid scores plus e_score_correction_bias, within
// the topk_group best of n_group groups, renormalised when norm_topk_prob. set("model_type", ...)
// chooses the family and its published defaults.
struct DeepseekConfig {
  enum class Family { kV2, kV3 };
  Family family = Family::kV3;
  int64_t vocab_size = 129280;
  int64_t hidden_size = 7168;
  int64_t intermediate_size = 18432;
  int64_t moe_intermediate_size = 2048;
  int64_t num_hidden_layers = 61;
  int64_t num_attention_heads = 128;
  int64_t n_shared_experts = 1;
  int64_t n_routed_experts = 256;
  double routed_scaling_factor = 2.5;
  int64_t kv_lora_rank = 512;
  int64_t q_lora_rank = 1536;  // 0 (config.json null): q_proj instead of q_a_proj / q_b_proj
  int64_t qk_rope_head_dim = 64;
  int64_t v_head_dim = 128;
  int64_t qk_nope_head_dim = 128;
  int64_t n_group = 8;     // 0 (null): 1
  int64_t topk_group = 4;  // 0 (null): n_group
  int64_t num_experts_per_tok = 8;
  int64_t first_k_dense_replace = 3;
  bool norm_topk_prob = true;
  int64_t max_position_embeddings = 4096;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  bool rope_interleave = true;  // V3: rotary pairs (x0, x1), (x2, x3), ...; V2 always interleaves
  bool attention_bias = false;  // q_a_proj, kv_a_proj_with_mqa, o_proj biases
  bool mlp_bias = false;        // V2: the dense and shared MLPs' biases
  bool group_limited = false;   // V2's topk_method group_limited_greedy (refused unless it selects all)
  // Keys the published code reads that admit one value only (0: absent, the value it implies):
  // = num_attention_heads; V3's published default is 128 (DeepSeek-V3's heads), V2's none (0)
  int64_t num_key_value_heads = 128;
  int64_t head_dim = 0;                  // = qk_rope_head_dim
  int64_t qk_head_dim = 0;               // = qk_nope_head_dim + qk_rope_head_dim
  int64_t num_nextn_predict_layers = 0;  // V3's multi-token-prediction layers (not run; their tensors skipped)
  RopeKeys rope;

  const char* model_type() const { return family == Family::kV2 ? "deepseek_v2" : "deepseek_v3"; }
  const char* model_name() const { return family == Family::kV2 ? "DeepseekV2" : "DeepseekV3"; }
  bool is_moe_layer(int64_t layer) const { return layer >= first_k_dense_replace; }
  int64_t groups() const { return n_group > 0 ? n_group : 1; }
  int64_t groups_chosen() const { return topk_group > 0 ? topk_group : groups(); }

  Status set(std::string_view key, std::string_view value);
  Status validate() const;
  static std::vector<std::string> keys();
  Expected<nn::RopeScaling> rope_scaling() const;
};

// A config.json key load_config_json() did not apply, with why (`superkernel -v` lists them).
struct IgnoredKey {
  std::string key;
  int line = 0;
  std::string why;
};

// Sets `config` from every key of a checkpoint's config.json (Checkpoint::config_tree()), then
// validates it. Each key the published definition (transformers' LongcatFlashConfig /
// LlamaConfig and their modules) reads is applied or refused; errors read
// "DIR/config.json:LINE: key 'k': ...". Keys that do not change the logits (model_type,
// torch_dtype, token ids, ...) and keys the published definition does not read are appended to
// *ignored. Aliases transformers maps onto a key (LongCat's num_experts_per_tok, ...) set it; an
// alias disagreeing with its key is an error.
Status load_config_json(const Checkpoint& checkpoint, LongCatFlashConfig& config,
                        std::vector<IgnoredKey>* ignored = nullptr);
Status load_config_json(const Checkpoint& checkpoint, LlamaConfig& config, std::vector<IgnoredKey>* ignored = nullptr);
Status load_config_json(const Checkpoint& checkpoint, DeepseekConfig& config,
                        std::vector<IgnoredKey>* ignored = nullptr);

// After every graph of a model is built from `weights`: the checkpoint tensors no graph read are
// an error listing them (the published model reads every tensor it has, so an unread tensor means
// the config and the checkpoint disagree: more layers than num_layers, biases the config turns
// off, an LM head stored beside tie_word_embeddings, ...). Tensors the published definition itself
// skips (LongCat-Flash's multi-token-prediction layer `model.mtp.*`, stored
// `rotary_emb.inv_freq` buffers) are not errors; they, and with allow_unread every unread tensor,
// are appended to *skipped. With `ep_rank` = {rank, ep} (expert parallelism, ep > 1) the per-expert
// tensors of the other ranks' experts (`...mlp.experts.{e}.*`) are not errors either: another
// process reads them.
Status check_unread_tensors(const LongCatFlashConfig& config, const WeightSource& weights, bool allow_unread = false,
                            std::vector<std::string>* skipped = nullptr, std::pair<int32_t, int32_t> ep_rank = {0, 1});
Status check_unread_tensors(const LlamaConfig& config, const WeightSource& weights, bool allow_unread = false,
                            std::vector<std::string>* skipped = nullptr);
// DeepSeek-V3's multi-token-prediction layers (model.layers.{i} for i >= num_hidden_layers, with
// num_nextn_predict_layers) are skipped, as transformers skips them.
Status check_unread_tensors(const DeepseekConfig& config, const WeightSource& weights, bool allow_unread = false,
                            std::vector<std::string>* skipped = nullptr);

// How Linear weights are stored and multiplied: f32, bf16 (matmul.bf16), f16 (matmul.f16), int8
// weights with per-channel scales and per-token dynamic activation quantisation
// (matmul.w8a8_dyn), or group-wise 4-bit weights (BuildOptions::int4_group) with per-token int8
// activations (w4a8: matmul.w4a8_dyn) or f32 activations (w4: matmul.w4). 4-bit weights come from
// the checkpoint when it holds packed AWQ / GPTQ weights (LlamaConfig::quantization), else they
// are quantised at load (nn::quantize_int4). Norms, embeddings, the router and the MLA absorbed
// projections stay f32; MoE experts have no 4-bit grouped matmul (refused).
enum class WeightDType { kF32, kBF16, kW8A8, kF16, kW4A8, kW4 };
const char* weight_dtype_name(WeightDType dtype);
// "f32" | "bf16" | "f16" | "w8a8" | "w4a8" | "w4"
Expected<WeightDType> parse_weight_dtype(std::string_view text);
bool is_int4(WeightDType dtype);

enum class Phase { kDecode, kPrefill };

// The rows the prefill graph computes logits for: every token's (`logits [T, vocab]`, what the
// tests compare with a reference position by position), or only each sequence's last prompt
// token's (`logits [B, vocab]`, row b for sequence b, chosen by the input `logit_rows`), which is
// all that generation reads. kLastToken skips T - B rows of the LM head: on a small model with a
// large vocabulary that is a third of the prompt's time.
enum class PrefillLogits { kEveryToken, kLastToken };

struct BuildOptions {
  WeightDType weight_dtype = WeightDType::kF32;
  // 4-bit weights quantised at load: values per scale (a power of two >= 32 dividing every Linear
  // input size), and symmetric groups (zero point 8, as llama.cpp's Q4_0) instead of min/max ones
  // (as AWQ and GPTQ). A checkpoint's packed 4-bit weights bring their own grouping.
  int64_t int4_group = 128;
  bool int4_symmetric = false;
  DType kv_cache_dtype = DType::kF32;  // kF32 or kBF16
  int64_t batch = 1;                   // B sequences (decode tokens per step, AFD tokens)
  int64_t prefill_tokens = 16;         // T tokens of the prefill graph (all sequences together)
  PrefillLogits prefill_logits = PrefillLogits::kEveryToken;
  int64_t block_size = 16;  // paged-cache slots per block
  // Sequences the paged caches hold blocks for; 0: `batch`. A server keeps one set of caches for
  // its most concurrent sequences and decodes with graphs of fewer rows (batch < cache_sequences)
  // whose block tables point into them, so a lightly loaded step pays for its own rows only.
  int64_t cache_sequences = 0;
  int64_t max_context = 256;   // tokens per sequence the cache holds
  int32_t moe_core_limit = 0;  // cores of the MoE scope (LimitCoreNum); 0 = no limit
  // 0: every op on the main stream. 1, 2: LongCat-Flash's shortcut MoE on stream "moe" under
  // moe_core_limit, its scopes fused with the main branch's into one super kernel (scope option
  // stream-fusion=1 added unless the scope's options set it); DeepSeek's routed experts on "moe"
  // beside its shared experts, in the MoE scope's super kernel. The AFD variant has one branch
  // only and builds the same graph either way; the Llama builder refuses it.
  int32_t multi_streams = 0;
  // AFD: each layer's super kernel also prefetches (sk::prefetch) the next layer's router and
  // expert gate/up weights from a stream "prefetch" of its own, under prefetch_core_limit (scope
  // option stream-fusion=1 added unless the scope's options set it). Needs multi_streams 1 or 2.
  bool prefetch = false;
  int32_t prefetch_core_limit = 0;  // cores of the prefetch stream (LimitCoreNum); 0 = no limit
  // Options string for a scope ("key=value:key=value", docs/OPTIONS.md), from its name.
  std::function<std::string(std::string_view scope)> scope_options;
  // LongCat-Flash across processes (docs/MODELS.md, "Parallel LongCat-Flash"): `tp` ranks split
  // the attention heads and the dense MLPs' hidden units (an all-reduce after o_proj and
  // down_proj), `ep` ranks split the routed experts (tokens dispatched and combined by
  // all-to-all-v; zero experts stay on the token's rank). Each of tp and ep is 1 or
  // ranks.size; `ranks` is this process in the communicator (sk::comm::Communicator::group()).
  // The graph then holds only this rank's shard of each split weight.
  struct Parallel {
    int32_t tp = 1;
    int32_t ep = 1;
    comm::Group ranks;
  };
  Parallel parallel;

  Status validate() const;
};

// Builders. Weight names are the published ones (Linear weights [out, in]); `weights` creates
// the graph's constants. Errors name the option, config key or tensor at fault.
Expected<Graph> build_longcat_flash(const LongCatFlashConfig& config, const BuildOptions& options, Phase phase,
                                    WeightSource& weights);
// FFN-only (attention-FFN disaggregation) model: per layer router + experts, one scope
// `scope_{i}_moe`; `hidden_states [batch, hidden]` in, `hidden_states_out` out.
Expected<Graph> build_longcat_flash_afd(const LongCatFlashConfig& config, const BuildOptions& options,
                                        WeightSource& weights);
Expected<Graph> build_llama(const LlamaConfig& config, const BuildOptions& options, Phase phase, WeightSource& weights);
Expected<Graph> build_deepseek(const DeepseekConfig& config, const BuildOptions& options, Phase phase,
                               WeightSource& weights);

// Graph variables holding the paged caches (shared by a model's prefill and decode graphs).
std::vector<std::string> cache_names(const LongCatFlashConfig& config);
std::vector<std::string> cache_names(const LlamaConfig& config);
std::vector<std::string> cache_names(const DeepseekConfig& config);

// Names of the graph inputs and outputs.
inline constexpr const char* kInputIds = "input_ids";
inline constexpr const char* kPositions = "positions";
inline constexpr const char* kSlotMapping = "slot_mapping";
inline constexpr const char* kBlockTables = "block_tables";
inline constexpr const char* kContextLens = "context_lens";
inline constexpr const char* kSeqIds = "seq_ids";
inline constexpr const char* kLogitRows = "logit_rows";
inline constexpr const char* kLogits = "logits";
inline constexpr const char* kHiddenStates = "hidden_states";
inline constexpr const char* kHiddenStatesOut = "hidden_states_out";

// The inputs of one run, as PagedCacheLayout produces them.
struct StepInputs {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> positions;
  std::vector<int32_t> slot_mapping;  // -1: padding token, nothing is written
  std::vector<int32_t> seq_ids;       // prefill
  std::vector<int32_t> logit_rows;    // prefill with PrefillLogits::kLastToken: each sequence's last row
  std::vector<int32_t> context_lens;  // decode
  std::vector<int32_t> block_tables;  // [batch, max_blocks]
  Phase phase = Phase::kDecode;
};

// Host-side bookkeeping of the paged caches: which blocks each sequence owns (blocks of the
// sequences interleave, so the block tables are not the identity), how many tokens each holds,
// and the inputs of the next prefill or decode run.
//
//   sk::models::PagedCacheLayout cache(opts);
//   auto in = cache.prefill({{1, 2, 3}, {4, 5}});   // pads to opts.prefill_tokens
//   set_step_inputs(*prefill_exe, *in);  prefill_exe->run();
//   for (...) { in = cache.decode(next_ids); set_step_inputs(*decode_exe, *in); decode_exe->run(); }
class PagedCacheLayout {
 public:
  // Options with a non-positive batch, block_size, max_context or prefill_tokens give an empty
  // layout whose prefill() and decode() return the error (status()).
  explicit PagedCacheLayout(const BuildOptions& options);
  const Status& status() const { return status_; }

  int64_t batch() const { return batch_; }
  int64_t block_size() const { return block_size_; }
  int64_t max_blocks_per_sequence() const { return max_blocks_; }
  int64_t num_blocks() const { return batch_ * max_blocks_; }
  int64_t context_len(int64_t sequence) const { return in_batch(sequence) ? lens_[sequence] : 0; }
  // Cache slot of token `position` of `sequence`; -1 outside the batch or max_context.
  int32_t slot(int64_t sequence, int64_t position) const;

  // Appends one prompt per sequence (prompts.size() == batch, total <= prefill_tokens; the rest
  // is padding whose logits mean nothing). Errors: too many tokens, context overflow.
  Expected<StepInputs> prefill(const std::vector<std::vector<int32_t>>& prompts);
  // Appends one token per sequence (ids.size() == batch).
  Expected<StepInputs> decode(const std::vector<int32_t>& ids);
  // Row of the prefill logits holding the last prompt token of `sequence` (after prefill()):
  // `sequence` itself when the graph computes the last tokens' logits only.
  int64_t last_prefill_row(int64_t sequence) const {
    if (!in_batch(sequence)) return -1;
    return prefill_logits_ == PrefillLogits::kLastToken ? sequence : last_rows_[sequence];
  }
  // Forgets every sequence's tokens (the caches' contents are then stale, never read).
  void reset();

 private:
  bool in_batch(int64_t sequence) const { return sequence >= 0 && sequence < batch_; }
  Status status_;
  int64_t batch_, block_size_, max_blocks_, max_context_, prefill_tokens_;
  PrefillLogits prefill_logits_;
  std::vector<int64_t> lens_;
  std::vector<int64_t> last_rows_;
  std::vector<int32_t> block_tables_;
};

// Feeds every input of `inputs` to the executable.
Status set_step_inputs(Executable& exe, const StepInputs& inputs);

// Caller-owned memory for a model's caches, shared by every executable bound to it (the prefill
// and decode executables, or the same step compiled in several modes).
//
//   sk::models::CacheStorage caches;
//   caches.bind(*prefill_exe, sk::models::cache_names(cfg));
//   caches.bind(*decode_exe, sk::models::cache_names(cfg));
class CacheStorage {
 public:
  // The first call allocates a zeroed buffer per name, sized from `exe`'s variable; every call
  // binds the buffers to `exe` (Executable::bind_variable). Sizes must agree between executables.
  Status bind(Executable& exe, const std::vector<std::string>& names);
  // Zeroes every buffer: empty caches (use with PagedCacheLayout::reset()).
  void clear();

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<uint64_t>> buffers_;  // 8-byte aligned
  std::vector<size_t> bytes_;
};

// The memory a model's graphs will hold, from its config and build options alone (nothing is
// built or allocated), so that a model too large for the machine can be refused before its
// weights are made or mapped.
//
//   sk::models::MemoryEstimate m = sk::models::estimate_memory(cfg, opts);
//   if (m.weight_bytes + m.cache_bytes > available) ...   // name the sizes, do not build
// With BuildOptions::parallel, one rank's share: its heads, hidden units and experts.
struct MemoryEstimate {
  int64_t weight_bytes = 0;  // the decode graph's constants (weights, norms, rope table, absorbed MLA)
  int64_t cache_bytes = 0;   // the cache variables (cache_names()), once
};
MemoryEstimate estimate_memory(const LongCatFlashConfig& config, const BuildOptions& options);
MemoryEstimate estimate_memory(const LlamaConfig& config, const BuildOptions& options);
MemoryEstimate estimate_memory(const DeepseekConfig& config, const BuildOptions& options);
// The FFN-only AFD variant (build_longcat_flash_afd): no caches.
MemoryEstimate estimate_memory_afd(const LongCatFlashConfig& config, const BuildOptions& options);

}  // namespace sk::models

#endif  // SUPERKERNEL_MODELS_H_
