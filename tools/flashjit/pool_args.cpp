#include "pool_args.hpp"

#include "cli.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "compile/subprocess.hpp"

namespace flashjit::cli {

void add_pool_options(CLI::App& app, PoolArgs& args) {
  app.add_option("-j,--jobs", args.jobs, "Compile workers alive at once (default: the number of cores)")
      ->check(positive());
  app.add_option("--timeout", args.timeout_s, "Seconds a kernel may compile before its worker is killed")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            try {
              std::size_t used = 0;
              if (std::stod(value, &used) > 0 && used == value.size()) return {};
            } catch (const std::exception&) {
            }
            return fmt::format("'{}' is not a positive number of seconds", value);
          },
          "SECONDS"));
}

Result<tune::PoolOptions> pool_options(const PoolArgs& args, const std::filesystem::path& cache_dir) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Error(ErrorCode::io, fmt::format("cannot find this executable (/proc/self/exe): {}", ec.message()));
  tune::PoolOptions o;
  o.worker = {self.string(), "--cache-dir", cache_dir.string()};
  o.jobs = args.jobs > 0 ? args.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.timeout = compile::timeout_of(args.timeout_s);
  return o;
}

}  // namespace flashjit::cli
