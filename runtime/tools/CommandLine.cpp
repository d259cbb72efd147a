// Command-line parsing shared by tfmc and emitted executables.
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "Commands.h"

namespace tfmc {

bool CommandLine::has(const std::string &name) const {
  for (auto &f : flags)
    if (f.first == name) return true;
  return false;
}

std::string CommandLine::get(const std::string &name, const std::string &fallback) const {
  for (auto &f : flags)
    if (f.first == name) return f.second;
  return fallback;
}

long long CommandLine::getInt(const std::string &name, long long fallback) const {
  if (!has(name)) return fallback;
  std::string v = get(name);
  char *end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') {
    std::cerr << "tfmc: error: --" << name << " expects an integer, got '" << v << "'\n";
    std::exit(2);
  }
  return x;
}

double CommandLine::getDouble(const std::string &name, double fallback) const {
  if (!has(name)) return fallback;
  std::string v = get(name);
  char *end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x)) {
    std::cerr << "tfmc: error: --" << name << " expects a number, got '" << v << "'\n";
    std::exit(2);
  }
  return x;
}

std::vector<std::string> CommandLine::unknown(const std::vector<std::string> &known) const {
  std::vector<std::string> out;
  for (auto &f : flags) {
    bool ok = false;
    for (auto &k : known) ok |= (k == f.first);
    if (!ok) out.push_back(f.first);
  }
  return out;
}

bool isSwitch(const std::string &name) {
  return name == "quiet" || name == "help" || name == "profile" || name == "fusion-report" ||
         name == "print-ir-after-all" || name == "no-cache" || name == "sample";
}

bool parseCommandLine(const char *tool, int argc, char **argv, int first, CommandLine &cl) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-o") {
      if (i + 1 >= argc) {
        std::cerr << tool << ": error: -o needs a file name\n";
        return false;
      }
      cl.flags.push_back({"o", argv[++i]});
    } else if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      std::string body = arg.substr(2);
      size_t eq = body.find('=');
      if (eq != std::string::npos) {
        cl.flags.push_back({body.substr(0, eq), body.substr(eq + 1)});
      } else if (isSwitch(body) || i + 1 >= argc) {
        cl.flags.push_back({body, ""});
      } else {
        cl.flags.push_back({body, argv[++i]});
      }
    } else {
      cl.positionals.push_back(arg);
    }
  }
  return true;
}

}  // namespace tfmc
