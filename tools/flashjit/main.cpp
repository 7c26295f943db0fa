// flashjit: inspect, compile and run the JIT-generated attention kernels. Each subcommand lives in its own
// file; this one wires up the parser. Exit codes (cli.hpp): 0 ok, 1 failure, 2 invalid input.
#include <cstdio>
#include <vector>

#include "cli.hpp"
#include "runtime/settings.hpp"

int main(int argc, char** argv) {
  using namespace flashjit::cli;
  CLI::App app{"flashjit: JIT-generated FlashAttention kernels (CUDA)", "flashjit"};
  app.set_version_flag("--version", flashjit::version());
  app.failure_message(CLI::FailureMessage::help);  // a usage error prints the message and the usage
  app.require_subcommand(0, 1);  // none is handled below, so that a misspelt one is named in the error
  app.fallthrough();  // global options may also follow the subcommand (inherited by subcommands)

  Globals globals;
  app.add_option("--cache-dir", globals.cache_dir, "Kernel cache folder (default: FLASHJIT_CACHE_DIR, "
                                                   "$XDG_CACHE_HOME/flashjit or ~/.cache/flashjit)");
  app.add_flag("-v,--verbose", globals.verbose, "Debug logging on stderr");

  const std::vector<Command> commands = {add_info(app, globals), add_emit(app, globals), add_compile(app, globals),
                                         add_cache(app, globals), add_run(app, globals),
                                         add_precompile(app, globals), add_autotune(app, globals),
                                         add_select(app, globals), add_compile_worker(app, globals),
                                         add_nvrtc_worker(app, globals)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kOk : kUsage;  // --help and --version exit 0
  }
  globals.settings = flashjit::runtime::resolve(runtime_options(globals));
  for (const auto& c : commands)
    if (c.app->parsed()) return c.run();
  std::fputs(("flashjit: a subcommand is required\n" + app.help()).c_str(), stderr);
  return kUsage;
}
