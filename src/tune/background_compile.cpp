#include "tune/background_compile.hpp"

#include <fmt/format.h>

namespace flashjit::tune {

BackgroundCompiles::BackgroundCompiles(PoolOptions options, std::vector<KernelConfig> configs,
                                       std::vector<std::pair<KernelConfig, KernelInfo>> known) {
  for (auto& [config, info] : known) results_.emplace(to_json(config), std::move(info));
  for (const auto& c : configs) pending_.insert(to_json(c));
  thread_ = std::thread([this, pool = CompilePool(std::move(options)), configs = std::move(configs)] {
    pool.run(
        configs,
        [this](const PoolEvent& e) {
          if (e.kind != PoolEvent::finished) return;
          std::lock_guard lock(mutex_);
          const std::string key = to_json(e.outcome.config);
          results_.insert_or_assign(key, e.outcome.info);
          pending_.erase(key);
          changed_.notify_all();
        },
        &cancel_);
  });
}

BackgroundCompiles::~BackgroundCompiles() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
}

Result<KernelInfo> BackgroundCompiles::wait(const KernelConfig& config) {
  const std::string key = to_json(config);
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return results_.count(key) > 0 || pending_.count(key) == 0; });
  if (auto it = results_.find(key); it != results_.end()) return it->second;
  return Error(ErrorCode::internal, fmt::format("{} was never submitted for compilation", readable_name(config)));
}

}  // namespace flashjit::tune
