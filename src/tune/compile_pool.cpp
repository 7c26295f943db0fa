#include "tune/compile_pool.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "cache/disk_cache.hpp"
#include "cache/artifact_store.hpp"
#include "compile/subprocess.hpp"
#include "tune/worker_protocol.hpp"

namespace flashjit::tune {
namespace {

using Clock = std::chrono::steady_clock;
using compile::Child;
using compile::deadline_of;
using compile::describe_wait_status;

constexpr std::size_t kDetailsTail = 8192;  // bytes of a crashed worker's output kept in the error

struct Running {
  std::size_t index;
  std::unique_ptr<Child> child;
  Clock::time_point start, deadline;
};

std::string tail(const std::string& text) {
  if (text.size() <= kDetailsTail) return text;
  return "...\n" + text.substr(text.size() - kDetailsTail);
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The result line of the worker's stdout (the last line that decodes), if any.
std::optional<Result<KernelInfo>> result_line(const std::string& out) {
  std::size_t end = out.size();
  while (end > 0) {
    const std::size_t start = out.rfind('\n', end - 1);
    const std::size_t from = start == std::string::npos ? 0 : start + 1;
    if (auto r = decode_result(std::string_view(out).substr(from, end - from))) return r;
    if (start == std::string::npos) break;
    end = start;
  }
  return std::nullopt;
}

Result<KernelInfo> interpret(const Child& child, const std::string& name, bool timed_out,
                             std::chrono::milliseconds timeout) {
  const std::string& err = child.output(Child::err);
  if (timed_out)
    return Error(ErrorCode::compile, fmt::format("the worker compiling {} ran past the {:g} s timeout and was killed",
                                                 name, timeout.count() / 1000.0),
                 tail(err));
  auto result = result_line(child.output(Child::out));
  if (result) return std::move(*result);
  std::string details = tail(err);
  if (!child.output(Child::out).empty()) details += "\nstdout:\n" + tail(child.output(Child::out));
  return Error(ErrorCode::compile,
               fmt::format("the worker compiling {} {} without a result", name,
                           describe_wait_status(child.wait_status())),
               std::move(details));
}

}  // namespace

std::vector<CompileOutcome> CompilePool::run(const std::vector<AnyKernelConfig>& configs,
                                             const std::function<void(const PoolEvent&)>& on_event,
                                             const std::atomic<bool>* cancel) const {
  std::vector<CompileOutcome> outcomes(configs.size());
  PoolProgress progress;
  progress.total = static_cast<int>(configs.size());
  const std::size_t jobs = static_cast<std::size_t>(std::max(1, options_.jobs));
  std::vector<Running> running;
  std::size_t next = 0;

  auto notify = [&](PoolEvent::Kind kind, const CompileOutcome& o) {
    if (on_event) on_event(PoolEvent{kind, o, progress});
  };
  auto finish = [&](std::size_t index, Result<KernelInfo> info, std::string log, double ms) {
    CompileOutcome& o = outcomes[index];
    o.info = std::move(info);
    o.worker_log = std::move(log);
    o.wall_ms = ms;
    ++progress.done;
    if (!o.info.ok()) ++progress.failed;
    auto it = std::find(progress.running.begin(), progress.running.end(), o.name);
    if (it != progress.running.end()) progress.running.erase(it);
    notify(PoolEvent::finished, o);
  };
  auto start = [&](std::size_t index) {
    CompileOutcome& o = outcomes[index];
    o.config = configs[index];
    o.name = readable_name(o.config);
    progress.running.push_back(o.name);
    notify(PoolEvent::started, o);
    std::vector<std::string> argv = options_.worker;
    argv.push_back(kWorkerCommand);
    argv.push_back("--parent");  // the worker dies with this process (compile::die_with_parent)
    argv.push_back(std::to_string(::getpid()));
    argv.push_back(to_json(o.config));
    const auto t0 = Clock::now();
    auto child = Child::spawn(argv, options_.env);
    if (!child.ok()) {
      finish(index, std::move(child).error().with(fmt::format("while starting the worker for {}", o.name)), {}, 0);
      return;
    }
    running.push_back({index, std::move(*child), t0, deadline_of(t0, options_.timeout)});
  };
  auto cancelled = [&] { return cancel && cancel->load(); };

  while (next < configs.size() || !running.empty()) {
    if (cancelled()) {
      for (auto& r : running) {
        r.child->kill_and_reap();
        finish(r.index, Error(ErrorCode::internal, "cancelled while compiling"), r.child->output(Child::err),
               ms_between(r.start, Clock::now()));
      }
      running.clear();
      for (; next < configs.size(); ++next) {
        outcomes[next].config = configs[next];
        outcomes[next].name = readable_name(configs[next]);
        finish(next, Error(ErrorCode::internal, "cancelled before compiling"), {}, 0);
      }
      break;
    }
    while (running.size() < jobs && next < configs.size()) start(next++);
    if (running.empty()) continue;

    // Wait for output, an exit or the nearest deadline (at most 200 ms, so cancellation is seen).
    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, Child::Stream>> owners;
    auto now = Clock::now();
    auto wait = std::chrono::milliseconds(200);
    for (auto& r : running) {
      for (auto s : {Child::out, Child::err})
        if (r.child->fd(s) >= 0) {
          fds.push_back({r.child->fd(s), POLLIN, 0});
          owners.emplace_back(r.child.get(), s);
        }
      // Pipes closed but not yet reaped: look again soon.
      auto left = r.child->pipes_closed() ? std::chrono::milliseconds(2)
                                          : std::chrono::ceil<std::chrono::milliseconds>(r.deadline - now);
      wait = std::clamp(left, std::chrono::milliseconds(0), wait);
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(wait.count())) > 0)
      for (std::size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents != 0) owners[i].first->drain(owners[i].second);

    now = Clock::now();
    for (auto it = running.begin(); it != running.end();) {
      Child& c = *it->child;
      const bool ended = c.pipes_closed() && c.try_reap();
      const bool late = !ended && now >= it->deadline;
      if (!ended && !late) {
        ++it;
        continue;
      }
      if (late) c.kill_and_reap();
      for (auto s : {Child::out, Child::err}) c.drain(s);  // whatever was written before the end
      const std::string& name = outcomes[it->index].name;
      finish(it->index, interpret(c, name, late, options_.timeout), c.output(Child::err), ms_between(it->start, now));
      it = running.erase(it);
    }
  }
  return outcomes;
}

namespace {

Result<cache::DiskCache> open_disk(const cache::CacheOptions& cache) {
  auto disk = cache::DiskCache::open(cache);
  if (!disk.ok()) return std::move(disk).error().with("while opening the kernel cache");
  return disk;
}

template <class Config>
Result<CacheSplitOf<Config>> split(const cache::CacheOptions& cache, const std::vector<Config>& configs) {
  if (auto disk = open_disk(cache); !disk.ok()) return std::move(disk).error();  // no cache: no split
  CacheSplitOf<Config> split;
  for (const auto& c : configs) {
    // An artifact store per config (in compile_in_cache): it keeps every cubin it loads, and only the info is
    // wanted here.
    auto info = compile_in_cache(cache, c, /*jit=*/false);
    if (info.ok())
      split.cached.emplace_back(c, std::move(*info));
    else
      split.missing.push_back(c);
  }
  return split;
}

}  // namespace

Result<CacheSplit> split_cached(const cache::CacheOptions& cache, const std::vector<KernelConfig>& configs) {
  return split(cache, configs);
}

Result<CacheSplitOf<AnyKernelConfig>> split_cached(const cache::CacheOptions& cache,
                                                   const std::vector<AnyKernelConfig>& configs) {
  return split(cache, configs);
}

Result<KernelInfo> compile_in_cache(const cache::CacheOptions& cache, const AnyKernelConfig& config, bool jit) {
  auto disk = open_disk(cache);
  if (!disk.ok()) return std::move(disk).error();
  cache::ArtifactStore store(std::move(*disk), jit, cache.logger);
  auto artifact = store.get(config);
  if (!artifact.ok()) return std::move(artifact).error();
  return (*artifact)->info;
}

}  // namespace flashjit::tune
