// `flashjit cache ls|stat|verify|clear`: the on-disk kernel cache (ls and stat also as --json).
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

int run_ls(cache::DiskCache& disk, bool json) {
  auto entries = disk.list();
  if (!entries.ok()) return report(entries.error());
  std::sort(entries->begin(), entries->end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  Output out(json);
  std::size_t width = 6;
  for (const auto& e : *entries) width = std::max(width, e.name.size());
  out.text("{:<16}  {:<{}}  {:>10}  {}\n", "KEY", "KERNEL", width, "SIZE", "LAST USED");
  auto list = nlohmann::ordered_json::array();
  for (const auto& e : *entries) {
    out.text("{}  {:<{}}  {:>10}  {}\n", e.key.substr(0, 16), e.name.empty() ? "?" : e.name, width,
             human_bytes(e.bytes), local_time(e.last_used));
    list.push_back({{"key", e.key}, {"name", e.name}, {"bytes", e.bytes}, {"last_used", local_time(e.last_used)}});
  }
  out.data()["dir"] = disk.dir().string();
  out.data()["entries"] = std::move(list);
  return out.finish(kOk);
}

int run_stat(cache::DiskCache& disk, bool json) {
  auto entries = disk.list();
  if (!entries.ok()) return report(entries.error());
  Output out(json);
  out.text("dir:      {}\n", disk.dir().string());
  out.text("entries:  {}\n", entries->size());
  out.text("size:     {} ({} bytes)\n", human_bytes(disk.total_bytes()), disk.total_bytes());
  out.text("cap:      {}\n", disk.max_bytes() ? fmt::format("{} (FLASHJIT_CACHE_MAX_MB)", human_bytes(disk.max_bytes()))
                                               : std::string("none (set FLASHJIT_CACHE_MAX_MB to cap it)"));
  out.text("writable: {}\n", disk.writable() ? "yes" : "no (read-only)");
  out.data() = {{"dir", disk.dir().string()}, {"entries", entries->size()}, {"bytes", disk.total_bytes()},
                {"max_bytes", disk.max_bytes()}, {"writable", disk.writable()}};
  return out.finish(kOk);
}

int run_verify(cache::DiskCache& disk, bool) {
  auto result = disk.verify();
  for (const auto& c : result.corrupt) fmt::print("corrupt: {}\n", c);
  std::string removed;
  if (!result.corrupt.empty())
    removed = !disk.writable() ? " (read-only cache: left in place)"
              : result.removed == static_cast<int>(result.corrupt.size()) ? " (removed)"
                                                                          : fmt::format(" ({} removed)", result.removed);
  fmt::print("{} entries ok, {} corrupt{}\n", result.ok, result.corrupt.size(), removed);
  return result.corrupt.empty() ? kOk : kFailure;
}

int run_clear(cache::DiskCache& disk, bool) {
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
  using Action = int (*)(cache::DiskCache&, bool);
  auto json = std::make_shared<bool>(false);
  const std::pair<CLI::App*, Action> actions[] = {
      {app->add_subcommand("ls", "A header, then one line per entry: key, kernel, size, last used"), run_ls},
      {app->add_subcommand("stat", "Folder, entries, total size, cap, writable"), run_stat},
      {app->add_subcommand("verify", "Check every entry; corrupt ones are printed (and removed); exit 1 if any"),
       run_verify},
      {app->add_subcommand("clear", "Remove every entry"), run_clear},
  };
  add_json_flag(*actions[0].first, *json);
  add_json_flag(*actions[1].first, *json);
  std::vector<std::pair<CLI::App*, Action>> list(std::begin(actions), std::end(actions));
  return {app, [&globals, list, app, json] {
            if (app->get_subcommands().empty()) {
              std::fputs(("flashjit: cache needs one of ls, stat, verify, clear\n" + app->help()).c_str(), stderr);
              return kUsage;
            }
            auto disk = open_cache(globals);
            if (!disk.ok()) return report(disk.error());
            for (const auto& [sub, action] : list)
              if (sub->parsed()) return action(*disk, *json);
            return kUsage;  // not reached: checked before opening the cache
          }};
}

}  // namespace flashjit::cli
