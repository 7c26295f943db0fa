// Catch2's runner for the CPU and the GPU test executables. With v2 (Debian 12) this translation unit holds
// the single header's whole implementation (CATCH_CONFIG_RUNNER), the largest object of the tests: it is
// compiled once, as an object library linked into both; v3 keeps its implementation in libCatch2.
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include "support/catch_session.hpp"

int flashjit::test::run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }
