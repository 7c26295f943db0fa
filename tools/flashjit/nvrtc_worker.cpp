// `flashjit nvrtc-worker --parent PID` (hidden): the runtime's out-of-process compile (compile/worker.hpp).
// Reads one request on stdin, compiles it with NVRTC in this process and prints the reply line. Its own
// process, so that a compiler crash or hang takes down this kernel only; it dies with the process that
// started it. The compile pool's fault hook (FLASHJIT_WORKER_FAULT) applies here too, by kernel name.
#include <cstdio>
#include <iostream>
#include <iterator>

#include "cli.hpp"
#include "compile/subprocess.hpp"
#include "compile/worker.hpp"

namespace flashjit::cli {

Command add_nvrtc_worker(CLI::App& parent, const Globals& /*globals*/) {
  CLI::App* app = parent.add_subcommand(compile::kNvrtcWorkerCommand, "Compile one generated source (internal)");
  app->group("");  // hidden from --help
  auto parent_pid = std::make_shared<int>(0);
  app->add_option("--parent", *parent_pid, "The pid of the process that started the worker: it dies with it");
  return {app, [parent_pid] {
            if (!compile::die_with_parent(*parent_pid)) return kFailure;
            // Everything is logged into the reply; the host's logger decides what to show.
            auto lines = std::make_shared<compile::LogLines>();
            const log::Logger logger(log::Level::debug, [lines](LogLevel level, std::string_view m) {
              lines->emplace_back(level, std::string(m));
            });
            const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
            Result<compile::CompiledKernel> result = Error(ErrorCode::internal, "no request");
            auto request = compile::decode_request(text);
            if (!request.ok()) {
              result = std::move(request).error();
            } else if (request->build != compile::build_stamp()) {
              result = compile::build_mismatch(request->build);
            } else {
              inject_worker_fault(request->source.name);
              result = compile::compile(request->source, request->options, logger);
            }
            std::fputs((compile::encode_reply(result, *lines) + "\n").c_str(), stdout);
            return result.ok() ? kOk : kFailure;
          }};
}

}  // namespace flashjit::cli
