// Tests of resuming an autotune run: which problems are left, and which file the results continue from.
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "support/catch.hpp"
#include "support/temp_dir.hpp"
#include "tune/resume.hpp"

namespace fs = std::filesystem;
using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::ErrorCode;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using namespace flashjit::dispatch;
using namespace flashjit::tune;

namespace {

const Arch kSm90a{90, true};

ProblemShape shape(int seqlen, MaskKind mask = MaskKind::none) {
  ProblemShape s;
  s.seqlen_q = s.seqlen_k = seqlen, s.heads_q = 32, s.heads_kv = 8, s.head_dim = 128, s.mask = mask;
  return s;
}

TunedEntry entry(const ProblemShape& s) {
  TunedEntry e;
  e.problem = s;
  e.best.algorithm = Algorithm::fa3, e.best.arch = kSm90a, e.best.mask = s.mask;
  e.best.block_m = 128, e.best.consumer_warpgroups = 2, e.best.block_n = 128;
  return e;
}

using flashjit::test::TempDir;

}  // namespace

TEST_CASE("resume: the problems left are those without an entry", "[tune][resume]") {
  const std::vector<ProblemShape> problems = {shape(64), shape(128), shape(64, MaskKind::causal), shape(256)};
  TunedTable done;
  CHECK(pending_problems(problems, done) == std::vector<std::size_t>{0, 1, 2, 3});
  done.entries = {entry(shape(128)), entry(shape(64, MaskKind::causal))};
  CHECK(pending_problems(problems, done) == std::vector<std::size_t>{0, 3});
  done.entries.push_back(entry(shape(512)));  // an entry of another sweep changes nothing
  CHECK(pending_problems(problems, done) == std::vector<std::size_t>{0, 3});
  done.entries = {entry(shape(64)), entry(shape(128)), entry(shape(64, MaskKind::causal)), entry(shape(256))};
  CHECK(pending_problems(problems, done).empty());
  // Mask constants a mask does not use do not make a problem different.
  ProblemShape stray = shape(256);
  stray.window_left = 7;
  CHECK(pending_problems({stray}, done).empty());
}

TEST_CASE("resume: continue from OUT.partial, else OUT, refusing other systems", "[tune][resume]") {
  TempDir dir;
  const fs::path out = dir.path / "h200.json";
  CHECK(partial_path(out) == dir.path / "h200.json.partial");
  const Stamp system = system_stamp("NVIDIA H200", kSm90a, 13000);

  auto fresh = resume_table(out, system);
  REQUIRE(fresh.ok());
  CHECK(fresh->entries.empty());
  CHECK(fresh->stamp.gpu == "NVIDIA H200");

  TunedTable finished{system, "llama3", {entry(shape(64)), entry(shape(128))}};
  REQUIRE(save_table(finished, out).ok());
  auto from_out = resume_table(out, system);
  REQUIRE(from_out.ok());
  CHECK(from_out->entries.size() == 2);

  TunedTable partial{system_stamp("NVIDIA H200", kSm90a, 12080), "llama3", {entry(shape(64))}};
  REQUIRE(save_table(partial, partial_path(out)).ok());
  auto from_partial = resume_table(out, system);
  REQUIRE(from_partial.ok());
  CHECK(from_partial->entries.size() == 1);      // the partial file wins
  CHECK(from_partial->stamp.driver == 13000);    // restamped with the running driver

  TunedTable elsewhere{system_stamp("NVIDIA H100 80GB HBM3", kSm90a, 13000), "llama3", {entry(shape(64))}};
  REQUIRE(save_table(elsewhere, partial_path(out)).ok());
  auto refused = resume_table(out, system);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("h200.json.partial") != std::string::npos);
  CHECK(refused.error().message.find("H100") != std::string::npos);

  std::ofstream(partial_path(out)) << "{ truncated";
  auto broken = resume_table(out, system);
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.error().to_string().find("resuming") != std::string::npos);
}
