// Translation metrics exactly as sacreBLEU 2.6.0 computes them with its defaults, checked against
// values sacreBLEU produced (tests/golden/sacrebleu): corpus BLEU (mteval-v13a tokenization, one
// reference, 'exp' smoothing, brevity penalty), optionally lowercased, sentence BLEU (effective
// order), and chrF (6 character orders, no word orders, beta 2).
#pragma once

#include <string>
#include <vector>

namespace tfmdata {

struct BleuScore {
  double bleu = 0;                      // 0..100
  double precisions[4] = {0, 0, 0, 0};  // 0..100, smoothed as reported by sacreBLEU
  long counts[4] = {0, 0, 0, 0};        // clipped n-gram matches
  long totals[4] = {0, 0, 0, 0};        // hypothesis n-grams
  double brevityPenalty = 0;
  long hypLength = 0, refLength = 0;
  // sacreBLEU's summary: "BLEU = 36.12 66.9/43.6/29.2/19.9 (BP = 1.000 ratio = 1.045 hyp_len = ...)".
  std::string format() const;
};

struct BleuOptions {
  bool lowercase = false;       // sacreBLEU -lc (Unicode lowercasing of Latin, Greek, Cyrillic)
  bool effectiveOrder = false;  // sentence BLEU: only the n-gram orders the hypothesis has
};

// sacreBLEU's tokenizer '13a' on one line (without the right-strip BLEU applies first).
std::vector<std::string> tokenize13a(const std::string &line);
BleuScore corpusBleu(const std::vector<std::string> &hypotheses, const std::vector<std::string> &references,
                     const BleuOptions &options = {});
BleuScore sentenceBleu(const std::string &hypothesis, const std::string &reference);
// chrF2 over the corpus (statistics summed over sentences, then one F-score), 0..100.
double corpusChrf(const std::vector<std::string> &hypotheses, const std::vector<std::string> &references);

// sacreBLEU's signature strings for the settings above.
std::string bleuSignature(const BleuOptions &options = {});
std::string chrfSignature();

}  // namespace tfmdata
