// `tfmc average`: the element-wise mean of the parameters of several checkpoints of one model (the
// standard final-N checkpoint average), written as a checkpoint that `translate --checkpoint` and
// `train --resume` accept. Each input is verified as a checkpoint of the artifact's model
// (checksum, fingerprint) before it is used.
#include <cstdio>
#include <iostream>
#include <map>
#include <vector>

#include "Commands.h"
#include "RunSupport.h"
#include "TokenizerRecord.h"
#include "tfmrt/files.h"

namespace tfmc {

int averageCommand(const CommandLine &cl) {
  if (cl.positionals.size() < 2) {
    std::cerr << "tfmc average: error: expected the artifact and at least one checkpoint "
                 "(tfmc average <model.tfmx> <ck1> <ck2> ... -o <out>)\n";
    return 2;
  }
  const std::string out = cl.get("o");
  if (out.empty()) {
    std::cerr << "tfmc average: error: -o <output checkpoint> is required\n";
    return 2;
  }
  const std::vector<std::string> checkpoints(cl.positionals.begin() + 1, cl.positionals.end());
  // By file, not by spelling (./ck, links): the artifact counts too.
  if (auto s = tfmrt::refuseOverwriting(out, "output", cl.positionals); !s.ok()) {
    fail("average", s);
    return 2;
  }
  for (const std::string &c : checkpoints)
    if (c == out) {
      std::cerr << "tfmc average: error: the output '" << out << "' is also an input\n";
      return 2;
    }
  // One file twice would silently weigh it double (by file: ./ck and links count as the same).
  for (size_t i = 0; i < checkpoints.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (checkpoints[i] == checkpoints[j] || tfmrt::sameFile(checkpoints[i], checkpoints[j])) {
        std::cerr << "tfmc average: error: '" << checkpoints[i] << "' is given twice (as '" << checkpoints[j]
                  << "'); each checkpoint counts once\n";
        return 2;
      }
  tfmrt::RuntimeOptions options;
  options.backend = tfmrt::KernelBackend::Reference;  // no kernels run: skip oneDNN set-up
  std::unique_ptr<tfmrt::Model> model;
  if (auto s = tfmrt::Model::load(cl.positionals[0], options, model); !s.ok()) return fail("average", s);
  const tfmrt::Artifact &a = model->artifact();

  // Sums in double, in the order given, so the result does not depend on anything else.
  std::vector<std::vector<double>> sums(a.params.size());
  int64_t step = 0;
  std::string steps;
  CheckpointMeta tokenizer;
  std::map<uint64_t, std::pair<std::string, int64_t>> seen;  // weights fingerprint -> the checkpoint and step
  // The latest checkpoint (highest step) gives the result its step, optimizer state and records
  // (training data, batches per step, best validation): a resume is checked as for it. (The last
  // one listed did: a checkpoint_* glob lists checkpoint_1000 before checkpoint_800.)
  size_t latest = 0;
  int64_t latestStep = -1;
  CheckpointMeta latestMeta;
  for (const std::string &c : checkpoints) {
    CheckpointMeta meta;
    if (auto s = model->loadCheckpoint(c, step, &meta); !s.ok()) return fail("average", s);
    if (step > latestStep) {
      latest = size_t(&c - checkpoints.data());
      latestStep = step;
      latestMeta = meta;
    }
    // Checkpoints of different vocabularies cannot be averaged; the result keeps the record.
    if (c == checkpoints.front()) {
      tokenizer = tokenizerKeys(meta);
    } else if (tokenizerKeys(meta).count("tokenizer.fingerprint") != tokenizer.count("tokenizer.fingerprint") ||
               (tokenizer.count("tokenizer.fingerprint") &&
                meta.at("tokenizer.fingerprint") != tokenizer.at("tokenizer.fingerprint"))) {
      const bool cRecords = tokenizerKeys(meta).count("tokenizer.fingerprint") > 0;
      const bool firstRecords = tokenizer.count("tokenizer.fingerprint") > 0;
      if (cRecords != firstRecords)  // one run on a corpus, the other on one batch (no tokenizer)
        std::cerr << "tfmc average: error: '" << (cRecords ? checkpoints.front() : c)
                  << "' records no tokenizer (trained without --data) but '" << (cRecords ? c : checkpoints.front())
                  << "' does: average checkpoints of one run\n";
      else
        std::cerr << "tfmc average: error: '" << c << "' was trained with a different tokenizer than '"
                  << checkpoints.front() << "'\n";
      return 1;
    }
    // The same pieces, but other normalisation rules or options (both recorded: since the digest).
    if (c != checkpoints.front()) {
      const CheckpointMeta keys = tokenizerKeys(meta);
      if (keys.count("tokenizer.digest") && tokenizer.count("tokenizer.digest") &&
          keys.at("tokenizer.digest") != tokenizer.at("tokenizer.digest")) {
        std::cerr << "tfmc average: error: '" << c << "' was trained with a tokenizer of the same pieces as '"
                  << checkpoints.front() << "''s but other tokenization settings (digest " << keys.at("tokenizer.digest")
                  << " vs " << tokenizer.at("tokenizer.digest") << ")\n";
        return 1;
      }
    }
    // Separate vocabularies: the target's record (absent on both for a joint vocabulary) too.
    if (c != checkpoints.front()) {
      const CheckpointMeta keys = tokenizerKeys(meta);
      for (const char *key : {"tgt_tokenizer.fingerprint", "tgt_tokenizer.digest"}) {
        const auto mine = keys.find(key);
        const auto first = tokenizer.find(key);
        if ((mine == keys.end()) != (first == tokenizer.end()) ||
            (mine != keys.end() && mine->second != first->second)) {
          std::cerr << "tfmc average: error: '" << c << "' was trained with a different target tokenizer than '"
                    << checkpoints.front() << "'\n";
          return 1;
        }
      }
    }
    // The same weights under two names (checkpoint_last beside checkpoint_<its step>) would weigh double.
    // At another step the same weights are possible (a frozen model, skipped steps): said, taken.
    if (const auto [it, fresh] = seen.emplace(weightsFingerprint(*model), std::make_pair(c, step)); !fresh) {
      if (it->second.second == step) {
        std::cerr << "tfmc average: error: '" << c << "' holds the same weights as '" << it->second.first << "' (both step "
                  << step << "); each checkpoint counts once: drop one\n";
        return 2;
      }
      std::cerr << "tfmc average: warning: '" << c << "' (step " << step << ") holds the same weights as '"
                << it->second.first << "' (step " << it->second.second << ")\n";
    }
    for (size_t i = 0; i < a.params.size(); ++i) {
      const tfmrt::Tensor *w = model->weight(a.params[i].name);
      const float *v = w->data<float>();
      sums[i].resize(size_t(w->numel()), 0.0);
      for (size_t j = 0; j < sums[i].size(); ++j) sums[i][j] += v[j];
    }
    steps += (steps.empty() ? "" : ",") + std::to_string(step);
    std::fprintf(stderr, "read %s (step %lld)\n", c.c_str(), (long long)step);
  }
  std::map<std::string, tfmrt::Tensor> averaged;
  for (size_t i = 0; i < a.params.size(); ++i) {
    tfmrt::Tensor t(tfmrt::DType::F32, a.params[i].shape);
    float *dst = t.data<float>();
    for (size_t j = 0; j < sums[i].size(); ++j) dst[j] = float(sums[i][j] / double(checkpoints.size()));
    averaged.emplace(a.params[i].name, std::move(t));
  }
  CheckpointMeta outMeta = latestMeta;
  outMeta["averaged_steps"] = steps;
  // The latest checkpoint's optimizer state is kept (as other toolkits keep one), so training can resume.
  if (latest + 1 != checkpoints.size())
    if (auto s = model->loadCheckpoint(checkpoints[latest], step, nullptr); !s.ok()) return fail("average", s);
  if (auto s = model->setWeights(averaged, /*keepTrainingState=*/true); !s.ok()) return fail("average", s);
  if (auto s = model->saveCheckpoint(out, latestStep, outMeta); !s.ok()) return fail("average", s);
  bool hasTrainingState = false;
  for (const tfmrt::StateInfo &st : a.states) hasTrainingState |= tfmrt::isCheckpointedState(st);
  std::printf("wrote %s: the mean of %zu checkpoint%s (steps %s)%s\n", out.c_str(), checkpoints.size(),
              checkpoints.size() == 1 ? "" : "s", steps.c_str(),
              hasTrainingState ? "" : "; weights only: the artifact has no train_step, so no optimizer state "
                                      "(for translate --checkpoint; train --resume needs an artifact with train_step)");
  return 0;
}

}  // namespace tfmc
