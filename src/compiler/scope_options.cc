#include "compiler/scope_options.h"

#include "program/program.h"
#include "superkernel/options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <set>

namespace sk {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Every key; values of features this build does not have yet are rejected where they are parsed.
const std::vector<std::string> kImplemented = {"strict-scope-check", "debug-aic-num",  "debug-aiv-num", "feed-sync-all",
                                               "split-mode",         "debug-sync-all", "profiling",     "stream-fusion",
                                               "early-start",        "preload-code",   "func-align",    "recompute",
                                               "sync-choice",        "tiling-sink"};

Status value_error(std::string_view scope, std::string_view key, std::string_view value, const std::string& expect) {
  return Status::invalid_argument("scope '" + std::string(scope) + "' option '" + std::string(key) +
                                  "': invalid value '" + std::string(value) + "' (expected " + expect + ")");
}

Status parse_switch(std::string_view scope, std::string_view key, std::string_view value, int& out) {
  if (value == "0" || value == "1") {
    out = value == "1";
    return Status::ok();
  }
  return value_error(scope, key, value, "0 or 1");
}

Status parse_count(std::string_view scope, std::string_view key, std::string_view value, int min, int& out) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || ptr != value.data() + value.size() || v < min)
    return value_error(scope, key, value, "an integer >= " + std::to_string(min));
  out = v;
  return Status::ok();
}

}  // namespace

void ScopeOptions::inherit(const ScopeOptions& outer) {
  if (strict_scope_check == StrictScopeCheck::kDefault) strict_scope_check = outer.strict_scope_check;
  for (auto [mine, theirs] : {std::pair{&debug_aic_num, outer.debug_aic_num},
                              {&debug_aiv_num, outer.debug_aiv_num},
                              {&feed_sync_all, outer.feed_sync_all},
                              {&split_mode, outer.split_mode},
                              {&debug_sync_all, outer.debug_sync_all},
                              {&profiling, outer.profiling},
                              {&stream_fusion, outer.stream_fusion},
                              {&early_start, outer.early_start},
                              {&preload_code, outer.preload_code},
                              {&func_align, outer.func_align},
                              {&recompute, outer.recompute},
                              {&sync_choice, outer.sync_choice},
                              {&tiling_sink, outer.tiling_sink}})
    if (*mine < 0) *mine = theirs;
}

const std::vector<std::string>& scope_option_keys() { return kImplemented; }

Expected<ScopeOptions> parse_scope_options(std::string_view scope, std::string_view text,
                                           std::vector<std::string>* warnings) {
  ScopeOptions o;
  std::set<std::string> seen;
  size_t start = 0;
  while (start <= text.size()) {
    size_t colon = text.find(':', start);
    std::string_view pair =
        trim(text.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
    start = colon == std::string_view::npos ? text.size() + 1 : colon + 1;
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos) {
      if (warnings)
        warnings->push_back("scope '" + std::string(scope) + "': option '" + std::string(pair) +
                            "' has no '=value'; skipped");
      continue;
    }
    std::string key(trim(pair.substr(0, eq)));
    std::string_view value = trim(pair.substr(eq + 1));
    const std::string where = "scope '" + std::string(scope) + "' option '" + key + "'";
    if (std::find(kImplemented.begin(), kImplemented.end(), key) == kImplemented.end()) {
      std::string known;
      for (const std::string& k : scope_option_keys()) known += (known.empty() ? "" : ", ") + k;
      return Status::invalid_argument("scope '" + std::string(scope) + "': unknown option '" + key +
                                      "' (known: " + known + ")");
    }
    if (!seen.insert(key).second) return Status::invalid_argument(where + " is given twice");
    if (value.empty()) return Status::invalid_argument(where + " has an empty value");
    if (key == "strict-scope-check") {
      if (value == "bypass") {
        o.strict_scope_check = StrictScopeCheck::kBypass;
      } else if (value == "abort") {
        o.strict_scope_check = StrictScopeCheck::kAbort;
      } else {
        return value_error(scope, key, value, "bypass or abort");
      }
    } else if (key == "debug-aic-num") {
      SK_RETURN_IF_ERROR(parse_count(scope, key, value, 0, o.debug_aic_num));
    } else if (key == "debug-aiv-num") {
      SK_RETURN_IF_ERROR(parse_count(scope, key, value, 0, o.debug_aiv_num));
    } else if (key == "feed-sync-all") {
      SK_RETURN_IF_ERROR(parse_switch(scope, key, value, o.feed_sync_all));
    } else if (key == "split-mode") {
      SK_RETURN_IF_ERROR(parse_count(scope, key, value, 1, o.split_mode));
    } else if (key == "debug-sync-all") {
      SK_RETURN_IF_ERROR(parse_switch(scope, key, value, o.debug_sync_all));
    } else if (key == "profiling") {
      SK_RETURN_IF_ERROR(parse_switch(scope, key, value, o.profiling));
    } else if (key == "stream-fusion") {
      SK_RETURN_IF_ERROR(parse_switch(scope, key, value, o.stream_fusion));
    } else if (key == "tiling-sink") {
      SK_RETURN_IF_ERROR(parse_switch(scope, key, value, o.tiling_sink));
    } else if (key == "early-start") {
      if (value != "0" && value != "1" && value != "2") return value_error(scope, key, value, "0, 1 or 2");
      o.early_start = value[0] - '0';
    } else if (key == "preload-code") {
      const std::pair<std::string_view, PreloadCode> modes[] = {
          {"none", PreloadCode::kNone}, {"per-func", PreloadCode::kPerFunc}, {"max", PreloadCode::kMax}};
      for (const auto& [name, mode] : modes)
        if (value == name) o.preload_code = static_cast<int>(mode);
      if (o.preload_code < 0) return value_error(scope, key, value, "none, per-func or max");
    } else if (key == "func-align") {
      SK_RETURN_IF_ERROR(parse_count(scope, key, value, 0, o.func_align));
      if ((o.func_align & (o.func_align - 1)) || o.func_align > kMaxFuncAlign)
        return value_error(scope, key, value, "a power of two up to " + std::to_string(kMaxFuncAlign) + ", or 0");
    } else if (key == "recompute") {
      SK_RETURN_IF_ERROR(parse_switch(scope, key, value, o.recompute));
    } else if (key == "sync-choice") {
      if (value == "p2p") {
        o.sync_choice = static_cast<int>(SyncChoice::kPointToPoint);
      } else if (value == "cost") {
        o.sync_choice = static_cast<int>(SyncChoice::kCost);
      } else {
        return value_error(scope, key, value, "p2p or cost");
      }
    }
  }
  if (o.debug_aic_num >= 0 && o.debug_aiv_num >= 0) {
    // 64-bit: 2 * c must not overflow for any count the parser accepts.
    const int64_t c = o.debug_aic_num, v = o.debug_aiv_num;
    const bool ratio_ok = (c > 0 && v == 0) || (c == 0 && v > 0) || (c > 0 && v == c) || (c > 0 && v == 2 * c);
    if (!ratio_ok)
      return Status::invalid_argument(
          "scope '" + std::string(scope) + "' options 'debug-aic-num'=" + std::to_string(c) +
          " and 'debug-aiv-num'=" + std::to_string(v) + ": the aic:aiv ratio must be 1:0, 0:1, 1:1 or 1:2");
  }
  return o;
}

Status check_scope_options(std::string_view scope, std::string_view options, std::vector<std::string>* skipped) {
  auto parsed = parse_scope_options(scope, options, skipped);
  return parsed ? Status::ok() : parsed.status();
}

}  // namespace sk
