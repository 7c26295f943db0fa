// `flashjit info [--json]`: versions, NVRTC, the CUDA driver and its devices, the kernel cache, JIT mode,
// tuned tables.
#include <fmt/format.h>

#include "cli.hpp"
#include "compile/nvrtc.hpp"
#include "compile/nvrtc_library.hpp"
#include "cuda/driver.hpp"
#include "dispatch/tuned_table.hpp"
#include "flashjit/flashjit.h"

namespace flashjit::cli {
namespace {

using json = nlohmann::ordered_json;

std::string driver_version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// The driver line and one line per device; no driver or no GPU is reported, not a failure. (The JSON is
// built apart and stored at the end: an ordered_json's members move when another is added.)
void driver_info(Output& out) {
  json d = json::object();
  json devices = json::array();
  auto count = cuda::device_count();
  if (!count.ok() || *count == 0) {
    const std::string why = count.ok() ? "the driver reports no devices" : count.error().message;
    out.text("driver:    no CUDA driver/GPU: {}\n", why);
    out.data()["driver"] = {{"available", false}, {"error", why}};
    out.data()["devices"] = std::move(devices);
    return;
  }
  d = {{"available", true}, {"devices", *count}};
  bool first = true;
  for (int i = 0; i < *count; ++i) {
    auto dev = cuda::device_info(i);
    if (!dev.ok()) {
      out.text("device {}:  {}\n", i, dev.error().message);
      devices.push_back({{"ordinal", i}, {"error", dev.error().message}});
      continue;
    }
    if (first) {
      out.text("driver:    CUDA {} ({} device{})\n", driver_version_text(dev->driver_version), *count,
               *count == 1 ? "" : "s");
      d["version"] = driver_version_text(dev->driver_version);
    }
    first = false;
    out.text("device {}:  {}, {}, {} SMs, {} opt-in shared memory per block, {} memory\n", i, dev->name,
             dev->arch.to_string(), dev->sms, human_bytes(dev->max_smem_optin), human_bytes(dev->total_memory));
    devices.push_back({{"ordinal", i}, {"name", dev->name}, {"arch", dev->arch.to_string()}, {"sms", dev->sms},
                       {"max_smem_optin", dev->max_smem_optin}, {"total_memory", dev->total_memory}});
  }
  out.data()["driver"] = std::move(d);
  out.data()["devices"] = std::move(devices);
}

int run_info(const Globals& globals, bool as_json) {
  Output out(as_json);
  out.text("flashjit:  {} (C ABI {})\n", version(), FLASHJIT_ABI_VERSION);
  out.data()["flashjit"] = version();
  out.data()["abi_version"] = FLASHJIT_ABI_VERSION;
  auto nvrtc = compile::nvrtc();
  if (nvrtc.ok()) {
    const auto& api = **nvrtc;
    out.text("nvrtc:     {} ({}{})\n", compile::nvrtc_version(), api.path,
             api.builtins.empty() ? "" : fmt::format(", builtins {}", api.builtins));
    out.data()["nvrtc"] = {{"version", compile::nvrtc_version()}, {"path", api.path},
                           {"builtins", api.builtins.empty() ? json(nullptr) : json(api.builtins)}};
  } else {
    out.text("nvrtc:     not found: {}\n", nvrtc.error().message);
    out.data()["nvrtc"] = {{"version", nullptr}, {"error", nvrtc.error().to_string()}};
  }
  driver_info(out);
  out.text("jit:       {}\n", globals.settings.jit ? "enabled" : "disabled, precompiled kernels only (FLASHJIT_JIT=0)");
  out.data()["jit"] = globals.settings.jit;
  std::fflush(stdout);
  auto disk = open_cache(globals);
  if (!disk.ok()) {
    out.text("cache:     unusable\n");
    out.data()["cache"] = {{"error", disk.error().to_string()}};
    report(disk.error());
    return out.finish(kFailure);
  }
  auto entries = disk->list();
  out.text("cache:     {} ({})\n", disk->dir().string(), disk->writable() ? "writable" : "read-only");
  json cache = {{"dir", disk->dir().string()}, {"writable", disk->writable()}};
  if (entries.ok()) {
    out.text("entries:   {} kernel{}, {}\n", entries->size(), entries->size() == 1 ? "" : "s",
             human_bytes(disk->total_bytes()));
    cache["entries"] = entries->size();
    cache["bytes"] = disk->total_bytes();
  } else {
    out.text("entries:   cannot list: {}\n", entries.error().message);
    cache["error"] = entries.error().message;
  }
  out.data()["cache"] = std::move(cache);
  // The tuned tables a Runtime would load (with --verbose: why others are ignored).
  const auto tables = dispatch::TunedTables::load(
      dispatch::TunedTables::default_sources(globals.settings.tuned_tables, disk->dir()), globals.settings.logger);
  out.text("tuned:     {} table{}, {} entries (FLASHJIT_TUNED, then {})\n", tables.size(),
           tables.size() == 1 ? "" : "s", tables.entry_count(), (disk->dir() / "tuned").string());
  out.data()["tuned"] = {{"tables", tables.size()}, {"entries", tables.entry_count()},
                         {"folder", (disk->dir() / "tuned").string()}};
  return out.finish(kOk);
}

}  // namespace

Command add_info(CLI::App& parent, const Globals& globals) {
  CLI::App* app = parent.add_subcommand("info", "Versions, NVRTC, CUDA driver and devices, kernel cache, JIT mode, tuned tables");
  auto json = std::make_shared<bool>(false);
  add_json_flag(*app, *json);
  return {app, [&globals, json] { return run_info(globals, *json); }};
}

}  // namespace flashjit::cli
