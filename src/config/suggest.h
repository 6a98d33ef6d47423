// "Did you mean": the known name closest to a misspelt one, for the errors of the config reader
// and the command line.
//
//   closest_match("explian", {"run", "bench", "explain"})  // "explain"
//   "unknown key 'batchsize'" + did_you_mean("batchsize", keys)  // "...; did you mean 'batch'?"
#ifndef SUPERKERNEL_CONFIG_SUGGEST_H_
#define SUPERKERNEL_CONFIG_SUGGEST_H_

#include <string>
#include <string_view>
#include <vector>

namespace sk::config {

// The candidate with the fewest edits from `word` (insertions, deletions, substitutions and swaps
// of neighbouring letters, ignoring case), when that is few enough to be a slip: at most one edit
// per three letters, and at least one. Empty when no candidate is that close.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// "; did you mean 'x'?" with closest_match(), or "" when nothing is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace sk::config

#endif  // SUPERKERNEL_CONFIG_SUGGEST_H_
