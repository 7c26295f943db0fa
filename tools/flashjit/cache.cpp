// `flashjit cache ls|stat|verify|clear`: the on-disk kernel cache.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli.hpp"

namespace flashjit::cli {
namespace {

std::string local_time(std::filesystem::file_time_type t) {
  const auto sys = std::chrono::file_clock::to_sys(t);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}", fmt::localtime(std::chrono::system_clock::to_time_t(
                                                 std::chrono::time_point_cast<std::chrono::system_clock::duration>(sys))));
}

int run_ls(cache::DiskCache& disk) {
  auto entries = disk.list();
  if (!entries.ok()) return report(entries.error());
  std::sort(entries->begin(), entries->end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::size_t width = 1;
  for (const auto& e : *entries) width = std::max(width, e.name.size());
  for (const auto& e : *entries)
    fmt::print("{}  {:<{}}  {:>10}  {}\n", e.key.substr(0, 16), e.name.empty() ? "?" : e.name, width,
               human_bytes(e.bytes), local_time(e.last_used));
  return kOk;
}

int run_stat(cache::DiskCache& disk) {
  auto entries = disk.list();
  if (!entries.ok()) return report(entries.error());
  fmt::print("dir:      {}\n", disk.dir().string());
  fmt::print("entries:  {}\n", entries->size());
  fmt::print("size:     {} ({} bytes)\n", human_bytes(disk.total_bytes()), disk.total_bytes());
  fmt::print("cap:      {}\n", disk.max_bytes() ? fmt::format("{} (FLASHJIT_CACHE_MAX_MB)", human_bytes(disk.max_bytes()))
                                                 : std::string("none (set FLASHJIT_CACHE_MAX_MB to cap it)"));
  fmt::print("writable: {}\n", disk.writable() ? "yes" : "no (read-only)");
  return kOk;
}

int run_verify(cache::DiskCache& disk) {
  auto result = disk.verify();
  for (const auto& c : result.corrupt) fmt::print("corrupt: {}\n", c);
  fmt::print("{} entries ok, {} corrupt{}\n", result.ok, result.corrupt.size(),
             result.corrupt.empty() ? "" : (disk.writable() ? " (removed)" : " (read-only cache: left in place)"));
  return result.corrupt.empty() ? kOk : kFailure;
}

int run_clear(cache::DiskCache& disk) {
  auto entries = disk.list();
  if (!entries.ok()) return report(entries.error());
  if (auto st = disk.clear(); !st.ok()) return report(st.error());
  fmt::print("removed {} entries from {}\n", entries->size(), disk.dir().string());
  return kOk;
}

}  // namespace

Command add_cache(CLI::App& parent, const Globals& globals) {
  CLI::App* app = parent.add_subcommand("cache", "Inspect or clear the kernel cache");
  app->require_subcommand(0, 1);
  using Action = int (*)(cache::DiskCache&);
  const std::pair<CLI::App*, Action> actions[] = {
      {app->add_subcommand("ls", "One line per entry: key, kernel, size, last used"), run_ls},
      {app->add_subcommand("stat", "Folder, entries, total size, cap, writable"), run_stat},
      {app->add_subcommand("verify", "Check every entry; corrupt ones are printed (and removed); exit 1 if any"),
       run_verify},
      {app->add_subcommand("clear", "Remove every entry"), run_clear},
  };
  std::vector<std::pair<CLI::App*, Action>> list(std::begin(actions), std::end(actions));
  return {app, [&globals, list, app] {
            if (app->get_subcommands().empty()) {
              std::fputs(("flashjit: cache needs one of ls, stat, verify, clear\n" + app->help()).c_str(), stderr);
              return kUsage;
            }
            auto disk = open_cache(globals);
            if (!disk.ok()) return report(disk.error());
            for (const auto& [sub, action] : list)
              if (sub->parsed()) return action(*disk);
            return kUsage;  // not reached: checked before opening the cache
          }};
}

}  // namespace flashjit::cli
