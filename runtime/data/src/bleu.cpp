#include "tfmdata/bleu.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

namespace tfmdata {
namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }

// mteval's punctuation class: {|}~ [\]^_` space!"#$%& ()*+ :;<=>?@ /
bool isPunct13a(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}

// re.sub semantics of the three pair rules: non-overlapping matches, left to right.
template <typename Match, typename Emit>
std::string pairRule(const std::string &s, Match match, Emit emit) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && match(s[i], s[i + 1])) {
      out += emit(s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

using Ngrams = std::map<std::vector<std::string>, int>;

Ngrams ngrams(const std::vector<std::string> &tokens, size_t n) {
  Ngrams counts;
  for (size_t i = 0; i + n <= tokens.size(); ++i) ++counts[std::vector<std::string>(tokens.begin() + i, tokens.begin() + i + n)];
  return counts;
}

}  // namespace

std::vector<std::string> tokenize13a(const std::string &line) {
  std::string s;
  for (char c : line) s += c == '\n' ? ' ' : c;
  for (const auto &[from, to] : {std::pair<std::string, std::string>{"&quot;", "\""}, {"&amp;", "&"}, {"&lt;", "<"},
                                 {"&gt;", ">"}})
    for (size_t at; (at = s.find(from)) != std::string::npos;) s.replace(at, from.size(), to);
  std::string spaced;
  for (char c : s) {
    if (isPunct13a(c) && c != ' ') spaced += std::string(" ") + c + " ";
    else spaced += c;
  }
  spaced = pairRule(spaced, [](char a, char b) { return !isDigit(a) && (b == '.' || b == ','); },
                    [](char a, char b) { return std::string(1, a) + " " + b + " "; });
  spaced = pairRule(spaced, [](char a, char b) { return (a == '.' || a == ',') && !isDigit(b); },
                    [](char a, char b) { return std::string(" ") + a + " " + b; });
  spaced = pairRule(spaced, [](char a, char b) { return isDigit(a) && b == '-'; },
                    [](char a, char b) { return std::string(1, a) + " " + b + " "; });
  std::vector<std::string> tokens;
  std::istringstream in(spaced);
  for (std::string t; in >> t;) tokens.push_back(t);
  return tokens;
}

BleuScore corpusBleu(const std::vector<std::string> &hypotheses, const std::vector<std::string> &references) {
  BleuScore score;
  double matches[4] = {0, 0, 0, 0}, totals[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < hypotheses.size() && i < references.size(); ++i) {
    const std::vector<std::string> h = tokenize13a(hypotheses[i]), r = tokenize13a(references[i]);
    score.hypLength += long(h.size());
    score.refLength += long(r.size());
    for (size_t n = 1; n <= 4; ++n) {
      const Ngrams hc = ngrams(h, n), rc = ngrams(r, n);
      for (const auto &[gram, count] : hc) {
        auto it = rc.find(gram);
        matches[n - 1] += std::min(count, it == rc.end() ? 0 : it->second);
        totals[n - 1] += count;
      }
    }
  }
  double logSum = 0;
  bool zero = false;
  for (int n = 0; n < 4; ++n) {
    score.precisions[n] = totals[n] > 0 ? 100.0 * matches[n] / totals[n] : 0.0;
    if (matches[n] == 0) zero = true;
    else logSum += std::log(matches[n] / totals[n]);
  }
  score.brevityPenalty = score.hypLength == 0 ? 0.0
                         : score.hypLength < score.refLength
                             ? std::exp(1.0 - double(score.refLength) / double(score.hypLength))
                             : 1.0;
  score.bleu = zero ? 0.0 : 100.0 * score.brevityPenalty * std::exp(logSum / 4.0);
  return score;
}

}  // namespace tfmdata
