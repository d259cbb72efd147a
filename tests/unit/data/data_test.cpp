// libtfmdata: gzip corpora, the joint SentencePiece tokenizer, token-budget batching.
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>

#include "tfmdata/batcher.h"
#include "tfmdata/corpus.h"
#include "tfmdata/tokenizer.h"

namespace {

const std::string kMulti30k = std::string(TFMC_SOURCE_DIR) + "/../shared/data/multi30k";

std::string writeGz(const std::string &name, const std::string &text) {
  const std::string path = testing::TempDir() + "/" + name;
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), unsigned(text.size()));
  gzclose(f);
  return path;
}

TEST(Corpus, ReadsGzipAndPlainLines) {
  std::vector<std::string> lines;
  ASSERT_TRUE(tfmdata::readLines(writeGz("c.gz", "a b\r\nc\n\nlast without newline"), lines).ok());
  EXPECT_EQ(lines, (std::vector<std::string>{"a b", "c", "", "last without newline"}));
  const std::string plain = testing::TempDir() + "/plain.txt";
  std::ofstream(plain) << "x\ny\n";
  ASSERT_TRUE(tfmdata::readLines(plain, lines).ok());
  EXPECT_EQ(lines, (std::vector<std::string>{"x", "y"}));
  // A NUL byte stays inside its line (it cut the line short and merged the rest into the next);
  // lines longer than the read buffer come whole.
  const std::string nul = testing::TempDir() + "/nul.txt";
  const std::string longLine(200000, 'z');
  std::ofstream(nul, std::ios::binary) << "a\n" << std::string("b\0c", 3) << "\n" << longLine << "\nd\n";
  ASSERT_TRUE(tfmdata::readLines(nul, lines).ok());
  EXPECT_EQ(lines, (std::vector<std::string>{"a", std::string("b\0c", 3), longLine, "d"}));
  tfmrt::Status s = tfmdata::readLines(testing::TempDir() + "/nope.gz", lines);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot open"), std::string::npos) << s.message();
  // A file named .gz that is not gzip (plain text, or empty) is refused; zlib read it as text.
  for (const std::string text : {"x\ny\n", ""}) {
    const std::string fake = testing::TempDir() + "/fake.gz";
    std::ofstream(fake) << text;
    s = tfmdata::readLines(fake, lines);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("is named .gz but is not gzip-compressed"), std::string::npos) << s.message();
  }
  // Unreadable: a directory, and a gzip file cut short; the message says why.
  s = tfmdata::readLines(testing::TempDir(), lines);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot read '" + testing::TempDir() + "': Is a directory"), std::string::npos) << s.message();
  const std::string whole = writeGz("cut.gz", std::string(5000, 'x') + "\n" + std::string(5000, 'y') + "\n");
  std::ifstream in(whole, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(whole, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size() / 2));
  s = tfmdata::readLines(whole, lines);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot read '" + whole + "': unexpected end of file"), std::string::npos) << s.message();
}

std::string fileBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// gzip members in a row are read in turn; anything else after a member (zlib's reader stopped
// there without a word, losing its lines), a damaged member (its CRC) and a cut one are refused.
TEST(Corpus, GzipMembersTrailingBytesAndDamage) {
  const std::string a = fileBytes(writeGz("m1.gz", "one\ntwo\n")), b = fileBytes(writeGz("m2.gz", "three\n"));
  const std::string path = testing::TempDir() + "/members.gz";
  auto write = [&](const std::string &bytes) { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; };
  std::vector<std::string> lines;
  write(a + b);
  tfmrt::Status s = tfmdata::readLines(path, lines);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "three"}));
  for (const std::string &tail : {std::string("more text\n"), std::string("x"), std::string(100000, '\0')}) {
    write(a + tail);
    s = tfmdata::readLines(path, lines);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("cannot read '" + path + "': " + std::to_string(tail.size()) +
                               " bytes after the end of the gzip data"),
              std::string::npos)
        << s.message();
  }
  // Trailing bytes that start like a gzip header: named as what follows a member.
  write(a + std::string("\x1f\x8bxx", 4));
  s = tfmdata::readLines(path, lines);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot read '" + path + "': the bytes after gzip member 1 are not gzip data ("),
            std::string::npos)
      << s.message();
  std::string damaged = a;
  damaged[damaged.size() - 6] ^= 0x55;  // inside the CRC-32 of the trailer
  write(damaged);
  s = tfmdata::readLines(path, lines);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot read '" + path + "': incorrect data check"), std::string::npos) << s.message();
  write(a + b.substr(0, b.size() - 3));  // the second member cut short
  s = tfmdata::readLines(path, lines);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unexpected end of file"), std::string::npos) << s.message();
  // Lines longer than the decompression buffer, across many buffers, come whole.
  const std::string longLine(300000, 'q');
  ASSERT_TRUE(tfmdata::readLines(writeGz("long.gz", "a\n" + longLine + "\nb"), lines).ok());
  EXPECT_EQ(lines, (std::vector<std::string>{"a", longLine, "b"}));
}

TEST(Corpus, ParallelSidesMustHaveEqualLineCounts) {
  writeGz("p.xx.gz", "1\n2\n3\n");
  writeGz("p.yy.gz", "1\n2\n");
  tfmdata::ParallelCorpus c;
  tfmrt::Status s = tfmdata::readParallel(testing::TempDir(), "p", "xx", "yy", c);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("has 3 lines but"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("has 2"), std::string::npos) << s.message();
}

TEST(Corpus, Multi30kSplits) {
  tfmdata::ParallelCorpus train, val;
  ASSERT_TRUE(tfmdata::readParallel(kMulti30k, "train", "de", "en", train).ok());
  ASSERT_TRUE(tfmdata::readParallel(kMulti30k, "val", "de", "en", val).ok());
  EXPECT_EQ(train.src.size(), 29000u);
  EXPECT_EQ(val.src.size(), 1014u);
}

// A small joint vocabulary trained on part of Multi30k: special ids where the specs expect them,
// encode/decode round trip, refusal of a model with other special ids.
TEST(Tokenizer, TrainLoadRoundTrip) {
  tfmdata::ParallelCorpus train;
  ASSERT_TRUE(tfmdata::readParallel(kMulti30k, "train", "de", "en", train).ok());
  std::vector<std::string> sentences(train.src.begin(), train.src.begin() + 2000);
  sentences.insert(sentences.end(), train.tgt.begin(), train.tgt.begin() + 2000);
  tfmdata::TokenizerOptions options;
  options.vocabSize = 500;
  const std::string path = testing::TempDir() + "/tok.model";
  std::unique_ptr<tfmdata::Tokenizer> tok;
  tfmrt::Status s = tfmdata::Tokenizer::train(sentences, options, path, tok);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(tok->vocabSize(), 500);
  std::unique_ptr<tfmdata::Tokenizer> loaded;
  ASSERT_TRUE(tfmdata::Tokenizer::load(path, loaded).ok());
  for (const std::string &text : {train.src[0], train.tgt[0], std::string("Ein Hund läuft.")}) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(loaded->encode(text, ids).ok());
    ASSERT_FALSE(ids.empty());
    for (int32_t id : ids) {
      EXPECT_GE(id, 3) << "no pad/bos/eos inside content";
      EXPECT_LT(id, 500);
    }
    EXPECT_EQ(loaded->decode(ids), text);
  }
  s = tfmdata::Tokenizer::load(testing::TempDir() + "/missing.model", loaded);
  EXPECT_FALSE(s.ok());
}

// The digest checkpoints record covers what segments text (pieces, the normaliser, options) but
// not how a tokenizer was trained: spm_train on the same text under another path, with an input
// format given, gives another model file but the same digest; a flipped byte of the normaliser table, the
// same pieces (fingerprint) but another digest.
TEST(Tokenizer, DigestIgnoresTrainingPathsNotNormalisation) {
  tfmdata::ParallelCorpus train;
  ASSERT_TRUE(tfmdata::readParallel(kMulti30k, "train", "de", "en", train).ok());
  const std::string dir = testing::TempDir();
  for (const char *name : {"/digest_a.txt", "/digest_b_other_name.txt"}) {
    std::ofstream out(dir + name);
    for (size_t i = 0; i < 2000; ++i) out << train.tgt[i] << "\n";
  }
  std::string bytes[2];
  std::unique_ptr<tfmdata::Tokenizer> tok[2];
  for (int k = 0; k < 2; ++k) {
    const std::string input = dir + (k ? "/digest_b_other_name.txt" : "/digest_a.txt");
    const std::string prefix = dir + (k ? "/digest_b" : "/digest_a");
    // Also a training setting given explicitly (--input_format), not an encoding one.
    ASSERT_TRUE(sentencepiece::SentencePieceTrainer::Train("--input=" + input + " --model_prefix=" + prefix +
                                                           " --vocab_size=200 --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3 "
                                                           "--minloglevel=2" + (k ? " --input_format=text" : ""))
                    .ok());
    std::ifstream in(prefix + ".model", std::ios::binary);
    bytes[k].assign(std::istreambuf_iterator<char>(in), {});
    ASSERT_TRUE(tfmdata::Tokenizer::load(prefix + ".model", tok[k]).ok());
  }
  EXPECT_NE(bytes[0], bytes[1]) << "the model files record their input paths";
  EXPECT_EQ(tok[0]->fingerprint(), tok[1]->fingerprint());
  EXPECT_EQ(tok[0]->digest(), tok[1]->digest());
  // One bit of the normaliser's table (the end of the file) flipped.
  std::string flipped = bytes[0];
  flipped[flipped.size() - 1000] ^= 1;
  std::ofstream(dir + "/digest_flipped.model", std::ios::binary) << flipped;
  std::unique_ptr<tfmdata::Tokenizer> damaged;
  ASSERT_TRUE(tfmdata::Tokenizer::load(dir + "/digest_flipped.model", damaged).ok());
  EXPECT_EQ(damaged->fingerprint(), tok[0]->fingerprint());
  EXPECT_NE(damaged->digest(), tok[0]->digest());
}

std::vector<tfmdata::Example> syntheticExamples(int n) {
  std::vector<tfmdata::Example> ex(n);
  for (int i = 0; i < n; ++i) {
    ex[i].src.assign(1 + (i * 7) % 23, 10 + i % 50);
    ex[i].tgt.assign(1 + (i * 5) % 19, 20 + i % 40);
  }
  return ex;
}

// Every kept pair appears exactly once per epoch; batches respect the token budget; layouts are
// src = ids + EOS, tgt_in = BOS + ids, tgt_out = ids + EOS, padded.
TEST(Batcher, CoversEveryPairOnceWithinBudget) {
  tfmdata::BatcherOptions o;
  o.batchTokens = 64;
  o.maxLen = 20;  // drops pairs longer than 19 tokens
  tfmdata::Batcher b;
  std::vector<tfmdata::Example> ex = syntheticExamples(300);
  int64_t tooLong = 0;
  for (const auto &e : ex) tooLong += (e.src.size() + 1 > 20 || e.tgt.size() + 1 > 20);
  ASSERT_TRUE(tfmdata::Batcher::create(ex, o, b).ok());
  EXPECT_EQ(b.droppedTooLong(), tooLong);
  EXPECT_EQ(b.examples(), 300 - tooLong);
  std::multiset<std::vector<int32_t>> seen;
  int64_t pairs = 0;
  for (int64_t i = 0; i < b.batchesPerEpoch(); ++i) {
    tfmdata::Batch x = b.batch(0, i);
    const int64_t B = x.src.shape[0], S = x.src.shape[1], T = x.tgtIn.shape[1];
    EXPECT_LE(B * std::max(S, T), 64);
    EXPECT_EQ(x.tgtOut.shape, x.tgtIn.shape);
    pairs += B;
    for (int64_t r = 0; r < B; ++r) {
      const int32_t *src = x.src.data<int32_t>() + r * S, *in = x.tgtIn.data<int32_t>() + r * T,
                    *out = x.tgtOut.data<int32_t>() + r * T;
      EXPECT_EQ(in[0], o.bos);
      int64_t len = 0;
      while (len < T && out[len] != o.eos) ++len;
      ASSERT_LT(len, T);
      for (int64_t t = 0; t < len; ++t) EXPECT_EQ(in[t + 1], out[t]);
      std::vector<int32_t> s;
      for (int64_t j = 0; j < S && src[j] != o.eos; ++j) s.push_back(src[j]);
      seen.insert(s);
    }
  }
  EXPECT_EQ(pairs, b.examples());
  std::multiset<std::vector<int32_t>> expected;
  for (const auto &e : ex)
    if (e.src.size() + 1 <= 20 && e.tgt.size() + 1 <= 20) expected.insert(e.src);
  EXPECT_EQ(seen, expected);
}

// The order is a function of (seed, epoch): reproducible (so a resumed run sees the same
// batches), different across epochs and seeds.
TEST(Batcher, EpochOrderIsSeeded) {
  auto order = [](uint64_t seed, int64_t epoch) {
    tfmdata::BatcherOptions o;
    o.batchTokens = 64;
    o.seed = seed;
    tfmdata::Batcher b;
    EXPECT_TRUE(tfmdata::Batcher::create(syntheticExamples(200), o, b).ok());
    std::vector<int32_t> firstIds;
    for (int64_t i = 0; i < b.batchesPerEpoch(); ++i) firstIds.push_back(b.batch(epoch, i).src.data<int32_t>()[0]);
    return firstIds;
  };
  EXPECT_EQ(order(1, 0), order(1, 0));
  EXPECT_NE(order(1, 0), order(1, 1));
  EXPECT_NE(order(1, 0), order(2, 0));
}

TEST(Batcher, NothingFitsIsAnError) {
  tfmdata::BatcherOptions o;
  o.maxLen = 1;  // every pair needs at least 2 (one token + EOS)
  tfmdata::Batcher b;
  tfmrt::Status s = tfmdata::Batcher::create(syntheticExamples(10), o, b);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no sentence pair fits max_len 1"), std::string::npos) << s.message();
}

}  // namespace

// --- BLEU --------------------------------------------------------------------------------------

#include "tfmdata/bleu.h"

namespace {

TEST(Bleu, Tokenize13a) {
  using V = std::vector<std::string>;
  EXPECT_EQ(tfmdata::tokenize13a("A dog, running."), (V{"A", "dog", ",", "running", "."}));
  EXPECT_EQ(tfmdata::tokenize13a("3.5 and 1,000 but end."), (V{"3.5", "and", "1,000", "but", "end", "."}));
  // sacreBLEU pads the line, so a period after a final digit is split off too.
  EXPECT_EQ(tfmdata::tokenize13a("holds 2."), (V{"holds", "2", "."}));
  EXPECT_EQ(tfmdata::tokenize13a("(hi)!? a/b 5-year"), (V{"(", "hi", ")", "!", "?", "a", "/", "b", "5", "-", "year"}));
  EXPECT_EQ(tfmdata::tokenize13a("don't &quot;x&quot;"), (V{"don't", "\"", "x", "\""}));
}

TEST(Bleu, IdenticalIsHundredAndDisjointIsZero) {
  const std::vector<std::string> refs{"a man is riding a bike .", "two dogs play in the snow ."};
  EXPECT_NEAR(tfmdata::corpusBleu(refs, refs).bleu, 100.0, 1e-9);
  EXPECT_EQ(tfmdata::corpusBleu({"x y z w v", "q r s t u v"}, refs).bleu, 0.0);
}

// By hand: hyp "the cat sat on the mat" vs ref "the cat is on the mat" (6 tokens each, BP 1).
// 1-grams: the, cat, sat, on, the, mat -> 5 of 6 match (sat does not); 2-grams: the cat, cat sat,
// sat on, on the, the mat -> 3 of 5; 3-grams: the cat sat, cat sat on, sat on the, on the mat ->
// 1 of 4; 4-grams: 0 of 3 -> sacreBLEU's default 'exp' smoothing counts it as 1/2 match of 3.
// Adding a second, identical pair makes every n-gram order non-zero: 4-grams 0+3 of 3+3.
TEST(Bleu, HandComputed) {
  const tfmdata::BleuScore one = tfmdata::corpusBleu({"the cat sat on the mat"}, {"the cat is on the mat"});
  EXPECT_NEAR(one.precisions[0], 100.0 * 5 / 6, 1e-9);
  EXPECT_NEAR(one.precisions[1], 100.0 * 3 / 5, 1e-9);
  EXPECT_NEAR(one.precisions[2], 100.0 * 1 / 4, 1e-9);
  EXPECT_NEAR(one.precisions[3], 100.0 * 0.5 / 3, 1e-9);
  EXPECT_NEAR(one.bleu, 100.0 * std::exp((std::log(5.0 / 6) + std::log(3.0 / 5) + std::log(1.0 / 4) + std::log(0.5 / 3)) / 4),
              1e-9);
  const tfmdata::BleuScore two =
      tfmdata::corpusBleu({"the cat sat on the mat", "a b c d"}, {"the cat is on the mat", "a b c d"});
  const double expected = 100.0 * std::exp((std::log(9.0 / 10) + std::log(6.0 / 8) + std::log(3.0 / 6) +
                                            std::log(1.0 / 4)) / 4);
  EXPECT_NEAR(two.bleu, expected, 1e-9);
  EXPECT_EQ(two.brevityPenalty, 1.0);
  // Brevity: a 3-token hypothesis against a 6-token reference: BP = exp(1 - 6/3).
  const tfmdata::BleuScore shortHyp = tfmdata::corpusBleu({"the cat sat", "a b c d"}, {"the cat is on the mat", "a b c d"});
  EXPECT_NEAR(shortHyp.brevityPenalty, std::exp(1.0 - 10.0 / 7.0), 1e-12);
}

}  // namespace

// --- BLEU and chrF equal to sacreBLEU's own values (tests/golden/sacrebleu, sacreBLEU 2.6.0) --------

#include <fstream>
#include <iterator>
#include <sstream>

#include "json.h"

namespace {

tfmrt::JsonValue readJson(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  tfmrt::JsonValue v;
  tfmrt::Status s = tfmrt::parseJson(text.data(), text.size(), v);
  EXPECT_TRUE(s.ok()) << path << ": " << s.message();
  return v;
}

std::vector<std::string> strings(const tfmrt::JsonValue &array) {
  std::vector<std::string> out;
  for (const auto &item : array.items) out.push_back(item.string);
  return out;
}

TEST(Sacrebleu, CorpusBleuChrfSentenceBleuAndTokensEqualSacrebleu) {
  const std::string dir = std::string(TFMC_SOURCE_DIR) + "/tests/golden/sacrebleu/";
  const tfmrt::JsonValue cases = readJson(dir + "cases.json"), expected = readJson(dir + "expected.json");
  const tfmrt::JsonValue *byName = expected.find("cases");
  ASSERT_NE(byName, nullptr);
  ASSERT_GE(cases.items.size(), 12u);
  for (const tfmrt::JsonValue &c : cases.items) {
    const std::string name = c.find("name")->string;
    SCOPED_TRACE(name);
    const std::vector<std::string> hyps = strings(*c.find("hyps")), refs = strings(*c.find("refs"));
    const tfmrt::JsonValue &want = *byName->find(name);
    const tfmrt::JsonValue &bleu = *want.find("bleu");
    const tfmdata::BleuScore got = tfmdata::corpusBleu(hyps, refs);
    // Scores agree to the last bits (same operations in the same order); 1e-9 leaves room for libm.
    EXPECT_NEAR(got.bleu, bleu.find("score")->number, 1e-9);
    for (int n = 0; n < 4; ++n) {
      EXPECT_EQ(got.counts[n], bleu.find("counts")->items[n].integer) << "order " << n + 1;
      EXPECT_EQ(got.totals[n], bleu.find("totals")->items[n].integer) << "order " << n + 1;
      EXPECT_NEAR(got.precisions[n], bleu.find("precisions")->items[n].number, 1e-9) << "order " << n + 1;
    }
    EXPECT_NEAR(got.brevityPenalty, bleu.find("bp")->number, 1e-12);
    EXPECT_EQ(got.hypLength, bleu.find("sys_len")->integer);
    EXPECT_EQ(got.refLength, bleu.find("ref_len")->integer);
    EXPECT_EQ(got.format(), bleu.find("str")->string);
    tfmdata::BleuOptions lc;
    lc.lowercase = true;
    EXPECT_NEAR(tfmdata::corpusBleu(hyps, refs, lc).bleu, want.find("bleu_lowercase")->find("score")->number, 1e-9);
    EXPECT_NEAR(tfmdata::sentenceBleu(hyps[0], refs[0]).bleu, want.find("sentence_bleu_first")->find("score")->number,
                1e-9);
    EXPECT_NEAR(tfmdata::corpusChrf(hyps, refs), want.find("chrf")->find("score")->number, 1e-9);
  }
  // Every line's 13a tokens (BLEU right-strips a line first; the raw tokenizer is checked here).
  const tfmrt::JsonValue *tokenized = expected.find("tokenized_13a");
  ASSERT_NE(tokenized, nullptr);
  for (const auto &[line, tokens] : tokenized->members) {
    std::string joined;
    for (const std::string &t : tfmdata::tokenize13a(line)) joined += (joined.empty() ? "" : " ") + t;
    EXPECT_EQ(joined, tokens.string) << "line: " << line;
  }
  const tfmrt::JsonValue *signatures = expected.find("signatures");
  EXPECT_EQ(tfmdata::bleuSignature(), signatures->find("bleu")->string);
  tfmdata::BleuOptions lc;
  lc.lowercase = true;
  EXPECT_EQ(tfmdata::bleuSignature(lc), signatures->find("bleu_lowercase")->string);
  EXPECT_EQ(tfmdata::chrfSignature(), signatures->find("chrf")->string);
}

}  // namespace
