// How the runtime compiles a cache miss: in a worker process by default (compile/worker.hpp: a compiler that
// crashes or hangs fails that kernel, with the time limit of the settings), in this process when the settings
// say so or when no worker can be used (found, started, of this build): then one warning says why.
#pragma once

#include <filesystem>

#include "cache/artifact_store.hpp"
#include "runtime/settings.hpp"

namespace flashjit::runtime {

// The `flashjit` executable beside the library or program that holds this code: in its folder, in tools/ or
// bin/ of its folder or of the folder above (the build tree: build/libflashjit.so, build/flashjit,
// build/tests/...; an install: lib/ and bin/). Empty when there is none.
std::filesystem::path find_compile_worker();

// The artifact store's compiler for the settings: empty (in process) when settings.compile_in_process.
cache::ArtifactStore::Compiler compiler_of(const Settings& settings);

}  // namespace flashjit::runtime
