#include "cache/artifact_store.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "cache/files.hpp"
#include "codegen/embedded_templates.hpp"
#include "codegen/generate.hpp"
#include "common/log.hpp"
#include "compile/key.hpp"
#include "compile/nvrtc.hpp"

namespace flashjit::cache {
namespace {

nlohmann::json ptxas_json(const PtxasStats& s) {
  return {{"registers", s.registers}, {"spill_stores", s.spill_stores}, {"spill_loads", s.spill_loads},
          {"stack_frame", s.stack_frame}, {"static_smem", s.static_smem},
          {"setmaxnreg_ignored", s.setmaxnreg_ignored}};
}

PtxasStats ptxas_from_json(const nlohmann::json& j) {
  PtxasStats s;
  s.registers = j.value("registers", -1);
  s.spill_stores = j.value("spill_stores", 0);
  s.spill_loads = j.value("spill_loads", 0);
  s.stack_frame = j.value("stack_frame", 0);
  s.static_smem = j.value("static_smem", 0);
  s.setmaxnreg_ignored = j.value("setmaxnreg_ignored", false);
  return s;
}

}  // namespace

Result<std::shared_ptr<const Artifact>> ArtifactStore::get(const AnyKernelConfig& config) {
  FLASHJIT_TRY(check(config));
  const auto options = compile::options_for(config.arch());
  auto source = codegen::generate(config);
  if (!source.ok()) return std::move(source).error();
  const std::string key = compile::kernel_key(to_json(config), source->text, options);
  std::shared_future<Result<std::shared_ptr<const Artifact>>> future;
  bool builder = false;
  std::promise<Result<std::shared_ptr<const Artifact>>> promise;
  {
    std::lock_guard lock(mutex_);
    auto it = builds_.find(key);
    if (it == builds_.end()) {
      future = promise.get_future().share();
      builds_.emplace(key, future);
      builder = true;
    } else {
      future = it->second;
    }
  }
  if (builder) {
    // Whatever happens in build() (an exception included), the promise is kept and the key leaves the table on
    // failure, so that waiting callers get the error and a later call retries.
    Result<std::shared_ptr<const Artifact>> result = Error(ErrorCode::internal, "not built");
    try {
      result = build(config, *source, key, options);
    } catch (const std::exception& e) {
      result = Error(ErrorCode::internal, fmt::format("building kernel {} failed: {}", source->name, e.what()));
    } catch (...) {
      result = Error(ErrorCode::internal, fmt::format("building kernel {} failed: unknown exception", source->name));
    }
    promise.set_value(result);
    if (!result.ok()) {  // let a later call retry (the cache folder may have been fixed meanwhile)
      std::lock_guard lock(mutex_);
      builds_.erase(key);
    }
    return result;
  }
  return future.get();
}

Result<std::shared_ptr<const Artifact>> ArtifactStore::build(const AnyKernelConfig& config,
                                                             const codegen::GeneratedSource& source,
                                                             const std::string& key,
                                                             const std::vector<std::string>& options) {
  auto artifact = std::make_shared<Artifact>();
  artifact->entry = source.entry;
  KernelInfo& info = artifact->info;
  info.name = source.name;
  info.key = key;
  info.dynamic_smem = shared_memory_bytes(config);

  auto t0 = std::chrono::steady_clock::now();
  if (auto hit = disk_.load(key)) {
    artifact->cubin = std::move(hit->cubin);
    info.cache_hit = true;
    info.compile_ms = hit->meta.value("compile_ms", 0.0);
    info.log = hit->meta.value("log", std::string());
    if (hit->meta.contains("ptxas")) info.ptxas = ptxas_from_json(hit->meta["ptxas"]);
    logger_.debug("cache hit {} ({}) in {:.2f} ms", info.name, key.substr(0, 12),
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return std::shared_ptr<const Artifact>(artifact);
  }
  if (!jit_)
    return Error(ErrorCode::not_found,
                 fmt::format("kernel {} (key {}) is not in the cache {} and FLASHJIT_JIT=0 forbids compiling; "
                             "precompile it with `flashjit compile` or `flashjit precompile`",
                             info.name, key.substr(0, 16), disk_.dir().string()));

  logger_.info("compiling {} ...", info.name);
  auto compiled = compiler_ ? compiler_(source, options) : compile::compile(source, options, logger_);
  if (!compiled.ok()) {
    std::string path = save_failed_source(disk_, source.name, source.text);
    return std::move(compiled).error().with(fmt::format("generated source saved to {}", path));
  }
  artifact->cubin = std::move(compiled->cubin);
  info.compile_ms = compiled->compile_ms;
  info.ptxas = compiled->ptxas;
  info.log = compiled->log;
  logger_.info("compiled {} in {:.0f} ms ({} registers, {} bytes spilled)", info.name, info.compile_ms,
               info.ptxas.registers, info.ptxas.spill_stores);

  Entry entry;
  entry.key = key;
  entry.cubin = artifact->cubin;
  entry.source = source.text;
  entry.meta = {{"name", info.name},
                {"config", nlohmann::json::parse(to_json(config))},
                {"entry", source.entry},
                {"options", options},
                {"flashjit", FLASHJIT_VERSION},
                {"nvrtc", compile::nvrtc_version()},
                {"templates", codegen::templates_hash()},
                {"ptxas", ptxas_json(info.ptxas)},
                {"compile_ms", info.compile_ms},
                {"log", info.log},
                {"created", std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch()).count()}};
  if (auto st = disk_.store(entry); !st.ok())
    logger_.warn("could not store {} in the cache: {}", info.name, st.error().to_string());
  return std::shared_ptr<const Artifact>(artifact);
}

std::string save_failed_source(const DiskCache& disk, const std::string& name, const std::string& text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = disk.dir() / "failed";
  if (!disk.writable()) {
    // The temporary folder is shared: a folder of ours there (per user), else a fresh one. The file is written
    // through a temporary name and renamed, so a link someone planted is replaced, never followed.
    const fs::path tmp = fs::temp_directory_path(ec);
    dir = tmp / fmt::format("flashjit-failed-{}", ::geteuid());
    if (!ensure_private_dir(dir, false) || !check_private_shard(dir)) {
      std::string fresh = (tmp / "flashjit-failed-XXXXXX").string();
      if (::mkdtemp(fresh.data()) == nullptr) return fmt::format("(nowhere: cannot create a folder in {})", tmp.string());
      dir = fresh;
    }
  } else if (Status st = ensure_private_dir(dir, false); !st) {
    return fmt::format("(nowhere: {})", st.error().message);
  }
  const fs::path path = dir / (name + ".cu");
  if (Status st = write_atomically(path, text); !st) return fmt::format("(nowhere: {})", st.error().message);
  return path.string();
}

}  // namespace flashjit::cache
