// Tests of the compile worker's result line: both kinds round-trip; other lines are not results.
#include <string>

#include "support/catch.hpp"
#include "tune/worker_protocol.hpp"

using flashjit::Error;
using flashjit::ErrorCode;
using flashjit::KernelInfo;
using flashjit::Result;
using flashjit::tune::decode_result;
using flashjit::tune::encode_result;

TEST_CASE("worker protocol: results round-trip", "[tune][worker]") {
  KernelInfo k;
  k.name = "fa3_bf16_d128_bm128_bn128_s2_wg2_none_sm90a";
  k.key = std::string(64, 'a');
  k.cache_hit = true;
  k.compile_ms = 412.5;
  k.dynamic_smem = 99328;
  k.ptxas.registers = 168;
  k.ptxas.spill_stores = 4;
  k.ptxas.spill_loads = 8;
  k.ptxas.stack_frame = 16;
  k.ptxas.static_smem = 32;
  k.ptxas.setmaxnreg_ignored = true;
  k.log = "ptxas info : line one\nline \"two\"";
  const std::string line = encode_result(k);
  CHECK(line.find('\n') == std::string::npos);
  auto back = decode_result(line);
  REQUIRE(back);
  REQUIRE(back->ok());
  const KernelInfo& b = **back;
  CHECK(b.name == k.name);
  CHECK(b.key == k.key);
  CHECK(b.cache_hit);
  CHECK(b.compile_ms == 412.5);
  CHECK(b.dynamic_smem == k.dynamic_smem);
  CHECK(b.ptxas.registers == 168);
  CHECK(b.ptxas.spill_stores == 4);
  CHECK(b.ptxas.spill_loads == 8);
  CHECK(b.ptxas.stack_frame == 16);
  CHECK(b.ptxas.static_smem == 32);
  CHECK(b.ptxas.setmaxnreg_ignored);
  CHECK(b.log == k.log);

  Error e(ErrorCode::compile, "nvrtcCompileProgram failed", "the log\nline 2");
  e.context = {"generated source saved to /x.cu"};
  auto err = decode_result(encode_result(Result<KernelInfo>(e)));
  REQUIRE(err);
  REQUIRE_FALSE(err->ok());
  CHECK(err->error().code == ErrorCode::compile);
  CHECK(err->error().message == e.message);
  CHECK(err->error().details == e.details);
  CHECK(err->error().context == e.context);
}

TEST_CASE("worker protocol: other lines are not results", "[tune][worker]") {
  for (const char* line : {"", "flashjit warning: something", "{", "[]", R"({"ok": 1})", R"({"ok": true})",
                           R"({"ok": true, "name": "x", "key": 3})"}) {
    INFO(line);
    CHECK_FALSE(decode_result(line));
  }
}
