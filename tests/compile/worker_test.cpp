// The out-of-process compile's protocol (compile/worker.hpp) without NVRTC: requests and replies round-trip
// (cubins of every byte value), a worker of another build is refused, and workers that cannot be used say so.
#include "compile/worker.hpp"

#include <string>

#include "support/catch.hpp"
#include "support/temp_dir.hpp"

using flashjit::ErrorCode;
using flashjit::compile::CompiledKernel;

TEST_CASE("compile worker: requests and replies round-trip", "[compile]") {
  flashjit::codegen::GeneratedSource source{"fa2_bf16_d64_name", "fa2_entry", "#include \"x.cuh\"\n// \xce\xbb\n"};
  auto request = flashjit::compile::decode_request(flashjit::compile::encode_request(source, {"-arch=sm_80", "-lineinfo"}));
  REQUIRE(request.ok());
  CHECK(request->build == flashjit::compile::build_stamp());
  CHECK(request->source.name == source.name);
  CHECK(request->source.entry == source.entry);
  CHECK(request->source.text == source.text);
  CHECK(request->options == std::vector<std::string>{"-arch=sm_80", "-lineinfo"});

  for (std::size_t n : {0, 1, 2, 3, 4, 255, 256, 1000}) {
    CompiledKernel k;
    for (std::size_t i = 0; i < n; ++i) k.cubin.push_back(static_cast<char>(i * 37 + n));
    k.log = "ptxas info: Used 128 registers";
    k.compile_ms = 12.5;
    k.ptxas.registers = 128, k.ptxas.spill_stores = 4, k.ptxas.setmaxnreg_ignored = true;
    const flashjit::compile::LogLines said = {{flashjit::LogLevel::debug, "nvrtc compile -arch=sm_80"},
                                              {flashjit::LogLevel::warn, "a \"quoted\" warning"}};
    const std::string line = flashjit::compile::encode_reply(k, said);
    CHECK(line.find('\n') == std::string::npos);
    flashjit::compile::LogLines heard;
    auto back = flashjit::compile::decode_reply(line, &heard);
    CHECK(heard == said);
    REQUIRE(back.has_value());
    REQUIRE(back->ok());
    CHECK((*back)->cubin == k.cubin);
    CHECK((*back)->log == k.log);
    CHECK((*back)->compile_ms == 12.5);
    CHECK((*back)->ptxas.registers == 128);
    CHECK((*back)->ptxas.spill_stores == 4);
    CHECK((*back)->ptxas.setmaxnreg_ignored);
  }
  flashjit::Error e(ErrorCode::compile, "nvrtcCompileProgram failed", "the log");
  e.context = {"while compiling x"};
  auto failed = flashjit::compile::decode_reply(flashjit::compile::encode_reply(e));
  REQUIRE(failed.has_value());
  REQUIRE_FALSE(failed->ok());
  CHECK(failed->error().code == ErrorCode::compile);
  CHECK(failed->error().message == e.message);
  CHECK(failed->error().details == "the log");
  CHECK(failed->error().context == e.context);

  for (const char* junk : {"", "{}", "[1]", R"({"ok":true})", R"({"ok":true,"cubin":"@@@@","log":"","compile_ms":1,"ptxas":{}})",
                           R"({"ok":false,"error":3})"})
    CHECK_FALSE(flashjit::compile::decode_reply(junk).has_value());
  CHECK_FALSE(flashjit::compile::decode_request("{\"build\": 1}").ok());
  CHECK_FALSE(flashjit::compile::decode_request(std::string(100000, '[')).ok());
}

TEST_CASE("compile worker: another build, a missing worker and a non-executable are unusable workers", "[compile]") {
  auto mismatch = flashjit::compile::build_mismatch("flashjit 0.0.1 templates x nvrtc 1.0");
  REQUIRE_FALSE(mismatch.ok());
  CHECK(flashjit::compile::worker_unusable(mismatch.error()));

  flashjit::codegen::GeneratedSource source{"k", "k", "__global__ void k() {}\n"};
  flashjit::test::TempDir dir;
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{}, {"/no/such/flashjit"}, {(dir.path / ".").string()}}) {
    flashjit::compile::WorkerOptions worker;
    worker.command = command;
    auto r = flashjit::compile::compile_in_worker(worker, source, {}, flashjit::log::Logger{});
    REQUIRE_FALSE(r.ok());
    INFO(r.error().to_string());
    CHECK(flashjit::compile::worker_unusable(r.error()));
  }
  // A worker that answers nothing and exits 0 is a fault, not an unusable worker.
  flashjit::compile::WorkerOptions quiet;
  quiet.command = {"/bin/true"};
  auto r = flashjit::compile::compile_in_worker(quiet, source, {}, flashjit::log::Logger{});
  REQUIRE_FALSE(r.ok());
  CHECK_FALSE(flashjit::compile::worker_unusable(r.error()));
  CHECK(r.error().message.find("exited with status 0 compiling k without a result") != std::string::npos);
}
