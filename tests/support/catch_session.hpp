// Catch2's session, compiled once (support/catch_session.cpp) for both test executables: main() calls this.
#pragma once

namespace flashjit::test {

// Catch::Session().run(argc, argv).
int run_catch_session(int argc, char** argv);

}  // namespace flashjit::test
