// Scope option strings: "key=value:key=value", as given to SuperKernelScope or
// super_kernel_scope_begin. Parsing rules: an unknown key, a duplicate key, or an empty or
// invalid value is an error naming the key (and the scope); a pair without '=' is a warning and
// is skipped. Keys a later release implements are rejected as "not supported yet".
//
//   std::vector<std::string> warnings;
//   auto opts = parse_scope_options("layer0", "feed-sync-all=1:strict-scope-check=abort", &warnings);
#ifndef SUPERKERNEL_COMPILER_SCOPE_OPTIONS_H_
#define SUPERKERNEL_COMPILER_SCOPE_OPTIONS_H_

#include <string>
#include <string_view>
#include <vector>

#include "superkernel/status.h"

namespace sk {

enum class StrictScopeCheck { kDefault, kBypass, kAbort };

struct ScopeOptions {
  StrictScopeCheck strict_scope_check = StrictScopeCheck::kDefault;
  int debug_aic_num = -1;  // -1: not set
  int debug_aiv_num = -1;
  int feed_sync_all = -1;  // -1: not set; 0/1
  int split_mode = -1;     // -1: not set; >= 1: at most this many launches per segment
  int debug_sync_all = -1;
  int profiling = -1;
  int stream_fusion = -1;  // -1: not set (super_kernel_optimize_options.stream_fusion decides)
  int early_start = -1;    // -1: not set; 0, 1, 2 (super_kernel_optimize_options.early_start)
  int preload_code = -1;   // -1: not set; a PreloadCode value
  int func_align = -1;     // -1: not set; bytes, a power of two
  int recompute = -1;      // -1: not set; 0/1
  int sync_choice = -1;    // -1: not set; a SyncChoice value
  int tiling_sink = -1;    // -1: not set (super_kernel_optimize_options.tiling_sink decides)

  // Fills unset fields from `outer` (options of an enclosing scope).
  void inherit(const ScopeOptions& outer);
};

// Every key the parser knows, implemented or not.
const std::vector<std::string>& scope_option_keys();

Expected<ScopeOptions> parse_scope_options(std::string_view scope, std::string_view text,
                                           std::vector<std::string>* warnings);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_SCOPE_OPTIONS_H_
