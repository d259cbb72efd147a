#include "tfmdata/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>
#include <unordered_map>

#include "tfmrt/files.h"

namespace tfmdata {
namespace {

tfmrt::Status fromSp(const sentencepiece::util::Status &s, const std::string &what) {
  if (s.ok()) return tfmrt::Status::OK();
  // SentencePiece's checks read "Internal: ./src/trainer_interface.cc(660) [(a) == (b)] Vocabulary
  // size too high (...)": keep the sentence after the source location and condition, when there is one.
  std::string text = s.ToString();
  const size_t bracket = text.find("] ");
  if (text.rfind("Internal: ", 0) == 0 && bracket != std::string::npos && bracket + 2 < text.size()) text.erase(0, bracket + 2);
  // Its advice names its own option, which tfmc does not have (tfmc uses full character coverage).
  if (const size_t advice = text.find(" or decrease character_coverage"); advice != std::string::npos)
    text = text.substr(0, advice);
  for (const auto &[from, to] : {std::pair<const char *, const char *>{"is smaller than required_chars. ",
                                                                        "is smaller than the corpus's distinct characters: "},
                                 {"Increase vocab_size", "raise --vocab"}})
    if (const size_t at = text.find(from); at != std::string::npos) text.replace(at, std::strlen(from), to);
  return tfmrt::invalidArgument(what + ": " + text);
}

class VectorIterator final : public sentencepiece::SentenceIterator {
public:
  explicit VectorIterator(const std::vector<std::string> &v) : v_(v) {}
  bool done() const override { return i_ >= v_.size(); }
  void Next() override { ++i_; }
  const std::string &value() const override { return v_[i_]; }
  sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

private:
  const std::vector<std::string> &v_;
  size_t i_ = 0;
};

}  // namespace

Tokenizer::Tokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Tokenizer::~Tokenizer() = default;

tfmrt::Status Tokenizer::load(const std::string &path, std::unique_ptr<Tokenizer> &out) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  // SentencePiece reads a directory through a stream that throws, and reports a file that is not
  // a model as a failed internal check: say what is wrong with the file instead.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return tfmrt::ioError("cannot load tokenizer '" + path + "': " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return tfmrt::invalidArgument("cannot load tokenizer '" + path + "': it is a directory");
  if (S_ISREG(st.st_mode) && st.st_size == 0)  // (a pipe, <(zcat m.spm.gz), has no size to check)
    return tfmrt::invalidArgument("cannot load tokenizer '" + path + "': the file is empty");
  // Read here, with a bound: SentencePiece read a character device (/dev/zero) until memory ran out.
  // Models are a few MiB (tfmc tokenizer --vocab 32000: ~0.8 MiB).
  constexpr size_t kMaxModelBytes = size_t(64) << 20;
  const std::string tooLarge = "cannot load tokenizer '" + path +
                               "': more than 64 MiB, not a SentencePiece model (make one with tfmc tokenizer)";
  if (S_ISREG(st.st_mode) && uint64_t(st.st_size) > kMaxModelBytes) return tfmrt::invalidArgument(tooLarge);
  std::string bytes;
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE *)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!f) return tfmrt::ioError("cannot load tokenizer '" + path + "': " + std::strerror(errno));
    std::vector<char> chunk(size_t(1) << 16);
    for (size_t n; (n = std::fread(chunk.data(), 1, chunk.size(), f.get())) > 0;) {
      if (bytes.size() + n > kMaxModelBytes) return tfmrt::invalidArgument(tooLarge);
      bytes.append(chunk.data(), n);
    }
    if (std::ferror(f.get())) return tfmrt::ioError("cannot read tokenizer '" + path + "': " + std::strerror(errno));
  }
  if (bytes.empty()) return tfmrt::invalidArgument("cannot load tokenizer '" + path + "': the file is empty");
  if (const auto s = t->sp_->LoadFromSerializedProto(bytes); !s.ok())
    return tfmrt::invalidArgument("cannot load tokenizer '" + path +
                                  "': not a SentencePiece model, or a damaged one (make one with tfmc tokenizer)" +
                                  // A failed internal check names SentencePiece's source lines: nothing for a user.
                                  (s.code() == sentencepiece::util::StatusCode::kInternal
                                       ? std::string()
                                       : "; SentencePiece says: " + s.ToString()));
  if (t->sp_->pad_id() != 0 || t->sp_->bos_id() != 1 || t->sp_->eos_id() != 2 || t->sp_->unk_id() != 3)
    return tfmrt::invalidArgument("tokenizer '" + path + "' has pad/bos/eos/unk ids " +
                                  std::to_string(t->sp_->pad_id()) + "/" + std::to_string(t->sp_->bos_id()) + "/" +
                                  std::to_string(t->sp_->eos_id()) + "/" + std::to_string(t->sp_->unk_id()) +
                                  ", the models expect 0/1/2/3");
  out = std::move(t);
  return tfmrt::Status::OK();
}

tfmrt::Status Tokenizer::train(const std::vector<std::string> &sentences, const TokenizerOptions &options,
                               const std::string &path, std::unique_ptr<Tokenizer> &out) {
  // SentencePiece skips lines longer than its max_sentence_length (4192 bytes) and ends the process
  // (exit 255) when no character is left: refuse such a corpus here.
  constexpr size_t kMaxLineBytes = 4192;
  const bool usable = std::any_of(sentences.begin(), sentences.end(), [](const std::string &line) {
    return line.size() <= kMaxLineBytes && line.find_first_not_of(" \t\r\n\v\f") != std::string::npos;
  });
  if (!usable)
    return tfmrt::invalidArgument("cannot train a tokenizer: the corpus has no line with text on it of at most " +
                                  std::to_string(kMaxLineBytes) + " bytes (" + std::to_string(sentences.size()) +
                                  " lines: empty, whitespace only or longer)");
  const std::unordered_map<std::string, std::string> args{
      {"vocab_size", std::to_string(options.vocabSize)},
      {"model_type", "unigram"},
      {"character_coverage", "1.0"},
      {"pad_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"unk_id", "3"},
      {"input_sentence_size", std::to_string(options.maxSentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", "2"},
      {"minloglevel", "2"},
  };
  VectorIterator it(sentences);
  std::string proto;
  TFMRT_RETURN_IF_ERROR(fromSp(sentencepiece::SentencePieceTrainer::Train(args, &it, &proto), "tokenizer training failed"));
  // Atomically: a partial model file must never be left behind.
  TFMRT_RETURN_IF_ERROR(tfmrt::writeFileBytes(path, "tokenizer", proto.data(), proto.size()));
  // From the bytes written, not read back: `-o /dev/null` or a FIFO cannot be read back.
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  TFMRT_RETURN_IF_ERROR(fromSp(t->sp_->LoadFromSerializedProto(proto), "the trained tokenizer does not load"));
  out = std::move(t);
  return tfmrt::Status::OK();
}

tfmrt::Status Tokenizer::encode(const std::string &text, std::vector<int32_t> &ids) const {
  std::vector<int> raw;
  TFMRT_RETURN_IF_ERROR(fromSp(sp_->Encode(text, &raw), "cannot tokenize"));
  ids.assign(raw.begin(), raw.end());
  return tfmrt::Status::OK();
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids) const {
  std::string text;
  (void)sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  return text;
}

std::string Tokenizer::pieces(const std::vector<int32_t> &ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (!out.empty()) out += ' ';
    out += (id >= 0 && id < vocabSize()) ? sp_->IdToPiece(id) : std::string("<invalid>");
  }
  return out;
}

int Tokenizer::vocabSize() const { return sp_->GetPieceSize(); }

int32_t Tokenizer::pieceId(const std::string &piece) const {
  const int id = sp_->PieceToId(piece);
  // PieceToId answers unk's id for any unknown piece: only "<unk>" itself is unk.
  return id == unkId() && piece != sp_->IdToPiece(unkId()) ? -1 : int32_t(id);
}

namespace {

// FNV-1a 64 over bytes, as 16 hex digits (fingerprint and digest).
struct Fnv64 {
  uint64_t h = 1469598103934665603ull;
  void mix(const char *bytes, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(bytes[i])) * 1099511628211ull;
  }
  void mix(const std::string &bytes) { mix(bytes.data(), bytes.size()); }
  void mixValue(uint64_t value) { h = (h ^ value) * 1099511628211ull; }
  std::string hex() const {
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", (unsigned long long)h);
    return out;
  }
};

// Protobuf's wire format, read by hand (Debian's package ships no generated headers): the fields
// of the message in bytes [pos, end), each as (field number, its bytes including the key). False
// when malformed.
bool forEachField(const std::string &proto, size_t pos, size_t end,
                  const std::function<void(uint64_t field, size_t begin, size_t valueBegin, size_t end)> &visit) {
  auto varint = [&](size_t &at, uint64_t &value) {
    value = 0;
    for (int shift = 0; at < end && shift < 64; shift += 7) {
      const uint8_t byte = uint8_t(proto[at++]);
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return true;
    }
    return false;
  };
  while (pos < end) {
    const size_t begin = pos;
    uint64_t key = 0, value = 0;
    if (!varint(pos, key)) return false;
    size_t valueBegin = pos;
    switch (key & 7) {
    case 0: if (!varint(pos, value)) return false; break;
    case 1: if (end - pos < 8) return false; pos += 8; break;
    case 5: if (end - pos < 4) return false; pos += 4; break;
    case 2:
      if (!varint(pos, value) || value > end - pos) return false;
      valueBegin = pos;
      pos += size_t(value);
      break;
    default: return false;
    }
    visit(key >> 3, begin, valueBegin, pos);
  }
  return true;
}

}  // namespace

std::string Tokenizer::digest() const {
  // The serialized ModelProto, by what segments text: pieces (1), the normaliser (3) and
  // denormaliser (5) less normalization_rule_tsv (6: a file name), and of trainer_spec (2) only
  // the fields encoding reads (model_type 3, treat_whitespace_as_suffix 24,
  // allow_whitespace_only_pieces 26, byte_fallback 35, the special ids and pieces 40-48 with
  // unk_surface 44). Its other fields say how it was trained (input files, threads, sample
  // sizes): a tokenizer retrained elsewhere, or on more threads, to the same model stays equal.
  // self_test_data (4) is left out. Malformed: hashed whole.
  const std::string proto = sp_->serialized_model_proto();
  Fnv64 hash;
  auto mix = [&](size_t begin, size_t end) { hash.mix(proto.data() + begin, end - begin); };
  bool parsed = forEachField(proto, 0, proto.size(), [&](uint64_t field, size_t begin, size_t valueBegin, size_t end) {
    if (field == 4) return;
    if (field != 2 && field != 3 && field != 5) return mix(begin, end);
    static const std::vector<uint64_t> kEncodingOptions = {3, 24, 26, 35, 40, 41, 42, 43, 44, 45, 46, 47, 48};
    hash.mixValue(field);  // the field, not its length (which what is left out changes)
    if (!forEachField(proto, valueBegin, end, [&](uint64_t sub, size_t b, size_t, size_t e) {
          const bool kept = field == 2 ? std::find(kEncodingOptions.begin(), kEncodingOptions.end(), sub) != kEncodingOptions.end()
                                       : sub != 6;
          if (kept) mix(b, e);
        }))
      mix(valueBegin, end);
  });
  if (!parsed) {
    hash = Fnv64();
    mix(0, proto.size());
  }
  return hash.hex();
}

std::string Tokenizer::fingerprint() const {
  Fnv64 hash;
  char score[32];
  for (int id = 0; id < vocabSize(); ++id) {
    std::snprintf(score, sizeof score, "\t%.9g\n", double(sp_->GetScore(id)));
    hash.mix(sp_->IdToPiece(id));
    hash.mix(score, std::strlen(score));
  }
  return hash.hex();
}

}  // namespace tfmdata
