// Fuzz target: scope option strings ("key=value:key=value"), as SuperKernelScope passes them.
// Invariants: no crash; an error names the scope; accepted options hold only values the parser
// documents, and inheriting from them keeps every field set.
#include <string>
#include <vector>

#include "compiler/scope_options.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> warnings;
  sk::Expected<sk::ScopeOptions> parsed = sk::parse_scope_options("fuzz_scope", text, &warnings);
  if (!parsed) {
    const std::string msg = parsed.status().message();
    SK_FUZZ_CHECK(msg.find("'fuzz_scope'") != std::string::npos, "error does not name the scope: " + msg);
    return 0;
  }
  const sk::ScopeOptions& o = *parsed;
  for (int sw : {o.feed_sync_all, o.debug_sync_all, o.profiling})
    SK_FUZZ_CHECK(sw >= -1 && sw <= 1, "a switch outside {-1, 0, 1}");
  SK_FUZZ_CHECK(o.split_mode == -1 || o.split_mode >= 1, "split-mode below 1");
  SK_FUZZ_CHECK(o.debug_aic_num >= -1 && o.debug_aiv_num >= -1, "negative core count");
  for (const std::string& w : warnings)
    SK_FUZZ_CHECK(w.find("'fuzz_scope'") != std::string::npos, "warning does not name the scope: " + w);

  sk::ScopeOptions outer;
  outer.split_mode = 2;
  outer.feed_sync_all = 1;
  sk::ScopeOptions inner = o;
  inner.inherit(outer);
  SK_FUZZ_CHECK(inner.split_mode == (o.split_mode >= 1 ? o.split_mode : 2), "inherit lost split-mode");
  SK_FUZZ_CHECK(inner.feed_sync_all == (o.feed_sync_all >= 0 ? o.feed_sync_all : 1), "inherit lost feed-sync-all");
  return 0;
}
