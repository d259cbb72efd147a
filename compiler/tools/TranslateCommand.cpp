// `tfmc translate`: beam search (greedy with --beam 1) over a compiled model's encode/decode
// entries, with corpus BLEU against references.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>

#include "Commands.h"
#include "RunSupport.h"
#include "tfmdata/bleu.h"
#include "tfmdata/corpus.h"
#include "tfmdata/search.h"
#include "tfmdata/tokenizer.h"

namespace tfmc {

int translateCommand(const CommandLine &cl) {
  auto unknown = cl.unknown({"weights", "checkpoint", "tokenizer", "input", "reference", "data", "split", "src", "tgt",
                             "beam", "batch", "output", "max-sentences", "kernels", "threads", "length-penalty"});
  if (!unknown.empty()) {
    std::cerr << "tfmc translate: error: unknown option --" << unknown[0] << "\n";
    return 2;
  }
  if (cl.positionals.size() != 1 || cl.get("tokenizer").empty() || (cl.has("weights") == cl.has("checkpoint")) ||
      (cl.has("input") == cl.has("data"))) {
    std::cerr << "tfmc translate: error: usage: tfmc translate <model.tfmx> (--weights w.safetensors | --checkpoint "
                 "ck) --tokenizer spm.model (--input file [--reference file] | --data dir [--split "
                 "test_2016_flickr] [--src de --tgt en]) [--beam 4] [--batch 32] [--output file]\n";
    return 2;
  }
  tfmrt::RuntimeOptions options;
  if (!parseKernels("translate", cl.get("kernels", "dnnl"), options.backend)) return 2;
  options.num_threads = int(cl.getInt("threads", 0));
  std::unique_ptr<tfmrt::Model> model;
  if (auto s = tfmrt::Model::load(cl.positionals[0], options, model); !s.ok()) return fail("translate", s);
  const tfmrt::Artifact &a = model->artifact();
  bool hasEncode = false, hasDecode = false;
  for (const auto &fn : a.functions) hasEncode |= fn.name == "encode", hasDecode |= fn.name == "decode";
  if (!hasEncode || !hasDecode) {
    std::cerr << "tfmc translate: error: " << cl.positionals[0]
              << " has no encode/decode entries (compile it with --entries=forward,translate)\n";
    return 1;
  }
  if (cl.has("weights")) {
    if (auto s = model->loadWeights(cl.get("weights")); !s.ok()) return fail("translate", s);
  } else {
    int64_t step = 0;
    if (auto s = model->loadCheckpoint(cl.get("checkpoint"), step); !s.ok()) return fail("translate", s);
    std::fprintf(stderr, "weights from %s (after step %lld)\n", cl.get("checkpoint").c_str(), (long long)step);
  }
  std::unique_ptr<tfmdata::Tokenizer> tok;
  if (auto s = tfmdata::Tokenizer::load(cl.get("tokenizer"), tok); !s.ok()) return fail("translate", s);
  if (metaInt(a, "model.src_vocab_size", -1) != tok->vocabSize()) {
    std::cerr << "tfmc translate: error: tokenizer has " << tok->vocabSize() << " pieces, the model's vocabulary "
              << metaInt(a, "model.src_vocab_size", -1) << "\n";
    return 1;
  }

  std::vector<std::string> sources, references;
  std::string what;
  if (cl.has("data")) {
    tfmdata::ParallelCorpus corpus;
    const std::string split = cl.get("split", "test_2016_flickr");
    if (auto s = tfmdata::readParallel(cl.get("data"), split, cl.get("src", "de"), cl.get("tgt", "en"), corpus); !s.ok())
      return fail("translate", s);
    sources = std::move(corpus.src);
    references = std::move(corpus.tgt);
    what = cl.get("data") + "/" + split + "." + cl.get("src", "de") + " -> " + cl.get("tgt", "en");
  } else {
    if (auto s = tfmdata::readLines(cl.get("input") == "-" ? "/dev/stdin" : cl.get("input"), sources); !s.ok())
      return fail("translate", s);
    if (cl.has("reference"))
      if (auto s = tfmdata::readLines(cl.get("reference"), references); !s.ok()) return fail("translate", s);
    if (!references.empty() && references.size() != sources.size()) {
      std::cerr << "tfmc translate: error: " << sources.size() << " source lines but " << references.size()
                << " reference lines\n";
      return 1;
    }
    what = cl.get("input");
  }
  const int64_t limit = cl.getInt("max-sentences", 0);
  if (limit > 0 && int64_t(sources.size()) > limit) {
    sources.resize(size_t(limit));
    if (!references.empty()) references.resize(size_t(limit));
  }

  tfmdata::SearchOptions search;
  search.beam = int(cl.getInt("beam", metaInt(a, "decoding.beam_size", 4)));
  search.lengthPenalty = std::stod(cl.get("length-penalty", a.metadata.count("decoding.length_penalty")
                                                                ? a.metadata.at("decoding.length_penalty")
                                                                : "0.6"));
  if (a.metadata.count("decoding.max_length_ratio"))
    search.maxLengthRatio = std::stod(a.metadata.at("decoding.max_length_ratio"));
  search.maxLengthOffset = metaInt(a, "decoding.max_length_offset", 10);
  search.maxLen = metaInt(a, "model.max_len", 128);
  search.pad = int32_t(metaInt(a, "model.pad_id", 0));
  search.bos = int32_t(metaInt(a, "model.bos_id", 1));
  search.eos = int32_t(metaInt(a, "model.eos_id", 2));
  if (search.beam < 1) {
    std::cerr << "tfmc translate: error: --beam must be >= 1\n";
    return 2;
  }

  // Sentences in length order, so a batch pads little; results go back to input order.
  std::vector<std::vector<int32_t>> ids(sources.size());
  for (size_t i = 0; i < sources.size(); ++i)
    if (auto s = tok->encode(sources[i], ids[i]); !s.ok()) return fail("translate", s);
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return ids[x].size() < ids[y].size(); });
  const size_t batch = size_t(std::max<int64_t>(1, cl.getInt("batch", 32)));
  std::vector<std::string> hypotheses(sources.size());
  int64_t outTokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (size_t b = 0; b < order.size(); b += batch) {
    std::vector<std::vector<int32_t>> in, out;
    for (size_t i = b; i < std::min(order.size(), b + batch); ++i) in.push_back(ids[order[i]]);
    if (auto s = tfmdata::translateBatch(*model, in, search, out); !s.ok()) return fail("translate", s);
    for (size_t i = 0; i < out.size(); ++i) {
      hypotheses[order[b + i]] = tok->decode(out[i]);
      outTokens += int64_t(out[i].size()) + 1;
    }
    std::fprintf(stderr, "\rtranslated %zu/%zu", std::min(order.size(), b + batch), order.size());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "\n");

  if (cl.has("output")) {
    std::ofstream out(cl.get("output"));
    for (const auto &h : hypotheses) out << h << "\n";
    if (!out) {
      std::cerr << "tfmc translate: error: cannot write " << cl.get("output") << "\n";
      return 1;
    }
  } else if (!cl.has("data")) {
    for (const auto &h : hypotheses) std::printf("%s\n", h.c_str());
  }
  std::fprintf(cl.has("data") ? stdout : stderr,
               "%s: %zu sentences, beam %d, %.1f s (%.1f sentences/s, %.0f output tokens/s), load average %s\n",
               what.c_str(), sources.size(), search.beam, secs, double(sources.size()) / secs, double(outTokens) / secs,
               loadAverage().c_str());
  if (!references.empty()) {
    const tfmdata::BleuScore bleu = tfmdata::corpusBleu(hypotheses, references);
    std::fprintf(cl.has("data") ? stdout : stderr,
                 "BLEU = %.2f  %.1f/%.1f/%.1f/%.1f (BP = %.3f, hyp_len = %ld, ref_len = %ld; 13a tokenization)\n",
                 bleu.bleu, bleu.precisions[0], bleu.precisions[1], bleu.precisions[2], bleu.precisions[3],
                 bleu.brevityPenalty, bleu.hypLength, bleu.refLength);
    if (cl.has("data"))
      for (size_t i = 0; i < std::min<size_t>(3, sources.size()); ++i)
        std::printf("  src: %s\n  ref: %s\n  hyp: %s\n", sources[i].c_str(), references[i].c_str(),
                    hypotheses[i].c_str());
  }
  return 0;
}

}  // namespace tfmc
