// What the `superkernel` commands share: a config turned into a runtime and model graphs, and a
// Generator that compiles them for one execution mode and drives prefill + decode steps.
//
//   auto model = build_model(cfg, progress);                  // graphs, built once
//   auto gen = Generator::create(*model, *runtime, ExecutionMode::kSuperKernel);
//   (*gen)->prefill(prompts);  (*gen)->decode_step();          // ids(), logits()
#ifndef SUPERKERNEL_TOOLS_MODEL_SESSION_H_
#define SUPERKERNEL_TOOLS_MODEL_SESSION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "progress.h"
#include "superkernel/models.h"
#include "superkernel/runtime.h"

namespace sk::cli {

enum class Architecture { kLongCatFlash, kLongCatFlashAfd, kLlama, kDeepseek };

// The graphs a config describes. LongCat-Flash and Llama have a prefill and a decode graph that
// share their paged caches; the AFD variant has one FFN step graph (`decode`).
struct Model {
  Architecture arch = Architecture::kLlama;
  std::string name;  // architecture as the config names it
  models::BuildOptions build;
  std::optional<Graph> prefill;
  Graph decode;
  std::vector<std::string> caches;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t weight_bytes = 0;  // bytes of the decode graph's constants
  int64_t cache_bytes = 0;   // bytes of the caches (decode graph variables), once
  // What loading left aside: config.json keys that do not change the logits, checkpoint tensors
  // not read (the published definition's own skips, or all with model.allow_unused_tensors).
  std::vector<std::string> notes;
};

Expected<std::shared_ptr<Runtime>> create_runtime(const config::Config& cfg);
// A compile error of `g` with the config line whose scope options the scope it names got (the
// error as it is when it names no such scope).
Status locate_compile_error(const config::Config& cfg, const Graph& g, const Status& s);
// Builds the model's graphs. Before any weight is made or mapped, the weights and `cache_copies`
// copies of the caches (one per Generator the command keeps alive at once) are estimated from the
// config and checked against the memory available; a model that does not fit is an error naming
// the config line, the bytes needed and the bytes available.
// `ranks`: this process among those of a `parallel` config (BuildOptions::parallel).
Expected<std::unique_ptr<Model>> build_model(const config::Config& cfg, Progress& progress, int cache_copies,
                                             const comm::Group& ranks = {});

// The machine's available memory (MemAvailable of /proc/meminfo; the free physical pages where
// that is missing).
int64_t available_memory_bytes();
// "1.5 GiB", "12.0 MiB", "512 bytes".
std::string human_bytes(int64_t bytes);

// One line of what the model takes: "memory: weights 7.6 MiB, KV cache 64.0 KiB (one buffer the
// executables share), arenas 1.2 MiB (decode 0.4 MiB, prefill 0.8 MiB); 21.0 GiB available".
// `arenas`: the executables by name, with the arena each planned.
std::string memory_plan(const Model& model, const std::vector<std::pair<std::string, const Executable*>>& arenas);

// The prompts of every sequence: `ids` (the same for each) or, when empty, decode.prompt_tokens
// ids derived from decode.sampling.seed.
std::vector<std::vector<int32_t>> make_prompts(const config::Config& cfg, const Model& model,
                                               const std::vector<int32_t>& ids);

// One execution mode of a model: its executables, the caches they share, the host-side cache
// layout and the sampler. Results of the last step: logits() and ids().
class Generator {
 public:
  static Expected<std::unique_ptr<Generator>> create(const config::Config& cfg, const Model& model, Runtime& runtime,
                                                     const CompileOptions& options);
  ~Generator();

  // Prefill (LongCat-Flash, Llama) of one prompt per sequence, then samples each sequence's next
  // token. AFD: feeds deterministic hidden states instead (prompts are ignored).
  Status prefill(const std::vector<std::vector<int32_t>>& prompts);
  // One decode step over the last sampled ids (AFD: one FFN step over the last outputs).
  Status decode_step();
  // Runs the decode executable again on the inputs of the last step (for timing).
  Status rerun_step();
  // Runs the prefill executable again on the inputs of the last prefill (for timing; it rewrites
  // the same cache slots with the same values).
  Status rerun_prefill();

  // The logits (AFD: hidden_states_out) of the sequences' last tokens, [batch, vocab_size].
  const std::vector<float>& logits() const { return logits_; }
  // The tokens sampled from logits() (empty for AFD).
  const std::vector<int32_t>& ids() const { return ids_; }
  Executable& decode_executable() { return *decode_; }
  // The executables with their names, for memory_plan().
  std::vector<std::pair<std::string, const Executable*>> executables() const;
  // The step inputs of the last decode step (empty before the first).
  const models::StepInputs& last_inputs() const { return last_; }
  // Binds the shared caches to another executable of the decode graph (same contents).
  Status bind_caches(Executable& exe);

 private:
  Generator() = default;
  Status read_logits(Executable& exe, const std::vector<int64_t>& rows);
  Status sample();

  const config::Config* cfg_ = nullptr;
  const Model* model_ = nullptr;
  std::unique_ptr<Executable> prefill_, decode_, sampler_;
  models::CacheStorage caches_;
  std::optional<models::PagedCacheLayout> layout_;
  models::StepInputs last_;
  std::vector<float> logits_;
  std::vector<int32_t> ids_;
  int64_t step_ = 0;
};

}  // namespace sk::cli

#endif  // SUPERKERNEL_TOOLS_MODEL_SESSION_H_
