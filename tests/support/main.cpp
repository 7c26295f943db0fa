// The CPU test executable's main(): Catch2's session (support/catch_session.cpp), v2 or v3.
#include "support/catch_session.hpp"

int main(int argc, char** argv) { return flashjit::test::run_catch_session(argc, argv); }
