// A tiny "--name value" flag parser shared by the examples, so that each program reads like the
// training script a user would write, not like argument plumbing.
#pragma once

#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

namespace examples {

class Flags {
 public:
  // Accepts "--name value" and "--name=value", and "--name" alone (last, or before another flag) as
  // a switch; "--help" prints the defaults the program asked for.
  Flags(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        help_ = true;
        continue;
      }
      if (arg.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument: " + arg);
      const size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        values_[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
      } else {
        if (i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0) switches_.insert(arg.substr(2));
        else values_[arg.substr(2)] = argv[++i];
      }
    }
  }

  long integer(const std::string& name, long fallback) { return std::stol(get(name, std::to_string(fallback))); }
  double real(const std::string& name, double fallback) { return std::stod(get(name, std::to_string(fallback))); }
  std::string text(const std::string& name, const std::string& fallback) { return get(name, fallback); }
  // A switch: true when given, as "--name" or "--name=true".
  bool boolean(const std::string& name) {
    known_[name] = "off";
    const auto it = values_.find(name);
    return switches_.count(name) || (it != values_.end() && (it->second == "true" || it->second == "1"));
  }

  // After all flags were read: rejects unknown ones; true when the user asked for --help.
  bool finish(const char* program) {
    for (const auto& [name, value] : values_)
      if (!known_.count(name)) throw std::invalid_argument("unknown flag --" + name);
    for (const std::string& name : switches_)
      if (!known_.count(name)) throw std::invalid_argument("unknown flag --" + name);
    if (help_) {
      std::printf("usage: %s [flags]\n", program);
      for (const auto& [name, fallback] : known_) std::printf("  --%-16s (default %s)\n", name.c_str(), fallback.c_str());
    }
    return help_;
  }

 private:
  std::string get(const std::string& name, const std::string& fallback) {
    known_[name] = fallback;
    if (switches_.count(name)) throw std::invalid_argument("flag --" + name + " needs a value");
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }

  std::map<std::string, std::string> values_, known_;
  std::set<std::string> switches_;
  bool help_ = false;
};

}  // namespace examples
