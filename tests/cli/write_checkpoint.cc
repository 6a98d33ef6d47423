// Test helper: writes the random weights a config describes as a checkpoint directory in the
// published layout (config.json + model.safetensors), and a config that runs that checkpoint.
// `superkernel run` on both configs must then print the same tokens.
//
//   sk_cli_write_checkpoint configs/tiny-llama.yaml out/ckpt     # writes out/ckpt/{config.json,
//                                                                 #   model.safetensors,run.yaml}
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "config/config.h"
#include "superkernel/models.h"
#include "superkernel/weights.h"

namespace {

using namespace sk;

template <typename ModelConfig, typename Build>
Expected<Graph> decode_graph(const config::Config& cfg, Build build) {
  ModelConfig mc;
  for (const config::ModelKey& k : cfg.model.keys) SK_RETURN_IF_ERROR(mc.set(k.key, k.value));
  models::BuildOptions opts;
  opts.batch = cfg.decode.batch;
  auto weights = random_weights(cfg.model.seed);
  return build(mc, opts, models::Phase::kDecode, *weights);
}

Status write(const config::Config& cfg, const std::string& dir) {
  Expected<Graph> g = Status::invalid_argument("architecture '" + cfg.model.architecture + "' is not supported here");
  if (cfg.model.architecture == "llama") g = decode_graph<models::LlamaConfig>(cfg, models::build_llama);
  if (cfg.model.architecture == "longcat_flash") {
    g = decode_graph<models::LongCatFlashConfig>(cfg, models::build_longcat_flash);
  }
  if (!g) return g.status();
  std::filesystem::create_directories(dir);
  std::vector<SafetensorsEntry> entries;
  for (size_t i = 0; i < g->num_tensors(); ++i) {
    const TensorInfo& t = g->tensor(static_cast<int32_t>(i));
    // The weight source's tensors only: the graph's own constants (RoPE table, scales, absorbed
    // projections) are computed from them and are not part of a checkpoint.
    if (t.kind != TensorKind::kConstant || t.external_data == nullptr) continue;
    entries.push_back({t.name, t.dtype, t.shape, t.external_data, static_cast<size_t>(t.storage_bytes)});
  }
  SK_RETURN_IF_ERROR(write_safetensors(dir + "/model.safetensors", entries));
  std::ofstream json(dir + "/config.json");
  json << "{\n  \"model_type\": \"" << cfg.model.architecture << "\"";
  for (const config::ModelKey& k : cfg.model.keys) json << ",\n  \"" << k.key << "\": " << k.value;
  json << "\n}\n";
  std::ofstream yaml(dir + "/run.yaml");
  yaml << "model_config:\n  exe_mode: " << execution_mode_name(cfg.exe_mode) << "\nmodel:\n  checkpoint: .\n"
       << "runtime:\n  cores: " << cfg.runtime.cores << "\ndecode:\n  batch: " << cfg.decode.batch
       << "\n  prompt_tokens: " << cfg.decode.prompt_tokens << "\n  new_tokens: " << cfg.decode.new_tokens << "\n";
  if (cfg.decode.sampling.temperature > 0) {
    yaml << "  sampling: {temperature: " << cfg.decode.sampling.temperature << ", top_k: " << cfg.decode.sampling.top_k
         << ", top_p: " << cfg.decode.sampling.top_p << ", seed: " << cfg.decode.sampling.seed << "}\n";
  }
  if (!json || !yaml) return Status::not_found("cannot write into " + dir);
  return Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CONFIG OUTDIR\n", argv[0]);
    return 2;
  }
  auto cfg = sk::config::load_config(argv[1]);
  if (!cfg) {
    std::fprintf(stderr, "%s\n", cfg.status().message().c_str());
    return 1;
  }
  if (sk::Status s = write(*cfg, argv[2]); !s) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  return 0;
}
