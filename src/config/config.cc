// Queries on a loaded Config (parse.cc builds it, rules.cc checks it).
#include "config/config.h"

#include <fnmatch.h>

namespace sk::config {

Location Config::where(std::string_view key) const {
  auto it = lines.find(key);
  return it != lines.end() ? it->second : Location{file, 0};
}

CompileOptions Config::compile_options(ExecutionMode mode) const {
  CompileOptions opts = CompileOptions::for_mode(mode);
  for (const CompileOptionSetting& s : compile_settings) {
    // Checked against CompileOptions::set() when the file was read.
    SK_CHECK(opts.set(s.key, s.value).is_ok()) << s.where.to_string() << ": " << s.key;
  }
  return opts;
}

const ScopeOptionRule* Config::scope_rule_for(std::string_view scope) const {
  const std::string name(scope);
  for (const ScopeOptionRule& rule : scope_options) {
    if (fnmatch(rule.pattern.c_str(), name.c_str(), 0) == 0) return &rule;
  }
  return nullptr;
}

std::string Config::scope_options_for(std::string_view scope) const {
  const ScopeOptionRule* rule = scope_rule_for(scope);
  return rule ? rule->options : std::string();
}

StreamCoreLimit Config::core_limit(std::string_view stream) const {
  for (const StreamCoreLimit& limit : runtime.core_limits) {
    if (limit.stream == stream) return limit;
  }
  return StreamCoreLimit{std::string(stream), 0, 0, Location{file, 0}};
}

}  // namespace sk::config
