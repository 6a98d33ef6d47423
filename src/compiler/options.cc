#include "superkernel/options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <regex>

#include "program/program.h"

namespace sk {

const char* execution_mode_name(ExecutionMode mode) {
  switch (mode) {
    case ExecutionMode::kEager:
      return "eager";
    case ExecutionMode::kGraph:
      return "graph";
    case ExecutionMode::kSuperKernel:
      return "superkernel";
  }
  return "?";
}

Expected<ExecutionMode> parse_execution_mode(std::string_view text) {
  if (text == "eager") return ExecutionMode::kEager;
  if (text == "graph") return ExecutionMode::kGraph;
  if (text == "superkernel") return ExecutionMode::kSuperKernel;
  return Status::invalid_argument("unknown execution mode '" + std::string(text) +
                                  "' (expected eager, graph or superkernel)");
}

const char* preload_code_name(PreloadCode mode) {
  switch (mode) {
    case PreloadCode::kNone:
      return "none";
    case PreloadCode::kPerFunc:
      return "per-func";
    case PreloadCode::kMax:
      return "max";
  }
  return "?";
}

const char* sync_choice_name(SyncChoice choice) { return choice == SyncChoice::kCost ? "cost" : "p2p"; }

CompileOptions CompileOptions::for_mode(ExecutionMode mode) {
  CompileOptions o;
  o.static_kernel_compile = mode != ExecutionMode::kEager;
  o.super_kernel_optimize = mode == ExecutionMode::kSuperKernel;
  return o;
}

ExecutionMode CompileOptions::mode() const {
  if (!static_kernel_compile) return ExecutionMode::kEager;
  return super_kernel_optimize ? ExecutionMode::kSuperKernel : ExecutionMode::kGraph;
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

Status parse_bool(std::string_view key, std::string_view value, bool& out) {
  std::string v = lower(value);
  if (v == "1" || v == "true" || v == "on" || v == "yes") {
    out = true;
    return Status::ok();
  }
  if (v == "0" || v == "false" || v == "off" || v == "no") {
    out = false;
    return Status::ok();
  }
  return Status::invalid_argument("option '" + std::string(key) + "': expected a boolean (true/false/1/0), got '" +
                                  std::string(value) + "'");
}

template <class Int>
Status parse_int(std::string_view key, std::string_view value, Int min_value, Int& out) {
  Int v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || ptr != value.data() + value.size())
    return Status::invalid_argument("option '" + std::string(key) + "': expected an integer, got '" +
                                    std::string(value) + "'");
  if (v < min_value)
    return Status::invalid_argument("option '" + std::string(key) + "': " + std::to_string(v) +
                                    " is below the minimum " + std::to_string(min_value));
  out = v;
  return Status::ok();
}

// std::regex compiles recursively and copies a repeated atom once per repetition, and its
// parser overflows on long repetition counts, so patterns are bounded before it sees them:
// kernel-name patterns never need more.
constexpr size_t kMaxPatternBytes = 256;
constexpr int64_t kMaxRepetitions = 10000;  // product of every {n} / {n,m} bound in a pattern
constexpr size_t kMaxBackReferenceDigits = 3;

Status check_pattern_size(std::string_view key, std::string_view item) {
  auto error = [&](const std::string& why) {
    return Status::invalid_argument("option '" + std::string(key) + "': pattern '" + std::string(item) + "' " + why);
  };
  if (item.size() > kMaxPatternBytes)
    return error("is longer than " + std::to_string(kMaxPatternBytes) + " characters");
  int64_t product = 1;
  for (size_t i = 0; i < item.size(); ++i) {
    if (item[i] == '\\') {
      // A back-reference "\N": std::regex accumulates N in an int without an overflow check.
      size_t digits = 0;
      while (i + 1 + digits < item.size() && std::isdigit(static_cast<unsigned char>(item[i + 1 + digits]))) ++digits;
      if (digits > kMaxBackReferenceDigits)
        return error("has a back-reference number longer than " + std::to_string(kMaxBackReferenceDigits) + " digits");
      i += std::max<size_t>(digits, 1);
      continue;
    }
    if (item[i] != '{') continue;
    // The largest number in "{n}", "{n,}" or "{n,m}". std::regex reads the digits of an
    // unterminated or malformed brace too, so their size is checked before the syntax is.
    int64_t bound = 0, number = 0;
    size_t j = i + 1;
    for (; j < item.size() && (std::isdigit(static_cast<unsigned char>(item[j])) || item[j] == ','); ++j) {
      number = item[j] == ',' ? 0 : std::min<int64_t>(number * 10 + (item[j] - '0'), kMaxRepetitions + 1);
      bound = std::max(bound, number);
    }
    const bool quantifier = j < item.size() && item[j] == '}' && j > i + 1;
    product = std::min(product * (quantifier ? std::max<int64_t>(bound, 1) : 1), kMaxRepetitions + 1);
    if (bound > kMaxRepetitions || product > kMaxRepetitions)
      return error("repeats more than " + std::to_string(kMaxRepetitions) + " times in total");
  }
  return Status::ok();
}

// Comma-separated regular expressions. A leading '*' is the classic glob mistake ("*matmul"),
// which std::regex would reject with an unhelpful message, so it gets its own.
Status parse_regex_list(std::string_view key, std::string_view value, std::vector<std::string>& out) {
  std::vector<std::string> patterns;
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    std::string_view item =
        value.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    if (item.empty()) {
      if (!value.empty())
        return Status::invalid_argument("option '" + std::string(key) + "': empty pattern in list '" +
                                        std::string(value) + "'");
    } else if (item.front() == '*') {
      return Status::invalid_argument("option '" + std::string(key) + "': pattern '" + std::string(item) +
                                      "' begins with '*', which is not a valid regular expression (did you mean '.*" +
                                      std::string(item.substr(1)) + "'?)");
    } else {
      SK_RETURN_IF_ERROR(check_pattern_size(key, item));
      try {
        std::regex re{std::string(item)};
      } catch (const std::regex_error& e) {
        return Status::invalid_argument("option '" + std::string(key) + "': pattern '" + std::string(item) +
                                        "' is not a valid regular expression: " + e.what());
      }
      patterns.emplace_back(item);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  out = std::move(patterns);
  return Status::ok();
}

constexpr std::string_view kOpt = "super_kernel_optimize_options.";
constexpr std::string_view kDbg = "super_kernel_debug_options.";
// Each copy maps the whole package again; more copies than cores buy nothing.
constexpr int kMaxKernelReplicas = 64;

}  // namespace

std::vector<std::string> CompileOptions::keys() {
  return {
      "static_kernel_compile",
      "super_kernel_optimize",
      "prefetch",
      "dump",
      "dump_dir",
      "print_after",
      "arena_limit_bytes",
      "trace",
      "super_kernel_optimize_options.preload_code",
      "super_kernel_optimize_options.split_mode",
      "super_kernel_optimize_options.stream_fusion",
      "super_kernel_optimize_options.early_start",
      "super_kernel_optimize_options.recompute",
      "super_kernel_optimize_options.sync_choice",
      "super_kernel_optimize_options.jit",
      "super_kernel_optimize_options.tiling_sink",
      "super_kernel_optimize_options.func_align",
      "super_kernel_optimize_options.kernel_replicas",
      "super_kernel_optimize_options.dcci_before_kernel_start",
      "super_kernel_optimize_options.dcci_after_kernel_end",
      "super_kernel_optimize_options.dcci_disable_on_kernel",
      "super_kernel_debug_options.debug_sync_all",
      "super_kernel_debug_options.debug_op_exec_trace",
      "super_kernel_debug_options.debug_per_op_max_core_num",
      "super_kernel_debug_options.debug_cross_core_sync_check",
  };
}

Status CompileOptions::set(std::string_view key, std::string_view value) {
  if (key == "static_kernel_compile") return parse_bool(key, value, static_kernel_compile);
  if (key == "super_kernel_optimize") return parse_bool(key, value, super_kernel_optimize);
  if (key == "prefetch") return parse_bool(key, value, prefetch);
  if (key == "dump") return parse_bool(key, value, dump);
  if (key == "dump_dir") {
    dump_dir = std::string(value);
    return Status::ok();
  }
  if (key == "trace") {
    trace = std::string(value);
    return Status::ok();
  }
  if (key == "print_after") {
    print_after = std::string(value);
    return Status::ok();
  }
  if (key == "arena_limit_bytes") return parse_int<int64_t>(key, value, 0, arena_limit_bytes);
  if (key.substr(0, kOpt.size()) == kOpt) {
    std::string_view k = key.substr(kOpt.size());
    SuperKernelOptimizeOptions& o = super_kernel_optimize_options;
    if (k == "preload_code") {
      for (PreloadCode m : {PreloadCode::kNone, PreloadCode::kPerFunc, PreloadCode::kMax})
        if (value == preload_code_name(m)) {
          o.preload_code = m;
          return Status::ok();
        }
      return Status::invalid_argument("option '" + std::string(key) + "': expected none, per-func or max, got '" +
                                      std::string(value) + "'");
    }
    if (k == "sync_choice") {
      for (SyncChoice c : {SyncChoice::kPointToPoint, SyncChoice::kCost})
        if (value == sync_choice_name(c)) {
          o.sync_choice = c;
          return Status::ok();
        }
      return Status::invalid_argument("option '" + std::string(key) + "': expected p2p or cost, got '" +
                                      std::string(value) + "'");
    }
    if (k == "recompute") return parse_bool(key, value, o.recompute);
    if (k == "jit") return parse_bool(key, value, o.jit);
    if (k == "split_mode") return parse_int(key, value, 0, o.split_mode);
    if (k == "kernel_replicas") return parse_int(key, value, 0, o.kernel_replicas);
    if (k == "stream_fusion") return parse_bool(key, value, o.stream_fusion);
    if (k == "early_start") return parse_int(key, value, 0, o.early_start);
    if (k == "tiling_sink") return parse_bool(key, value, o.tiling_sink);
    if (k == "func_align") {
      // Checked before it is stored: a rejected value must leave the options as they were.
      int align = 0;
      SK_RETURN_IF_ERROR(parse_int(key, value, 0, align));
      if (align & (align - 1))
        return Status::invalid_argument("option '" + std::string(key) + "': " + std::string(value) +
                                        " is not a power of two");
      o.func_align = align;
      return Status::ok();
    }
    if (k == "dcci_before_kernel_start") return parse_regex_list(key, value, o.dcci_before_kernel_start);
    if (k == "dcci_after_kernel_end") return parse_regex_list(key, value, o.dcci_after_kernel_end);
    if (k == "dcci_disable_on_kernel") return parse_regex_list(key, value, o.dcci_disable_on_kernel);
  } else if (key.substr(0, kDbg.size()) == kDbg) {
    std::string_view k = key.substr(kDbg.size());
    SuperKernelDebugOptions& d = super_kernel_debug_options;
    if (k == "debug_sync_all") return parse_bool(key, value, d.debug_sync_all);
    if (k == "debug_op_exec_trace") return parse_bool(key, value, d.debug_op_exec_trace);
    if (k == "debug_per_op_max_core_num") return parse_int(key, value, 0, d.debug_per_op_max_core_num);
    if (k == "debug_cross_core_sync_check") return parse_bool(key, value, d.debug_cross_core_sync_check);
  }
  return Status::invalid_argument("unknown compile option '" + std::string(key) + "'");
}

Status CompileOptions::validate() const {
  if (super_kernel_optimize && !static_kernel_compile)
    return Status::invalid_argument(
        "option 'super_kernel_optimize' requires 'static_kernel_compile' (super kernels fuse statically compiled "
        "kernels); set static_kernel_compile=true");
  const SuperKernelOptimizeOptions& o = super_kernel_optimize_options;
  if (o.early_start > 2)
    return Status::invalid_argument("option 'super_kernel_optimize_options.early_start' must be 0, 1 or 2, got " +
                                    std::to_string(o.early_start));
  if (o.func_align > kMaxFuncAlign)
    return Status::invalid_argument("option 'super_kernel_optimize_options.func_align' must be at most " +
                                    std::to_string(kMaxFuncAlign) + ", got " + std::to_string(o.func_align));
  if (o.kernel_replicas > kMaxKernelReplicas)
    return Status::invalid_argument("option 'super_kernel_optimize_options.kernel_replicas' must be at most " +
                                    std::to_string(kMaxKernelReplicas) + ", got " + std::to_string(o.kernel_replicas));
  if (arena_limit_bytes < 0)
    return Status::invalid_argument("option 'arena_limit_bytes' must be >= 0 (0: the machine's physical memory)");
  if (super_kernel_debug_options.debug_per_op_max_core_num < 0)
    return Status::invalid_argument("option 'super_kernel_debug_options.debug_per_op_max_core_num' must be >= 0");
  for (const auto* list : {&o.dcci_before_kernel_start, &o.dcci_after_kernel_end, &o.dcci_disable_on_kernel}) {
    for (const std::string& p : *list) {
      std::vector<std::string> tmp;
      SK_RETURN_IF_ERROR(parse_regex_list("super_kernel_optimize_options.dcci_*", p, tmp));
    }
  }
  return Status::ok();
}

}  // namespace sk
