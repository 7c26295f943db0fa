#include "config_args.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "cli.hpp"

namespace flashjit::cli {
namespace {

bool is_json_path(const std::string& token) {
  return token.size() > 5 && token.compare(token.size() - 5, 5, ".json") == 0;
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorCode::io, fmt::format("cannot read config file {}", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error(ErrorCode::io, fmt::format("error reading config file {}", path));
  return text.str();
}

// Completes a parsed config (Runtime::resolve: the fields not given take the dispatcher's choice) and runs
// validate() on it; issues are printed, each with its field.
bool add_config(Result<PartialConfig> parsed, std::string origin, std::vector<NamedConfig>& out) {
  if (!parsed.ok()) {
    report(std::move(parsed).error().with(fmt::format("in config {}", origin)));
    return false;
  }
  const AnyKernelConfig config = Runtime::resolve(*parsed);
  auto issues = validate(config);
  if (!issues.empty()) {
    std::string text = fmt::format("flashjit: invalid config {}:\n", origin);
    for (const auto& issue : issues) text += fmt::format("  {}: {}\n", issue.field, issue.message);
    std::fputs(text.c_str(), stderr);
    return false;
  }
  out.push_back({std::move(origin), config});
  return true;
}

}  // namespace

ConfigArgs load_configs(const std::vector<std::string>& tokens, std::size_t max_configs) {
  ConfigArgs result;
  std::vector<std::string> pairs;
  std::vector<std::string> files;
  for (const auto& t : tokens) {
    if (t.find('=') != std::string::npos) {
      pairs.push_back(t);
    } else if (is_json_path(t)) {
      files.push_back(t);
    } else {
      result.exit_code = report_usage(
          fmt::format("CONFIG '{}' is neither a key=value pair (head_dim=64) nor a .json file", t));
      return result;
    }
  }
  const std::size_t count = files.size() + (pairs.empty() ? 0 : 1);
  if (count > max_configs) {
    result.exit_code = report_usage(fmt::format(
        "{} configs given ({} file(s){}), this command takes {}", count, files.size(),
        pairs.empty() ? "" : " and key=value pairs", max_configs));
    return result;
  }
  bool ok = true;
  if (!pairs.empty()) ok &= add_config(parse_config_pairs(pairs), fmt::format("{}", fmt::join(pairs, " ")), result.configs);
  for (const auto& f : files) {
    auto text = read_file(f);
    if (!text.ok()) {
      report(text.error());
      ok = false;
      continue;
    }
    ok &= add_config(parse_config_json(*text), f, result.configs);
  }
  if (!ok) result.exit_code = kUsage;
  return result;
}

}  // namespace flashjit::cli
