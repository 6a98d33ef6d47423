// `superkernel run`: prefill, decode N tokens, print the token ids, per-token latency and tokens/s.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>

#include "bench_common.h"
#include "commands.h"

namespace sk::cli {
namespace {

Expected<std::vector<int32_t>> parse_ids(const std::string& text) {
  if (text.empty()) return Status::invalid_argument("--prompt: expected comma-separated token ids >= 0, got nothing");
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    int32_t v = -1;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 0) {
      return Status::invalid_argument("--prompt: expected comma-separated token ids >= 0, got '" + item + "'");
    }
    ids.push_back(v);
    pos = comma + 1;
  }
  return ids;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int run_command(const RunArgs& args) {
  Progress progress(args.common.quiet);
  std::vector<int32_t> prompt;
  if (args.prompt_given) {
    auto ids = parse_ids(args.prompt);
    if (!ids) return fail(ids.status(), kExitUsage);
    prompt = std::move(*ids);
  }
  const Status no_tokens = Status::invalid_argument(
      "--prompt: the FFN-only model longcat_flash_afd takes no tokens (it steps over hidden states from the "
      "attention side); leave --prompt out");
  auto opened = open_session(args.common, progress, [&](config::Config& cfg) -> Status {
    if (args.prompt_given && cfg.model.architecture == "longcat_flash_afd") return no_tokens;
    if (args.tokens > 0) cfg.decode.new_tokens = args.tokens;
    if (!prompt.empty()) cfg.decode.prompt_tokens = static_cast<int>(prompt.size());
    if (!args.mode.empty()) cfg.exe_mode = *parse_execution_mode(args.mode);
    return Status::ok();
  });
  if (auto* code = std::get_if<int>(&opened)) return *code;
  Session& s = *std::get<std::unique_ptr<Session>>(opened);
  const config::Config& cfg = s.cfg;
  const bool afd = s.model->arch == Architecture::kLongCatFlashAfd;
  if (afd && args.prompt_given) return fail(no_tokens, kExitUsage);  // named by a checkpoint's model_type
  for (int32_t id : prompt) {
    if (id >= s.model->vocab_size) {
      return fail(Status::invalid_argument("--prompt: token id " + std::to_string(id) + " is not below vocab_size " +
                                           std::to_string(s.model->vocab_size)),
                  kExitUsage);
    }
  }

  progress.update(std::string("compiling (") + execution_mode_name(cfg.exe_mode) + ")");
  auto gen = Generator::create(cfg, *s.model, *s.runtime, cfg.compile_options(cfg.exe_mode));
  if (!gen) {
    progress.done();
    return fail(gen.status(), failure_code(cfg, gen.status()));
  }
  const auto prompts = make_prompts(cfg, *s.model, prompt);
  progress.done();
  std::printf("model %s (%s), mode %s, %d cores, batch %d\n", s.model->name.c_str(), cfg.file.c_str(),
              execution_mode_name(cfg.exe_mode), s.runtime->num_cores(), cfg.decode.batch);
  std::printf("%s", memory_plan(*s.model, (*gen)->executables()).c_str());
  std::fflush(stdout);

  // N new ids: the first from the prefill's logits, one more per decode step. The FFN-only model
  // has no prefill: N steps over hidden states.
  const int steps = afd ? cfg.decode.new_tokens : cfg.decode.new_tokens - 1;
  progress.update("prefill");
  auto t0 = std::chrono::steady_clock::now();
  if (Status st = (*gen)->prefill(prompts); !st) return fail(st, kExitFailed);
  const double prefill_s = seconds_since(t0);
  std::vector<std::vector<int32_t>> generated(prompts.size());
  auto collect = [&] {
    for (size_t b = 0; b < generated.size() && b < (*gen)->ids().size(); ++b) generated[b].push_back((*gen)->ids()[b]);
  };
  collect();

  std::vector<double> latency;
  for (int i = 0; i < steps; ++i) {
    progress.update("decode " + std::to_string(i + 1) + "/" + std::to_string(steps));
    t0 = std::chrono::steady_clock::now();
    if (Status st = (*gen)->decode_step(); !st) return fail(st, kExitFailed);
    latency.push_back(seconds_since(t0));
    collect();
  }
  progress.done();

  if (afd) {
    std::printf("FFN-only model: %d steps over hidden states (no tokens)\n", steps);
  } else {
    std::printf("prefill: %zu tokens per sequence, %.3f ms\n", prompts.front().size(), prefill_s * 1e3);
    for (size_t b = 0; b < prompts.size(); ++b) {
      std::printf("sequence %zu prompt:", b);
      for (int32_t id : prompts[b]) std::printf(" %d", id);
      // The first token comes from the prefill's logits, one more from each decode step.
      std::printf("\nsequence %zu tokens:", b);
      for (int32_t id : generated[b]) std::printf(" %d", id);
      std::printf("\n");
    }
  }
  if (latency.empty()) {
    std::printf("decode: no decode step (the one new token comes from the prefill)\n");
    return kExitOk;
  }
  std::printf("step  latency_ms\n");
  for (size_t i = 0; i < latency.size(); ++i) std::printf("%4zu  %.3f\n", i + 1, latency[i] * 1e3);
  const bench::Stats st = bench::stats_of(latency);
  const double tokens_per_s = cfg.decode.batch / st.median;
  std::printf("decode: median %.3f ms/step (min %.3f, max %.3f), %.1f tokens/s\n", st.median * 1e3, st.min * 1e3,
              st.max * 1e3, tokens_per_s);
  return kExitOk;
}

}  // namespace sk::cli
