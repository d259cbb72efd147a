// The runtime verbs of the `tfmc` CLI (run, train, tokenizer, translate, inspect), MLIR-free: both
// tfmc and the executables `tfmc compile --emit=executable` writes link them (libtfmtools). Each
// returns the process exit code.
#pragma once

#include <streambuf>
#include <string>
#include <vector>

namespace tfmc {

// While alive, std::cerr writes each line with one write(2) once it ends (and a last unfinished
// line at destruction). mpirun's ranks share one stderr, and a message written piece by piece
// (std::cerr is unbuffered) interleaved with another rank's in mid-line. Lines written with
// stdio (fputs, fprintf) are not affected.
class LineAtomicStderr {
public:
  LineAtomicStderr();
  ~LineAtomicStderr();
  LineAtomicStderr(const LineAtomicStderr &) = delete;
  LineAtomicStderr &operator=(const LineAtomicStderr &) = delete;

private:
  std::streambuf *buffer_;
  std::streambuf *previous_;
};

// Flags are `--name=value` or `--name value`; positionals are everything else.
struct CommandLine {
  std::vector<std::string> positionals;
  std::vector<std::pair<std::string, std::string>> flags;
  bool has(const std::string &name) const;
  std::string get(const std::string &name, const std::string &fallback = "") const;  // the first value
  std::vector<std::string> getAll(const std::string &name) const;  // every value of a repeated option, in order
  long long getInt(const std::string &name, long long fallback) const;
  double getDouble(const std::string &name, double fallback) const;
  // Names of flags not in `known`, for "unknown option" errors.
  std::vector<std::string> unknown(const std::vector<std::string> &known) const;
};

constexpr const char *kVersion = "0.4 (artifact format 2)";

bool isCommand(const std::string &command);
// Parses argv[first..] with `command`'s declared options (CommandLine.cpp): `-o x`, `--name=value`,
// `--name value`, positionals. Unknown options and malformed numbers are errors. False when the
// command must not run: after --help / --version (exitCode 0) or an error (printed, exitCode 2).
// The exit status once a command returned `code`: standard output is flushed, and a write that
// failed (a full disk, /dev/full, a closed pipe) turns success into 1 with a message, since the
// output the user asked for is lost.
int finishStandardOutput(const std::string &tool, int code);
bool parseCommandLine(const std::string &tool, const std::string &command, int argc, char **argv, int first,
                      CommandLine &cl, int &exitCode);

// What a command's messages start with: "tfmc <cmd>", and for translate in a compiled translation
// program (tfm-embedded) that program's name, set by setTranslateProgramName (it said "tfmc
// translate" and showed tfmc's usage).
std::string commandName(const char *cmd);
void setTranslateProgramName(const std::string &name);
bool translateProgramNamed();  // set: a compiled translation program

int runCommand(const CommandLine &cl);
int trainCommand(const CommandLine &cl);
int tokenizerCommand(const CommandLine &cl);
int translateCommand(const CommandLine &cl);
int inspectCommand(const CommandLine &cl);
int averageCommand(const CommandLine &cl);

}  // namespace tfmc
