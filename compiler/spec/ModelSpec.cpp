// Parses and validates model specs (models/*.yaml) with yaml-cpp. Every error in the file is
// collected in one run and reported against the line and column yaml-cpp recorded for the key or
// value at fault. The accepted schema is documented in models/README.md ("Spec schema"); the
// tables in SpecParser::SpecParser are its single source of truth in code.
#include "spec/ModelSpec.h"

#include "tfmdata/decoding_limits.h"
#include "tfmrt/model_info.h"

#include <sys/stat.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <utility>

namespace tfmc {

const char *toString(PositionKind kind) {
  return kind == PositionKind::Sinusoidal ? "sinusoidal" : "learned";
}
const char *toString(NormPlacement norm) { return norm == NormPlacement::Post ? "post" : "pre"; }
const char *toString(Activation act) { return act == Activation::ReLU ? "relu" : "gelu"; }

namespace {

//===----------------------------------------------------------------------===//
// Small helpers
//===----------------------------------------------------------------------===//

// Values are echoed in messages: a 1 MB value must not become a 1 MB message. The first
// kShownBytes bytes (never half a UTF-8 character) of a longer one are shown.
constexpr size_t kShownBytes = 80;

std::string shownPrefix(const std::string &s) {
  size_t end = kShownBytes;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80)
    --end;
  return s.substr(0, end);
}

std::string cut(const std::string &s) {
  if (s.size() <= kShownBytes)
    return s;
  return shownPrefix(s) + "... (" + std::to_string(s.size()) + " bytes)";
}

std::string quote(const std::string &s) {
  if (s.size() <= kShownBytes)
    return "'" + s + "'";
  return "'" + shownPrefix(s) + "...' (" + std::to_string(s.size()) + " bytes)";
}

// Optimal-string-alignment distance (a transposition counts as one edit), case-insensitive.
size_t editDistance(const std::string &a, const std::string &b) {
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The closest candidate within roughly a third of the word's length, or "" if none is close.
std::string closest(const std::string &word, const std::vector<std::string> &candidates) {
  size_t limit = std::max<size_t>(1, (word.size() + 2) / 3);
  std::string best;
  size_t bestDist = limit + 1;
  for (const std::string &c : candidates) {
    // The distance is at least the length difference: a long mistyped (or garbage) key skips the
    // quadratic table against every short candidate.
    if ((word.size() > c.size() ? word.size() - c.size() : c.size() - word.size()) >= bestDist)
      continue;
    size_t dist = editDistance(word, c);
    if (dist < bestDist) {
      bestDist = dist;
      best = c;
    }
  }
  return best;
}

// "'a'", "'a' or 'b'", "'a', 'b' or 'c'" (or "and").
std::string alternatives(const std::vector<std::string> &names, const char *conj = "or") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0)
      out += i + 1 == names.size() ? std::string(" ") + conj + " " : ", ";
    out += quote(names[i]);
  }
  return out;
}

std::string joined(const std::vector<std::string> &names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i ? ", " : "") + names[i];
  return out;
}

// A string by its quotes, or by an explicit !!str tag (`heads: !!str 4` compiled as 4 heads).
bool isQuoted(const YAML::Node &n) { return n.Tag() == "!" || n.Tag() == "tag:yaml.org,2002:str"; }

// "!!float" for the core schema's tags, the tag itself otherwise.
std::string shortTag(const std::string &tag) {
  const std::string core = "tag:yaml.org,2002:";
  return tag.compare(0, core.size(), core) == 0 ? "!!" + tag.substr(core.size()) : tag;
}

// What a value looks like, for "got ..." in messages.
std::string describe(const YAML::Node &n) {
  switch (n.Type()) {
  case YAML::NodeType::Null:
  case YAML::NodeType::Undefined:
    return "no value";
  case YAML::NodeType::Sequence:
    return "a list";
  case YAML::NodeType::Map:
    return "a map";
  case YAML::NodeType::Scalar:
    break;
  }
  if (n.Tag() == "!")
    return "the quoted string " + quote(n.Scalar());
  if (isQuoted(n))
    return "the string (tagged !!str) " + quote(n.Scalar());
  if (n.Tag() != "?")
    return quote(n.Scalar()) + " tagged " + shortTag(n.Tag());
  return quote(n.Scalar());
}

// An explicit YAML tag that makes a plain scalar a value of another type than the key's (`heads:
// !!float 4` compiled as 4 heads): only no tag or the key's own type's tag is taken.
bool tagFits(const YAML::Node &n, std::initializer_list<const char *> own) {
  if (n.Tag() == "?")
    return true;
  for (const char *t : own)
    if (n.Tag() == std::string("tag:yaml.org,2002:") + t)
      return true;
  return false;
}

bool isDigits(const std::string &s, size_t begin, size_t end) {
  if (begin >= end)
    return false;
  for (size_t i = begin; i < end; ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i])))
      return false;
  return true;
}

enum class NumberParse { Ok, NotANumber, OutOfRange };

// Decimal integers only: [+-]?[0-9]+.
NumberParse parseInt(const std::string &s, int64_t &out) {
  size_t begin = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
  if (!isDigits(s, begin, s.size()))
    return NumberParse::NotANumber;
  errno = 0;
  long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE)
    return NumberParse::OutOfRange;
  out = v;
  return NumberParse::Ok;
}

// Decimal numbers: [+-]?(digits[.digits?]|.digits)([eE][+-]?digits)?  (so 1e-9 and 0.1 and 3).
NumberParse parseFloat(const std::string &s, double &out) {
  size_t i = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
  size_t intBegin = i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
    ++i;
  bool intDigits = i > intBegin;
  bool fracDigits = false;
  if (i < s.size() && s[i] == '.') {
    size_t fracBegin = ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
      ++i;
    fracDigits = i > fracBegin;
  }
  if (!intDigits && !fracDigits)
    return NumberParse::NotANumber;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-'))
      ++i;
    if (!isDigits(s, i, s.size()))
      return NumberParse::NotANumber;
    i = s.size();
  }
  if (i != s.size())
    return NumberParse::NotANumber;
  errno = 0;
  double v = std::strtod(s.c_str(), nullptr);
  if (errno == ERANGE && std::abs(v) > 1.0)
    return NumberParse::OutOfRange;
  out = v;
  return NumberParse::Ok;
}

//===----------------------------------------------------------------------===//
// Schema tables
//===----------------------------------------------------------------------===//

enum class Kind { Int, Float, Bool, Enum };
enum class Range { Any, Positive, NonNegative, Probability /* [0, 1) */ };

// Upper bounds far beyond any model this tool can train or run (transformer-big: d_model 1024,
// d_ff 4096, 6 layers, 37k vocabulary), so that every size and product of sizes downstream
// (weights, position tables, activations) fits an int64 and no absurd allocation is attempted.
constexpr int64_t kMaxWidth = 1 << 16;    // d_model (d_ff: 4x)
constexpr int64_t kMaxLayers = 1024;      // encoder_layers, decoder_layers
constexpr int64_t kMaxVocab = 1 << 24;    // src/tgt_vocab_size
constexpr int64_t kMaxLen = 1 << 20;      // max_len, compile lengths, max_length_offset
constexpr int64_t kMaxTokens = 1 << 28;   // batch_tokens, compile batch

struct Field {
  std::string name;
  Kind kind = Kind::Int;
  bool required = false;
  Range range = Range::Any;
  int64_t max = INT64_MAX;  // integers: sizes beyond any buildable model are refused here
  double maxFloat = HUGE_VAL;  // numbers: the largest value that works downstream
  int64_t *i = nullptr;
  double *d = nullptr;
  bool *b = nullptr;
  std::vector<std::string> enumNames;
  std::function<void(size_t)> setEnum;

  // Filled while parsing.
  bool present = false;
  bool valid = true; // holds a usable value (possibly the default); cleared on any error
  YAML::Mark keyMark, valueMark;
};

Field intField(const char *name, int64_t &v, Range range, bool required = false, int64_t max = INT64_MAX) {
  Field f;
  f.max = max;
  f.name = name;
  f.kind = Kind::Int;
  f.range = range;
  f.required = required;
  f.valid = !required;
  f.i = &v;
  return f;
}

Field floatField(const char *name, double &v, Range range, double max = HUGE_VAL) {
  Field f;
  f.maxFloat = max;
  f.name = name;
  f.kind = Kind::Float;
  f.range = range;
  f.d = &v;
  return f;
}

Field boolField(const char *name, bool &v) {
  Field f;
  f.name = name;
  f.kind = Kind::Bool;
  f.b = &v;
  return f;
}

template <typename E>
Field enumField(const char *name, E &v, std::vector<std::pair<std::string, E>> values) {
  Field f;
  f.name = name;
  f.kind = Kind::Enum;
  for (auto &value : values)
    f.enumNames.push_back(value.first);
  E *target = &v;
  f.setEnum = [target, values](size_t index) { *target = values[index].second; };
  return f;
}

struct Section {
  Section(std::string name, bool required) : name(std::move(name)), required(required) {}

  std::string name;
  bool required = false;
  std::vector<Field> fields;

  bool present = false;
  YAML::Mark keyMark;

  Field *find(const std::string &key) {
    for (Field &f : fields)
      if (f.name == key)
        return &f;
    return nullptr;
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const Field &f : fields)
      out.push_back(f.name);
    return out;
  }
};

//===----------------------------------------------------------------------===//
// The parser
//===----------------------------------------------------------------------===//

class SpecParser {
public:
  SpecParser(const std::string &text, const std::string &path, ModelSpec &spec,
             std::vector<SpecDiagnostic> &diags);
  void run();

private:
  void error(const YAML::Mark &mark, const std::string &message);
  std::string syntaxHint(const YAML::Exception &e) const;
  bool findSecondDocument(YAML::Mark &mark) const;
  // YAML lets a quoted scalar run over lines, so `name: "tiny` took the rest of the file as the
  // name and reported keys missing. No spec value spans lines: a quote opened at the start of a
  // key or value must close on its line.
  bool findUnclosedQuote(YAML::Mark &mark) const;
  SpecLoc loc(const YAML::Mark &mark) const;

  bool parseRoot(const YAML::Node &root);
  void parseName(const YAML::Node &key, const YAML::Node &value);
  void parseSection(Section &section, const YAML::Node &key, const YAML::Node &value);
  void parseField(Section &section, Field &field, const YAML::Node &key, const YAML::Node &value);
  void checkRange(Field &field, const std::string &text);
  std::string unknownKey(const Section *section, const YAML::Node &key);
  void crossChecks();

  Section &section(const std::string &name);
  Field &field(const std::string &sectionName, const std::string &key);
  YAML::Mark where(const std::string &sectionName, const std::string &key);
  std::string shown(const std::string &sectionName, const std::string &key);

  const std::string &text_;
  const std::string &path_;
  ModelSpec &spec_;
  std::vector<SpecDiagnostic> &diags_;
  std::vector<std::string> lines_;
  std::vector<Section> sections_;
  YAML::Mark rootMark_;
  bool namePresent_ = false;
  // What section()/field() return for a name missing from the tables (a bug in this file): an
  // internal-error diagnostic and an invalid field, never an abort.
  Section missingSection_{"<internal>", false};
  Field missingField_;
  int64_t missingValue_ = 0;
};

SpecParser::SpecParser(const std::string &text, const std::string &path, ModelSpec &spec,
                       std::vector<SpecDiagnostic> &diags)
    : text_(text), path_(path), spec_(spec), diags_(diags) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    lines_.push_back(line);
  }

  ModelSection &m = spec.model;
  Section model("model", /*required=*/true);
  model.fields = {
      intField("d_model", m.d_model, Range::Positive, true, kMaxWidth),
      intField("heads", m.heads, Range::Positive, true, 1024),
      intField("d_ff", m.d_ff, Range::Positive, true, 4 * kMaxWidth),
      intField("encoder_layers", m.encoder_layers, Range::Positive, true, kMaxLayers),
      intField("decoder_layers", m.decoder_layers, Range::Positive, true, kMaxLayers),
      intField("src_vocab_size", m.src_vocab_size, Range::Positive, true, kMaxVocab),
      intField("tgt_vocab_size", m.tgt_vocab_size, Range::Positive, true, kMaxVocab),
      boolField("tie_src_tgt_embeddings", m.tie_src_tgt_embeddings),
      boolField("tie_output_projection", m.tie_output_projection),
      enumField<PositionKind>(
          "positions", m.positions,
          {{"sinusoidal", PositionKind::Sinusoidal}, {"learned", PositionKind::Learned}}),
      intField("max_len", m.max_len, Range::Positive, false, kMaxLen),
      enumField<NormPlacement>("norm", m.norm,
                               {{"post", NormPlacement::Post}, {"pre", NormPlacement::Pre}}),
      enumField<Activation>("activation", m.activation,
                            {{"relu", Activation::ReLU}, {"gelu", Activation::GELU}}),
      // LayerNorm runs in f32: past 1e30 its eps overwhelms any variance (and 1e300 is inf).
      floatField("layer_norm_eps", m.layer_norm_eps, Range::Positive, 1e30),
      floatField("dropout", m.dropout, Range::Probability),
      floatField("attention_dropout", m.attention_dropout, Range::Probability),
      floatField("activation_dropout", m.activation_dropout, Range::Probability),
      intField("pad_id", m.pad_id, Range::NonNegative),
      intField("bos_id", m.bos_id, Range::NonNegative),
      intField("eos_id", m.eos_id, Range::NonNegative),
  };

  TrainingSection &t = spec.training;
  Section training("training", /*required=*/false);
  training.fields = {
      floatField("label_smoothing", t.label_smoothing, Range::Probability),
      floatField("adam_beta1", t.adam_beta1, Range::Probability),
      floatField("adam_beta2", t.adam_beta2, Range::Probability),
      // Adam runs in f32: an eps past its range became inf (no update at all) or 0 (0/0).
      floatField("adam_eps", t.adam_eps, Range::Positive, 1e30),
      intField("warmup_steps", t.warmup_steps, Range::Positive, false, INT32_MAX),
      // The learning rate is applied in f32: past 1e30 it is inf times the update.
      floatField("lr_scale", t.lr_scale, Range::Positive, 1e30),
      floatField("lr", t.lr, Range::Positive, 1e30),
      // The norm is compared in f32 (0 turns clipping off).
      floatField("clip_norm", t.clip_norm, Range::NonNegative, 1e30),
      floatField("weight_decay", t.weight_decay, Range::Probability),
      intField("batch_tokens", t.batch_tokens, Range::Positive, false, kMaxTokens),
      intField("max_steps", t.max_steps, Range::Positive, false, INT32_MAX),
      intField("seed", t.seed, Range::NonNegative),
  };

  DecodingSection &d = spec.decoding;
  Section decoding("decoding", /*required=*/false);
  decoding.fields = {
      intField("beam_size", d.beam_size, Range::Positive, false, 1024),
      // The search's bounds: every spec that compiles makes an artifact tfmc translate accepts.
      floatField("length_penalty", d.length_penalty, Range::NonNegative, tfmdata::kMaxLengthPenalty),
      floatField("max_length_ratio", d.max_length_ratio, Range::Positive, tfmdata::kMaxLengthRatio),
      intField("max_length_offset", d.max_length_offset, Range::NonNegative, false, tfmdata::kMaxLengthOffset),
  };

  CompileSection &c = spec.compile;
  Section compile("compile", /*required=*/false);
  compile.fields = {
      intField("batch", c.batch, Range::Positive, false, kMaxTokens),
      intField("src_len", c.src_len, Range::Positive, false, kMaxLen),
      intField("tgt_len", c.tgt_len, Range::Positive, false, kMaxLen),
  };

  sections_ = {std::move(model), std::move(training), std::move(decoding), std::move(compile)};
}

SpecLoc SpecParser::loc(const YAML::Mark &mark) const {
  SpecLoc l;
  l.file = path_;
  if (!mark.is_null() && mark.line >= 0) {
    l.line = mark.line + 1;
    l.col = mark.column + 1;
  }
  return l;
}

void SpecParser::error(const YAML::Mark &mark, const std::string &message) {
  SpecDiagnostic d;
  d.file = path_;
  d.message = message;
  if (!mark.is_null() && mark.line >= 0) {
    size_t line = static_cast<size_t>(mark.line);
    size_t col = static_cast<size_t>(std::max(mark.column, 0));
    if (lines_.empty()) {
      line = col = 0;
    } else if (line >= lines_.size()) {
      // yaml-cpp reports "not found" errors at the end of input: point just past the last line.
      line = lines_.size() - 1;
      col = lines_[line].size();
    }
    d.line = static_cast<int>(line) + 1;
    d.col = static_cast<int>(col) + 1;
    d.sourceLine = line < lines_.size() ? lines_[line] : "";
  }
  diags_.push_back(std::move(d));
}

Section &SpecParser::section(const std::string &name) {
  for (Section &s : sections_)
    if (s.name == name)
      return s;
  error(YAML::Mark::null_mark(), "internal error: the spec parser has no section '" + name + "'");
  return missingSection_;
}

Field &SpecParser::field(const std::string &sectionName, const std::string &key) {
  if (Field *f = section(sectionName).find(key))
    return *f;
  error(YAML::Mark::null_mark(), "internal error: the spec parser has no key '" + sectionName + "." + key + "'");
  missingField_ = intField("<internal>", missingValue_, Range::Any);
  missingField_.valid = false;
  return missingField_;
}

// Where to point a diagnostic about a key: its value if written, else its section's key, else
// the start of the document.
YAML::Mark SpecParser::where(const std::string &sectionName, const std::string &key) {
  Section &s = section(sectionName);
  Field &f = field(sectionName, key);
  if (f.present)
    return f.valueMark;
  return s.present ? s.keyMark : rootMark_;
}

// A value for messages: "512", or "64, the default" when the file did not set it.
std::string SpecParser::shown(const std::string &sectionName, const std::string &key) {
  Field &f = field(sectionName, key);
  std::string v = f.i ? std::to_string(*f.i) : f.b ? (*f.b ? "true" : "false") : "?";
  return f.present ? v : v + ", the default";
}

// yaml-cpp's messages are terse; add the likely cause for the common ones.
std::string SpecParser::syntaxHint(const YAML::Exception &e) const {
  if (e.mark.line >= 0 && static_cast<size_t>(e.mark.line) < lines_.size()) {
    const std::string &line = lines_[e.mark.line];
    std::string indent = line.substr(0, line.find_first_not_of(" \t"));
    if (indent.find('\t') != std::string::npos)
      return "; YAML does not allow tabs for indentation";
  }
  if (e.msg == "illegal map value" || e.msg == "end of map not found")
    return "; check the indentation of this line";
  return "";
}

const char *const kNotAMap = "a spec must be a map with the keys 'name', 'model' and optionally "
                             "'training', 'decoding', 'compile'; got ";

// Records where the first node of a document starts. An empty document only produces OnNull.
class FirstNodeFinder : public YAML::EventHandler {
public:
  bool found = false;
  YAML::Mark mark;

  void OnDocumentStart(const YAML::Mark &) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark &, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark &m, YAML::anchor_t) override { note(m); }
  void OnScalar(const YAML::Mark &m, const std::string &, YAML::anchor_t,
                const std::string &) override {
    note(m);
  }
  void OnSequenceStart(const YAML::Mark &m, const std::string &, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    note(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark &m, const std::string &, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    note(m);
  }
  void OnMapEnd() override {}

private:
  void note(const YAML::Mark &m) {
    if (!found) {
      found = true;
      mark = m;
    }
  }
};

// Where a second, non-empty YAML document starts, if there is one. (Not YAML::LoadAll: in
// yaml-cpp 0.7 it never returns on input such as a stray ',' at the top level.)
bool SpecParser::findSecondDocument(YAML::Mark &mark) const {
  std::istringstream in(text_);
  YAML::Parser parser(in);
  for (int doc = 0; doc < 64; ++doc) { // bounded for the same reason
    FirstNodeFinder finder;
    if (!parser.HandleNextDocument(finder))
      return false;
    if (doc > 0 && finder.found) {
      mark = finder.mark;
      return true;
    }
  }
  return false;
}

bool SpecParser::findUnclosedQuote(YAML::Mark &mark) const {
  for (size_t i = 0; i < lines_.size(); ++i) {
    const std::string &line = lines_[i];
    char before = '\n'; // the last non-blank character before the position, '\n' at the start
    for (size_t p = 0; p < line.size(); ++p) {
      const char c = line[p];
      if (c == '#' && (p == 0 || line[p - 1] == ' ' || line[p - 1] == '\t'))
        break; // a comment
      // An anchor (&name) or a tag (!tag) before a value: the value may still open a quote.
      if ((c == '&' || c == '!') && std::string("\n:-[{,?").find(before) != std::string::npos) {
        while (p + 1 < line.size() && std::string(" \t,[]{}").find(line[p + 1]) == std::string::npos)
          ++p;
        continue;
      }
      if ((c == '"' || c == '\'') && std::string("\n:-[{,?").find(before) != std::string::npos) {
        size_t q = p + 1;
        for (; q < line.size(); ++q) {
          if (c == '"' && line[q] == '\\') {
            ++q; // an escape: skip the escaped character
          } else if (line[q] == c) {
            if (c == '\'' && q + 1 < line.size() && line[q + 1] == '\'') {
              ++q; // '' inside single quotes
            } else {
              break;
            }
          }
        }
        if (q >= line.size()) {
          mark.line = static_cast<int>(i);
          mark.column = static_cast<int>(p);
          return true;
        }
        p = q; // past the closing quote
        before = c;
        continue;
      }
      if (c != ' ' && c != '\t')
        before = c;
    }
  }
  return false;
}

void SpecParser::run() {
  YAML::Node root;
  YAML::Mark secondDoc;
  bool hasSecondDoc = false;
  // Before yaml-cpp, whose error (if any) would point where the open quote's string happens to end.
  // A NUL byte: yaml-cpp reported "unknown escape character" on the line after it.
  for (size_t i = 0; i < lines_.size(); ++i)
    if (size_t col = lines_[i].find('\0'); col != std::string::npos) {
      YAML::Mark at;
      at.line = static_cast<int>(i);
      at.column = static_cast<int>(col);
      error(at, "a NUL byte: a spec is YAML text (is this a binary file?)");
      return;
    }
  YAML::Mark openQuote;
  if (findUnclosedQuote(openQuote)) {
    error(openQuote, "invalid YAML: this quoted value does not end on its line (a missing closing quote?); "
                     "a spec's values fit on one line");
    return;
  }
  try {
    root = YAML::Load(text_); // the first document
    hasSecondDoc = findSecondDocument(secondDoc);
  } catch (const YAML::DeepRecursion &e) {
    // yaml-cpp's own message for it is "bad file".
    error(e.mark, "invalid YAML: collections nested too deeply (the parser stops at depth " +
                      std::to_string(e.depth()) + "); a spec's maps nest two levels");
    return;
  } catch (const YAML::Exception &e) {
    error(e.mark, "invalid YAML: " + e.msg + syntaxHint(e));
    return;
  }
  if (root.IsNull()) {
    if (hasSecondDoc) {
      error(secondDoc, "a spec is a single YAML document, but the first one is empty and "
                       "another one starts here");
      return;
    }
    // Comments only, or something yaml-cpp silently skipped (such as a stray ',').
    for (size_t i = 0; i < lines_.size(); ++i) {
      const std::string &line = lines_[i];
      size_t col = line.find_first_not_of(" \t");
      if (col == std::string::npos || line[col] == '#' || line.compare(col, 3, "---") == 0 ||
          line.compare(col, 3, "...") == 0)
        continue;
      YAML::Mark at;
      at.line = static_cast<int>(i);
      at.column = static_cast<int>(col);
      if (std::string(",]}").find(line[col]) != std::string::npos)
        error(at, std::string("invalid YAML: unexpected '") + line[col] + "'");
      else // e.g. "~" or "null"
        error(at, kNotAMap + std::string("no value"));
      return;
    }
    error(YAML::Mark::null_mark(),
          "spec is empty; expected a map with at least the keys 'name' and 'model'");
    return;
  }
  if (hasSecondDoc)
    error(secondDoc, "a spec is a single YAML document; found another one starting here");
  try {
    if (!parseRoot(root))
      return;
  } catch (const YAML::Exception &e) {
    error(e.mark, "invalid YAML: " + e.msg);
    return;
  }
  crossChecks();
}

bool SpecParser::parseRoot(const YAML::Node &root) {
  rootMark_ = root.Mark();
  if (!root.IsMap()) {
    error(root.Mark(), kNotAMap + describe(root));
    return false;
  }
  std::map<std::string, YAML::Mark> seen;
  std::vector<std::string> guessed; // known keys that misspelled keys were taken for
  for (auto it = root.begin(); it != root.end(); ++it) {
    // Copies: the iterator hands out a temporary pair of node handles.
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    if (!key.IsScalar()) {
      error(key.Mark(), "a key must be a plain name, got " + describe(key));
      continue;
    }
    const std::string &name = key.Scalar();
    auto [prev, inserted] = seen.emplace(name, key.Mark());
    if (!inserted) {
      error(key.Mark(), "duplicate top-level key " + quote(name) + " (first set on line " +
                            std::to_string(prev->second.line + 1) + ")");
      continue;
    }
    if (name == "name") {
      parseName(key, value);
      continue;
    }
    Section *section = nullptr;
    for (Section &s : sections_)
      if (s.name == name)
        section = &s;
    if (section)
      parseSection(*section, key, value);
    else
      guessed.push_back(unknownKey(nullptr, key));
  }

  auto wasGuessed = [&](const std::string &name) {
    return std::find(guessed.begin(), guessed.end(), name) != guessed.end();
  };
  if (!namePresent_ && !wasGuessed("name"))
    error(rootMark_, "missing required key 'name'");
  for (Section &s : sections_) {
    if (s.present || !s.required)
      continue;
    if (!wasGuessed(s.name))
      error(rootMark_, "missing required key " + quote(s.name));
    for (Field &f : s.fields)
      f.valid = false; // nothing to check against
  }
  return true;
}

void SpecParser::parseName(const YAML::Node &key, const YAML::Node &value) {
  namePresent_ = true;
  spec_.keyLocs["name"] = loc(key.Mark());
  if (!value.IsScalar()) {
    error(value.IsNull() ? key.Mark() : value.Mark(),
          "key 'name' must be a string, got " + describe(value));
    return;
  }
  const std::string &name = value.Scalar();
  if (name.empty()) {
    error(value.Mark(), "'name' must not be empty");
    return;
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      error(value.Mark(),
            "'name' may only contain letters, digits, '_', '-' and '.', got " + quote(name));
      return;
    }
  }
  spec_.name = name;
}

void SpecParser::parseSection(Section &section, const YAML::Node &key, const YAML::Node &value) {
  section.present = true;
  section.keyMark = key.Mark();
  spec_.keyLocs[section.name] = loc(key.Mark());
  if (section.name == "model")
    spec_.model.loc = loc(key.Mark());

  if (!value.IsNull() && !value.IsMap()) {
    error(value.Mark(), quote(section.name) + " must be a map of keys, got " + describe(value));
    for (Field &f : section.fields)
      f.valid = false;
    return;
  }
  std::map<std::string, YAML::Mark> seen;
  std::vector<std::string> guessed; // known keys that misspelled keys were taken for
  if (value.IsMap()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      const YAML::Node k = it->first; // a copy: the iterator hands out temporaries
      if (!k.IsScalar()) {
        error(k.Mark(), "a key must be a plain name, got " + describe(k));
        continue;
      }
      auto [prev, inserted] = seen.emplace(k.Scalar(), k.Mark());
      if (!inserted) {
        error(k.Mark(), "duplicate key " + quote(k.Scalar()) + " in " + quote(section.name) +
                            " (first set on line " + std::to_string(prev->second.line + 1) + ")");
        continue;
      }
      if (Field *f = section.find(k.Scalar()))
        parseField(section, *f, k, it->second);
      else
        guessed.push_back(unknownKey(&section, k));
    }
  }
  // One diagnostic for all missing keys of a section. A misspelling already answered with
  // "did you mean 'd_model'?" covers its missing 'd_model'.
  std::vector<std::string> missing;
  for (Field &f : section.fields)
    if (f.required && !f.present &&
        std::find(guessed.begin(), guessed.end(), f.name) == guessed.end())
      missing.push_back(f.name);
  if (missing.size() == 1)
    error(key.Mark(), "missing required key " + quote(missing[0]) + " in " + quote(section.name));
  else if (!missing.empty())
    error(key.Mark(),
          "missing required keys " + alternatives(missing, "and") + " in " + quote(section.name));
}

void SpecParser::parseField(Section &section, Field &f, const YAML::Node &key,
                            const YAML::Node &value) {
  f.present = true;
  f.valid = false;
  f.keyMark = key.Mark();
  // An empty value has no position of its own (yaml-cpp gives it the next token's): use the key.
  f.valueMark = value.IsNull() ? key.Mark() : value.Mark();
  spec_.keyLocs[section.name + "." + f.name] = loc(key.Mark());

  auto typeError = [&](const std::string &expected) {
    error(f.valueMark,
          "key " + quote(f.name) + " must be " + expected + ", got " + describe(value));
  };
  bool scalar = value.IsScalar() && !isQuoted(value);
  const std::string text = value.IsScalar() ? value.Scalar() : "";

  switch (f.kind) {
  case Kind::Int: {
    int64_t v = 0;
    NumberParse r = scalar && tagFits(value, {"int"}) ? parseInt(text, v) : NumberParse::NotANumber;
    if (r == NumberParse::OutOfRange) {
      error(f.valueMark, quote(f.name) + " is too large, got " + cut(text));
      return;
    }
    if (r != NumberParse::Ok)
      return typeError("an integer");
    // 032: 32 here, 26 to YAML 1.1 readers (PyYAML), which take a leading zero for octal.
    const size_t sign = text[0] == '+' || text[0] == '-' ? 1 : 0;
    if (text.size() > sign + 1 && text[sign] == '0') {
      error(f.valueMark, quote(f.name) + " has a leading zero, got " + cut(text) +
                             " (YAML 1.1 tools read it as octal); write " + std::to_string(v));
      return;
    }
    *f.i = v;
    break;
  }
  case Kind::Float: {
    double v = 0;
    NumberParse r = scalar && tagFits(value, {"float", "int"}) ? parseFloat(text, v) : NumberParse::NotANumber;
    if (r == NumberParse::OutOfRange) {
      error(f.valueMark, quote(f.name) + " is too large, got " + cut(text));
      return;
    }
    if (r != NumberParse::Ok)
      return typeError("a number");
    *f.d = v;
    break;
  }
  case Kind::Bool: {
    scalar = scalar && tagFits(value, {"bool"});
    if (scalar && (text == "true" || text == "True" || text == "TRUE"))
      *f.b = true;
    else if (scalar && (text == "false" || text == "False" || text == "FALSE"))
      *f.b = false;
    else
      return typeError("true or false");
    break;
  }
  case Kind::Enum: {
    // A name is a string: quoted ("post") or plain, not tagged as another type.
    const bool name = value.IsScalar() && (isQuoted(value) || tagFits(value, {"str"}));
    auto it = name ? std::find(f.enumNames.begin(), f.enumNames.end(), text) : f.enumNames.end();
    if (it == f.enumNames.end()) {
      std::string message = "key " + quote(f.name) + " must be " + alternatives(f.enumNames) +
                            ", got " + describe(value);
      std::string guess = value.IsScalar() ? closest(text, f.enumNames) : "";
      if (!text.empty() && guess == text)  // the right name under another type's tag
        message += "; drop the " + shortTag(value.Tag()) + " tag";
      else if (!guess.empty())
        message += "; did you mean " + quote(guess) + "?";
      error(f.valueMark, message);
      return;
    }
    f.setEnum(static_cast<size_t>(it - f.enumNames.begin()));
    break;
  }
  }
  checkRange(f, text);
}

void SpecParser::checkRange(Field &f, const std::string &text) {
  double v = f.i ? static_cast<double>(*f.i) : f.d ? *f.d : 0.0;
  const char *requirement = nullptr;
  switch (f.range) {
  case Range::Any:
    break;
  case Range::Positive:
    if (!(v > 0))
      requirement = "must be positive";
    break;
  case Range::NonNegative:
    if (!(v >= 0))
      requirement = "must be non-negative";
    break;
  case Range::Probability:
    if (!(v >= 0 && v < 1))
      requirement = "must be in [0, 1)";
    break;
  }
  std::string limit;
  if (!requirement && f.i && *f.i > f.max) {
    limit = "must be at most " + std::to_string(f.max);
    requirement = limit.c_str();
  }
  if (!requirement && f.d && *f.d > f.maxFloat) {
    limit = "must be at most " + tfmdata::shortNumber(f.maxFloat);
    requirement = limit.c_str();
  }
  if (requirement) {
    error(f.valueMark, quote(f.name) + " " + requirement + ", got " + cut(text));
    return;
  }
  f.valid = true;
}

// Reports an unknown key; returns the known key it was taken for, if any.
std::string SpecParser::unknownKey(const Section *section, const YAML::Node &key) {
  const std::string &name = key.Scalar();
  std::string message = section ? "unknown key " + quote(name) + " in " + quote(section->name)
                                : "unknown top-level key " + quote(name);

  // A known key in the wrong place is most likely an indentation mistake: say where it belongs.
  for (const Section &s : sections_) {
    if (&s == section)
      continue;
    for (const Field &f : s.fields) {
      if (f.name == name) {
        error(key.Mark(), message + "; it belongs in " + quote(s.name));
        return "";
      }
    }
  }
  std::vector<std::string> topLevel = {"name"};
  for (const Section &s : sections_)
    topLevel.push_back(s.name);
  if (section && std::find(topLevel.begin(), topLevel.end(), name) != topLevel.end()) {
    error(key.Mark(), message + "; " + quote(name) + " is a top-level key (check its indentation)");
    return "";
  }

  std::vector<std::string> candidates = section ? section->keys() : topLevel;
  std::string guess = closest(name, candidates);
  if (!guess.empty())
    message += "; did you mean " + quote(guess) + "?";
  else
    message += "; expected one of: " + joined(candidates);
  error(key.Mark(), message);
  return guess;
}

void SpecParser::crossChecks() {
  auto ok = [&](const char *s, const char *k) { return field(s, k).valid; };
  auto i64 = [&](const char *s, const char *k) { return *field(s, k).i; };
  auto num = [&](const char *s, const char *k) { return std::to_string(*field(s, k).i); };

  // Attention heads split d_model evenly.
  if (ok("model", "heads") && ok("model", "d_model") &&
      i64("model", "d_model") % i64("model", "heads") != 0)
    error(where("model", "heads"), "'heads' (" + num("model", "heads") +
                                       ") must divide 'd_model' (" + num("model", "d_model") + ")");

  // The sinusoidal table pairs sin/cos over dimension 2i, 2i+1.
  if (ok("model", "d_model") && ok("model", "positions") &&
      spec_.model.positions == PositionKind::Sinusoidal && i64("model", "d_model") % 2 != 0)
    error(where("model", "d_model"),
          "'d_model' must be even with 'positions: sinusoidal', got " + num("model", "d_model"));

  // Weights must fit a machine: 2^36 f32 parameters (256 GiB) is far past any model this tool
  // runs. Counted in doubles (no overflow); the error names the key of the largest term.
  if (ok("model", "d_model") && ok("model", "d_ff") && ok("model", "encoder_layers") &&
      ok("model", "decoder_layers") && ok("model", "src_vocab_size") && ok("model", "tgt_vocab_size")) {
    const double d = double(spec_.model.d_model), ff = double(spec_.model.d_ff);
    const double layers = double(spec_.model.encoder_layers + spec_.model.decoder_layers);
    const double vocab = double(spec_.model.src_vocab_size + spec_.model.tgt_vocab_size) * d;
    const double attention = layers * 4 * d * d + double(spec_.model.decoder_layers) * 4 * d * d;
    const double ffn = layers * 2 * d * ff;
    const double total = vocab + attention + ffn;
    if (total > double(int64_t(1) << 36)) {
      const char *key = vocab >= attention && vocab >= ffn ? "src_vocab_size"
                        : ffn >= attention                 ? "d_ff"
                                                           : "d_model";
      char buf[160];
      std::snprintf(buf, sizeof buf, "the model would have %.3g parameters (%.0f GiB of f32 weights), past the limit of 2^36; ",
                    total, total * 4 / double(1 << 30));
      error(where("model", key), std::string(buf) + "'" + key + "' contributes the most");
    }
  }

  if (ok("model", "layer_norm_eps") && spec_.model.layer_norm_eps < 1e-30)
    error(where("model", "layer_norm_eps"),
          "'layer_norm_eps' must be at least 1e-30 (LayerNorm runs in f32, where a smaller value is 0), got " +
              tfmdata::shortNumber(spec_.model.layer_norm_eps));
  if (ok("training", "adam_eps") && spec_.training.adam_eps < 1e-30)
    error(where("training", "adam_eps"),
          "'adam_eps' must be at least 1e-30 (Adam runs in f32, where a smaller value is 0), got " +
              tfmdata::shortNumber(spec_.training.adam_eps));

  // training.lr, the peak rate (fairseq's --lr), is the schedule's lr_scale said another way.
  if (field("training", "lr").present && ok("training", "lr")) {
    if (field("training", "lr_scale").present)
      error(where("training", "lr"), "give either 'lr' (the peak learning rate) or 'lr_scale', not both");
    else if (ok("model", "d_model") && ok("training", "warmup_steps"))
      spec_.training.lr_scale =
          tfmrt::lrScaleForPeak(spec_.training.lr, spec_.model.d_model, spec_.training.warmup_steps);
  }

  // The sinusoidal table (max_len x d_model floats) is a constant of the artifact and learned
  // positions are a parameter of that size: 2^28 floats (1 GiB) is far past any useful length.
  // Training prepends BOS to the target and appends </s>, translation needs room for a token
  // besides them: max_len 1 compiled and trained, and translate refused it ("maxLen must be >= 2").
  if (ok("model", "max_len") && i64("model", "max_len") < 2)
    error(where("model", "max_len"), "'max_len' must be >= 2 (a sequence holds BOS or </s> besides its tokens)");
  if (ok("model", "max_len") && ok("model", "d_model")) {
    const double table = double(spec_.model.max_len) * double(spec_.model.d_model);
    if (table > double(int64_t(1) << 28)) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "the position table would have max_len x d_model = %.3g values (%.1f GiB of f32), past the limit "
                    "of 2^28; lower 'max_len'",
                    table, table * 4 / double(1 << 30));
      error(where("model", "max_len"), buf);
    }
  }

  // One shared embedding table needs one vocabulary. (tie_output_projection only involves the
  // target side, so it has no such constraint.)
  if (ok("model", "tie_src_tgt_embeddings") && spec_.model.tie_src_tgt_embeddings &&
      ok("model", "src_vocab_size") && ok("model", "tgt_vocab_size") &&
      spec_.model.src_vocab_size != spec_.model.tgt_vocab_size) {
    bool explicitTie = field("model", "tie_src_tgt_embeddings").present;
    std::string message = "tie_src_tgt_embeddings requires src_vocab_size (" +
                          num("model", "src_vocab_size") + ") == tgt_vocab_size (" +
                          num("model", "tgt_vocab_size") + ")";
    message += explicitTie ? "; set it to false to use separate tables"
                           : "; it is true by default, set it to false to use separate tables";
    error(explicitTie ? where("model", "tie_src_tgt_embeddings") : where("model", "tgt_vocab_size"),
          message);
  }

  // Compile-time shapes must fit the position table.
  for (const char *len : {"src_len", "tgt_len"}) {
    if (!ok("compile", len) || !ok("model", "max_len") ||
        i64("compile", len) <= i64("model", "max_len"))
      continue;
    YAML::Mark at =
        field("compile", len).present ? where("compile", len) : where("model", "max_len");
    error(at, quote(len) + " (" + shown("compile", len) + ") must not exceed 'max_len' (" +
                  shown("model", "max_len") + ")");
  }

  // Special token ids are valid in both vocabularies ...
  const char *ids[] = {"pad_id", "bos_id", "eos_id"};
  if (ok("model", "src_vocab_size") && ok("model", "tgt_vocab_size")) {
    const char *vocab = spec_.model.src_vocab_size <= spec_.model.tgt_vocab_size ? "src_vocab_size"
                                                                                 : "tgt_vocab_size";
    for (const char *id : ids) {
      if (!ok("model", id) || i64("model", id) < i64("model", vocab))
        continue;
      YAML::Mark at = field("model", id).present ? where("model", id) : where("model", vocab);
      error(at, quote(id) + " (" + shown("model", id) + ") must be less than " + quote(vocab) +
                    " (" + num("model", vocab) + ")");
      field("model", id).valid = false;
    }
  }
  // ... and distinct.
  for (int a = 0; a < 3; ++a) {
    for (int b = a + 1; b < 3; ++b) {
      if (!ok("model", ids[a]) || !ok("model", ids[b]) ||
          i64("model", ids[a]) != i64("model", ids[b]))
        continue;
      const char *later = field("model", ids[b]).present ? ids[b] : ids[a];
      const char *other = later == ids[b] ? ids[a] : ids[b];
      error(where("model", later), quote(later) + " (" + shown("model", later) +
                                       ") must differ from " + quote(other) + " (" +
                                       shown("model", other) + ")");
    }
  }
}

} // namespace

bool parseModelSpecText(const std::string &text, const std::string &path, ModelSpec &spec,
                        std::vector<SpecDiagnostic> &diags) {
  spec = ModelSpec();
  spec.path = path;
  size_t first = diags.size();
  // YAML takes a lone CR as a line break (old Mac files); yaml-cpp does not, and read such a spec
  // as one comment line ("spec is empty"). Same length, so every location stays.
  std::string lines = text;
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i] == '\r' && (i + 1 == lines.size() || lines[i + 1] != '\n'))
      lines[i] = '\n';
  SpecParser(lines, path, spec, diags).run();

  // Report in file order (file-level errors first), each distinct error once.
  auto begin = diags.begin() + static_cast<std::ptrdiff_t>(first);
  std::stable_sort(begin, diags.end(), [](const SpecDiagnostic &a, const SpecDiagnostic &b) {
    return std::make_pair(a.line, a.col) < std::make_pair(b.line, b.col);
  });
  diags.erase(std::unique(begin, diags.end(),
                          [](const SpecDiagnostic &a, const SpecDiagnostic &b) {
                            return a.line == b.line && a.col == b.col && a.message == b.message;
                          }),
              diags.end());
  return diags.size() == first;
}

bool parseModelSpecFile(const std::string &path, ModelSpec &spec,
                        std::vector<SpecDiagnostic> &diags) {
  auto refuse = [&](const std::string &why) {
    spec = ModelSpec();
    spec.path = path;
    SpecDiagnostic d;
    d.file = path;
    d.message = why;
    diags.push_back(std::move(d));
    return false;
  };
  auto cannotRead = [&](const std::string &why) { return refuse("cannot read spec file: " + why); };
  // A spec is a small text file: /dev/zero would otherwise be read until memory ran out. Pipes
  // (<(...), /dev/stdin from a pipe) are read, up to the same cap.
  constexpr long long kMaxSpecBytes = 1 << 20;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISFIFO(st.st_mode))
      return cannotRead("not a regular file or pipe");
    if (S_ISREG(st.st_mode) && st.st_size > kMaxSpecBytes)
      return cannotRead(std::to_string(st.st_size) + " bytes, larger than a model spec can be (1 MiB)");
  }
  errno = 0;
  std::FILE *file = std::fopen(path.c_str(), "rb");
  if (!file)
    return cannotRead(std::strerror(errno ? errno : ENOENT));
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0 && text.size() <= size_t(kMaxSpecBytes))
    text.append(buffer, n);
  int err = std::ferror(file) ? (errno ? errno : EIO) : 0; // e.g. EISDIR for a directory
  std::fclose(file);
  if (err)
    return cannotRead(std::strerror(err));
  if (text.size() > size_t(kMaxSpecBytes))
    return cannotRead("larger than a model spec can be (1 MiB)");
  if (text.compare(0, 4, "TFMX") == 0)
    return refuse("this is a compiled artifact (.tfmx), not a model spec (.yaml)");
  return parseModelSpecText(text, path, spec, diags);
}

} // namespace tfmc
