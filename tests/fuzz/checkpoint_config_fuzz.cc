// Fuzz target: a checkpoint directory's JSON files as a user downloads them. The first byte picks
// the file the rest becomes: even, `config.json` (read by Checkpoint::open, then by every
// architecture's config loader, models::load_config_json, key by key); odd,
// `model.safetensors.index.json` (beside a fixed config.json and one small shard). The files go
// to a directory of this process under /tmp, opened by path as `superkernel` opens a checkpoint.
// Invariants: no crash and no exception; every error names the checkpoint directory (the file
// and, for config keys, the line), so a user can find what is at fault; an accepted config.json
// key is either applied, refused with an error, or listed as ignored with a reason.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "superkernel/models.h"
#include "superkernel/weights.h"

namespace {

namespace fs = std::filesystem;

const std::string& checkpoint_dir() {
  static const std::string dir = [] {
    std::string d = "/tmp/sk_fuzz_checkpoint_" + std::to_string(getpid());
    fs::create_directories(d);
    // One shard holding one tensor, which an index may name.
    std::vector<float> w(4, 1.0f);
    sk::Status s = sk::write_safetensors(d + "/model.safetensors", {{"w", sk::DType::kF32, {4}, w.data(), 16}});
    SK_FUZZ_CHECK(s.is_ok(), "cannot write the shard: " + s.to_string());
    return d;
  }();
  return dir;
}

void write(const std::string& path, const char* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data, static_cast<std::streamsize>(size));
  f.close();
  SK_FUZZ_CHECK(static_cast<bool>(f), "cannot write " + path);
}

void check_names_dir(const sk::Status& s, const std::string& dir) {
  if (s.is_ok()) return;
  SK_FUZZ_CHECK(s.message().find(dir) != std::string::npos, "error does not name the checkpoint: " + s.message());
}

template <typename Config>
void load(const sk::Checkpoint& ckpt, const std::string& dir) {
  Config config;
  std::vector<sk::models::IgnoredKey> ignored;
  check_names_dir(sk::models::load_config_json(ckpt, config, &ignored), dir);
  for (const sk::models::IgnoredKey& k : ignored)
    SK_FUZZ_CHECK(!k.why.empty(), "ignored key '" + k.key + "' without a reason");  // "" is a JSON key too
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string& dir = checkpoint_dir();
  const bool index = (data[0] & 1) != 0;
  const char* body = reinterpret_cast<const char*>(data + 1);
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (index) {
    static const char kConfig[] = "{\"model_type\": \"llama\", \"hidden_size\": 64}";
    write(dir + "/config.json", kConfig, sizeof(kConfig) - 1);
    write(index_path, body, size - 1);
  } else {
    fs::remove(index_path);
    write(dir + "/config.json", body, size - 1);
  }
  sk::Expected<std::shared_ptr<sk::Checkpoint>> ckpt = sk::Checkpoint::open(dir);
  if (!ckpt) {
    check_names_dir(ckpt.status(), dir);
    return 0;
  }
  for (const std::string& name : (*ckpt)->tensor_names()) {
    sk::Expected<sk::CheckpointTensor> t = (*ckpt)->find(name);
    SK_FUZZ_CHECK(static_cast<bool>(t), "a listed tensor is not found: " + name);
  }
  if (!index) {
    load<sk::models::LlamaConfig>(**ckpt, dir);
    load<sk::models::LongCatFlashConfig>(**ckpt, dir);
    load<sk::models::DeepseekConfig>(**ckpt, dir);
  }
  return 0;
}
