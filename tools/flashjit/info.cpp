// `flashjit info`: versions, the CUDA driver and its devices, the kernel cache, JIT mode, tuned tables.
#include <fmt/format.h>

#include "cli.hpp"
#include "compile/nvrtc.hpp"
#include "cuda/driver.hpp"
#include "dispatch/tuned_table.hpp"

namespace flashjit::cli {
namespace {

std::string driver_version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// The driver line and one line per device; no driver or no GPU is reported, not a failure.
void print_driver() {
  auto count = cuda::device_count();
  if (!count.ok()) {
    fmt::print("driver:    no CUDA driver/GPU: {}\n", count.error().message);
    return;
  }
  if (*count == 0) {
    fmt::print("driver:    no CUDA driver/GPU: the driver reports no devices\n");
    return;
  }
  bool first = true;
  for (int i = 0; i < *count; ++i) {
    auto d = cuda::device_info(i);
    if (!d.ok()) {
      fmt::print("device {}:  {}\n", i, d.error().message);
      continue;
    }
    if (first) fmt::print("driver:    CUDA {} ({} device{})\n", driver_version_text(d->driver_version), *count,
                          *count == 1 ? "" : "s");
    first = false;
    fmt::print("device {}:  {}, {}, {} SMs, {} opt-in shared memory per block, {} memory\n", i, d->name,
               d->arch.to_string(), d->sms, human_bytes(d->max_smem_optin), human_bytes(d->total_memory));
  }
}

int run_info(const Globals& globals) {
  fmt::print("flashjit:  {}\n", version());
  fmt::print("nvrtc:     {}\n", compile::nvrtc_version());
  print_driver();
  fmt::print("jit:       {}\n", globals.settings.jit ? "enabled" : "disabled, precompiled kernels only (FLASHJIT_JIT=0)");
  std::fflush(stdout);
  auto disk = open_cache(globals);
  if (!disk.ok()) {
    fmt::print("cache:     unusable\n");
    std::fflush(stdout);
    return report(disk.error());
  }
  auto entries = disk->list();
  fmt::print("cache:     {} ({})\n", disk->dir().string(), disk->writable() ? "writable" : "read-only");
  if (entries.ok())
    fmt::print("entries:   {} kernel{}, {}\n", entries->size(), entries->size() == 1 ? "" : "s", human_bytes(disk->total_bytes()));
  else
    fmt::print("entries:   cannot list: {}\n", entries.error().message);
  // The tuned tables a Runtime would load (with --verbose: why others are ignored).
  const auto tables = dispatch::TunedTables::load(
      dispatch::TunedTables::default_sources(globals.settings.tuned_tables, disk->dir()), globals.settings.logger);
  fmt::print("tuned:     {} table{}, {} entries (FLASHJIT_TUNED, then {})\n", tables.size(),
             tables.size() == 1 ? "" : "s", tables.entry_count(), (disk->dir() / "tuned").string());
  return kOk;
}

}  // namespace

Command add_info(CLI::App& parent, const Globals& globals) {
  CLI::App* app = parent.add_subcommand("info", "Versions, CUDA driver and devices, kernel cache, JIT mode, tuned tables");
  return {app, [&globals] { return run_info(globals); }};
}

}  // namespace flashjit::cli
