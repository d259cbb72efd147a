#include "tfmdata/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace tfmdata {
namespace {

// --- UTF-8 and Python's notion of whitespace --------------------------------------------------

// Decodes the code point at s[i] (invalid bytes stand for themselves); advances i.
char32_t nextCodePoint(const std::string &s, size_t &i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const int extra = c >= 0xF8 ? 0 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
  if (extra == 0 || i + size_t(extra) >= s.size()) {
    ++i;
    return c;
  }
  char32_t cp = c & (0x3F >> extra);
  for (int k = 1; k <= extra; ++k) {
    const unsigned char d = static_cast<unsigned char>(s[i + size_t(k)]);
    if ((d & 0xC0) != 0x80) {
      ++i;
      return c;
    }
    cp = (cp << 6) | (d & 0x3F);
  }
  i += size_t(extra) + 1;
  return cp;
}

void appendUtf8(std::string &out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// What Python's str.split() / str.rstrip() treat as whitespace.
bool isPythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::vector<char32_t> codePoints(const std::string &s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) out.push_back(nextCodePoint(s, i));
  return out;
}

std::string rstripPython(const std::string &s) {
  std::vector<char32_t> cps = codePoints(s);
  while (!cps.empty() && isPythonSpace(cps.back())) cps.pop_back();
  std::string out;
  for (char32_t c : cps) appendUtf8(out, c);
  return out;
}

std::vector<std::string> splitPython(const std::string &s) {
  std::vector<std::string> words;
  std::string cur;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t c = nextCodePoint(s, i);
    if (isPythonSpace(c)) {
      if (!cur.empty()) words.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.append(s, start, i - start);
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  return words;
}

// str.lower() for the scripts NMT corpora here use: ASCII, Latin-1, Latin Extended-A, Greek,
// Cyrillic.
char32_t lowerCodePoint(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x130) return 'i';  // İ (Python adds a combining dot; rare enough to ignore)
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
    if (c == 0x178) return 0xFF;
    if (c < 0x138 || (c >= 0x14A && c <= 0x177)) return (c % 2 == 0) ? c + 1 : c;
    return c;
  }
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

std::string lowerPython(const std::string &s) {
  std::string out;
  for (size_t i = 0; i < s.size();) appendUtf8(out, lowerCodePoint(nextCodePoint(s, i)));
  return out;
}

// --- 13a ------------------------------------------------------------------------------------------

bool isDigit(char c) { return c >= '0' && c <= '9'; }

// Rule (1)'s class [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation except ' , - .
bool isPunct13a(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}

// One re.sub pass of a two-character pattern: non-overlapping matches, left to right. Matching on
// bytes equals matching on code points here: every pattern's ASCII side decides, and the other
// side is copied through unchanged.
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

void replaceAll(std::string &s, const std::string &from, const std::string &to) {
  std::string out;
  size_t pos = 0;
  for (size_t at; (at = s.find(from, pos)) != std::string::npos; pos = at + from.size()) {
    out.append(s, pos, at - pos);
    out += to;
  }
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

using Ngrams = std::map<std::vector<std::string>, long>;

Ngrams ngrams(const std::vector<std::string> &tokens, size_t n) {
  Ngrams counts;
  for (size_t i = 0; i + n <= tokens.size(); ++i) ++counts[std::vector<std::string>(tokens.begin() + i, tokens.begin() + i + n)];
  return counts;
}

constexpr const char *kSacrebleuVersion = "2.6.0";

}  // namespace

std::vector<std::string> tokenize13a(const std::string &line) {
  std::string s = line;
  replaceAll(s, "<skipped>", "");
  replaceAll(s, "-\n", "");
  replaceAll(s, "\n", " ");
  if (s.find('&') != std::string::npos)
    for (const auto &[from, to] : {std::pair<const char *, const char *>{"&quot;", "\""}, {"&amp;", "&"}, {"&lt;", "<"},
                                   {"&gt;", ">"}})
      replaceAll(s, from, to);
  s = " " + s + " ";  // so a final "2." splits: rule (3) needs a character after the period
  std::string spaced;
  for (char c : s) {
    if (isPunct13a(c)) spaced += std::string(" ") + c + " ";
    else spaced += c;
  }
  spaced = pairRule(spaced, [](char a, char b) { return !isDigit(a) && (b == '.' || b == ','); },
                    [](char a, char b) { return std::string(1, a) + " " + b + " "; });
  spaced = pairRule(spaced, [](char a, char b) { return (a == '.' || a == ',') && !isDigit(b); },
                    [](char a, char b) { return std::string(" ") + a + " " + b; });
  spaced = pairRule(spaced, [](char a, char b) { return isDigit(a) && b == '-'; },
                    [](char a, char b) { return std::string(1, a) + " " + b + " "; });
  return splitPython(spaced);
}

BleuScore corpusBleu(const std::vector<std::string> &hypotheses, const std::vector<std::string> &references,
                     const BleuOptions &options) {
  BleuScore score;
  for (size_t i = 0; i < hypotheses.size() && i < references.size(); ++i) {
    auto prepare = [&](const std::string &line) {
      return tokenize13a(rstripPython(options.lowercase ? lowerPython(line) : line));
    };
    const std::vector<std::string> h = prepare(hypotheses[i]), r = prepare(references[i]);
    score.hypLength += long(h.size());
    score.refLength += long(r.size());
    for (size_t n = 1; n <= 4; ++n) {
      const Ngrams hc = ngrams(h, n), rc = ngrams(r, n);
      for (const auto &[gram, count] : hc) {
        auto it = rc.find(gram);
        score.counts[n - 1] += std::min(count, it == rc.end() ? 0L : it->second);
        score.totals[n - 1] += count;
      }
    }
  }
  score.brevityPenalty = score.hypLength < score.refLength
                             ? (score.hypLength > 0 ? std::exp(1.0 - double(score.refLength) / double(score.hypLength)) : 0.0)
                             : 1.0;
  if (score.counts[0] + score.counts[1] + score.counts[2] + score.counts[3] == 0) return score;  // BLEU 0
  // 'exp' smoothing: the k-th order without a match counts as 1 / 2^k matches.
  double smooth = 1.0;
  int order = 4;
  for (int n = 0; n < 4; ++n) {
    if (score.totals[n] == 0) break;
    if (options.effectiveOrder) order = n + 1;
    if (score.counts[n] == 0) {
      smooth *= 2;
      score.precisions[n] = 100.0 / (smooth * double(score.totals[n]));
    } else {
      score.precisions[n] = 100.0 * double(score.counts[n]) / double(score.totals[n]);
    }
  }
  double logSum = 0;
  for (int n = 0; n < order; ++n) logSum += score.precisions[n] > 0 ? std::log(score.precisions[n]) : -9999999999.0;
  score.bleu = score.brevityPenalty * std::exp(logSum / order);
  return score;
}

BleuScore sentenceBleu(const std::string &hypothesis, const std::string &reference) {
  BleuOptions options;
  options.effectiveOrder = true;
  return corpusBleu({hypothesis}, {reference}, options);
}

std::string BleuScore::format() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %ld ref_len = %ld)",
                bleu, precisions[0], precisions[1], precisions[2], precisions[3], brevityPenalty,
                refLength > 0 ? double(hypLength) / double(refLength) : 0.0, hypLength, refLength);
  return buf;
}

double corpusChrf(const std::vector<std::string> &hypotheses, const std::vector<std::string> &references) {
  constexpr int kOrders = 6;
  constexpr double kBeta = 2.0;
  double hypTotal[kOrders] = {}, refTotal[kOrders] = {}, matches[kOrders] = {};
  for (size_t i = 0; i < hypotheses.size() && i < references.size(); ++i) {
    auto chars = [](const std::string &line) {  // whitespace removed: n-grams span words
      std::vector<char32_t> out;
      for (char32_t c : codePoints(line))
        if (!isPythonSpace(c)) out.push_back(c);
      return out;
    };
    const std::vector<char32_t> h = chars(hypotheses[i]), r = chars(references[i]);
    for (int n = 1; n <= kOrders; ++n) {
      std::map<std::u32string, long> hc, rc;
      for (size_t k = 0; k + size_t(n) <= h.size(); ++k) ++hc[std::u32string(h.begin() + k, h.begin() + k + n)];
      for (size_t k = 0; k + size_t(n) <= r.size(); ++k) ++rc[std::u32string(r.begin() + k, r.begin() + k + n)];
      long hn = 0, rn = 0, m = 0;
      for (const auto &[g, c] : hc) {
        hn += c;
        auto it = rc.find(g);
        if (it != rc.end()) m += std::min(c, it->second);
      }
      for (const auto &[g, c] : rc) rn += c;
      if (rn == 0) hn = 0;  // sacreBLEU: no reference n-grams of this order -> the order does not count
      hypTotal[n - 1] += double(hn);
      refTotal[n - 1] += double(rn);
      matches[n - 1] += double(m);
    }
  }
  double precision = 0, recall = 0;
  int effective = 0;
  for (int n = 0; n < kOrders; ++n) {
    if (hypTotal[n] > 0 && refTotal[n] > 0) {
      precision += matches[n] / hypTotal[n];
      recall += matches[n] / refTotal[n];
      ++effective;
    }
  }
  if (effective == 0) return 0.0;
  precision /= effective;
  recall /= effective;
  if (precision + recall == 0) return 0.0;
  const double beta2 = kBeta * kBeta;
  double s = (1 + beta2) * precision * recall;
  s /= beta2 * precision + recall;
  return 100.0 * s;
}

std::string bleuSignature(const BleuOptions &options) {
  return std::string("nrefs:1|case:") + (options.lowercase ? "lc" : "mixed") + "|eff:" +
         (options.effectiveOrder ? "yes" : "no") + "|tok:13a|smooth:exp|version:" + kSacrebleuVersion;
}

std::string chrfSignature() { return std::string("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:") + kSacrebleuVersion; }

}  // namespace tfmdata
