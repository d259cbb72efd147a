// Corpus BLEU (Papineni et al. 2002) as sacreBLEU reports it by default: mteval-v13a
// tokenization, 4-gram precisions clipped by one reference, brevity penalty, no smoothing, 0..100.
#pragma once

#include <string>
#include <vector>

namespace tfmdata {

struct BleuScore {
  double bleu = 0;                  // 0..100
  double precisions[4] = {0, 0, 0, 0};  // 0..100
  double brevityPenalty = 0;
  long hypLength = 0, refLength = 0;
};

// mteval-v13a tokenization (sacreBLEU's "13a"): punctuation split off, except '.' and ',' next
// to digits; '-' after a digit split off.
std::vector<std::string> tokenize13a(const std::string &line);
BleuScore corpusBleu(const std::vector<std::string> &hypotheses, const std::vector<std::string> &references);

}  // namespace tfmdata
