// Edit distance with swaps of neighbouring letters (optimal string alignment), ignoring case.
#include "config/suggest.h"

#include <algorithm>
#include <cctype>

namespace sk::config {
namespace {

size_t edits(std::string_view a, std::string_view b) {
  auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  };
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

}  // namespace

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  const size_t allowed = std::max<size_t>(1, word.size() / 3);
  std::string best;
  size_t best_edits = allowed + 1;
  for (const std::string& c : candidates) {
    const size_t e = edits(word, c);
    if (e < best_edits) {
      best = c;
      best_edits = e;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string best = closest_match(word, candidates);
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

}  // namespace sk::config
