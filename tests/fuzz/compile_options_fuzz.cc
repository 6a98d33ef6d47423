// Fuzz target: CompileOptions::set(key, value) and validate(), as CLI flags and config files use
// them. The input is "key\nvalue" lines. Invariants: no crash; an error names the key; a failed
// set() leaves the options as they were.
#include <string>

#include "fuzz/fuzz_input.h"
#include "superkernel/options.h"

namespace {

bool same(const sk::CompileOptions& a, const sk::CompileOptions& b) {
  const auto& ao = a.super_kernel_optimize_options;
  const auto& bo = b.super_kernel_optimize_options;
  const auto& ad = a.super_kernel_debug_options;
  const auto& bd = b.super_kernel_debug_options;
  return a.static_kernel_compile == b.static_kernel_compile && a.super_kernel_optimize == b.super_kernel_optimize &&
         a.dump == b.dump && a.dump_dir == b.dump_dir && a.print_after == b.print_after &&
         a.arena_limit_bytes == b.arena_limit_bytes && ao.preload_code == bo.preload_code &&
         ao.split_mode == bo.split_mode && ao.stream_fusion == bo.stream_fusion && ao.early_start == bo.early_start &&
         ao.tiling_sink == bo.tiling_sink && ao.func_align == bo.func_align &&
         ao.kernel_replicas == bo.kernel_replicas && ao.jit == bo.jit &&
         ao.dcci_before_kernel_start == bo.dcci_before_kernel_start &&
         ao.dcci_after_kernel_end == bo.dcci_after_kernel_end &&
         ao.dcci_disable_on_kernel == bo.dcci_disable_on_kernel && ad.debug_sync_all == bd.debug_sync_all &&
         ad.debug_op_exec_trace == bd.debug_op_exec_trace &&
         ad.debug_per_op_max_core_num == bd.debug_per_op_max_core_num;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  sk::CompileOptions opts;
  // Pairs of lines: key, then value.
  while (!text.empty()) {
    const size_t k_end = text.find('\n');
    const std::string_view key = text.substr(0, k_end);
    text = k_end == std::string_view::npos ? std::string_view() : text.substr(k_end + 1);
    const size_t v_end = text.find('\n');
    const std::string_view value = text.substr(0, v_end);
    text = v_end == std::string_view::npos ? std::string_view() : text.substr(v_end + 1);

    const sk::CompileOptions before = opts;
    sk::Status s = opts.set(key, value);
    if (!s) {
      SK_FUZZ_CHECK(s.message().find("'" + std::string(key) + "'") != std::string::npos ||
                        s.message().find("option 'super_kernel_optimize_options.") != std::string::npos,
                    "error does not name the key: " + s.message());
      SK_FUZZ_CHECK(same(before, opts), "a failed set() changed the options: " + s.message());
    }
  }
  sk::Status v = opts.validate();
  SK_FUZZ_CHECK(v.is_ok() || !v.message().empty(), "validate() failed without a message");
  if (v) {
    SK_FUZZ_CHECK(opts.super_kernel_optimize_options.split_mode >= 0, "negative split_mode accepted");
    const int align = opts.super_kernel_optimize_options.func_align;
    SK_FUZZ_CHECK(align >= 0 && (align & (align - 1)) == 0, "func_align not a power of two");
  }
  return 0;
}
