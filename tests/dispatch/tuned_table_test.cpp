// Tests of tuned tables: the JSON form round-trips, errors name the field, stamps decide which tables load
// and which apply to a device, lookup takes the closest bucket and passes over entries that do not fit,
// and choose() falls back to the heuristics.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "compile/nvrtc.hpp"
#include "dispatch/heuristics.hpp"
#include "dispatch/tuned_table.hpp"
#include "flashjit/runtime.hpp"
#include "runtime/settings.hpp"
#include "support/catch.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::AttentionProblem;
using flashjit::DType;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using namespace flashjit::dispatch;

namespace {

const Arch kSm90a{90, true};
const char* kGpu = "NVIDIA H200";

ProblemShape shape(int seqlen, MaskKind mask = MaskKind::causal, int batch = 1) {
  ProblemShape s;
  s.batch = batch, s.seqlen_q = s.seqlen_k = seqlen, s.heads_q = 32, s.heads_kv = 8, s.head_dim = 128, s.mask = mask;
  return s;
}

KernelConfig fa3(int block_n, MaskKind mask = MaskKind::causal) {
  KernelConfig c;
  c.algorithm = Algorithm::fa3, c.arch = kSm90a, c.head_dim = 128, c.mask = mask;
  c.block_m = 128, c.consumer_warpgroups = 2, c.block_n = block_n, c.stages = 2;
  return c;
}

TunedEntry entry(const ProblemShape& s, const KernelConfig& best) {
  TunedEntry e;
  e.problem = s;
  e.best = best;
  e.tflops = 600, e.median_ms = 1.5;
  return e;
}

TunedTable table(std::vector<TunedEntry> entries, const std::string& gpu = kGpu) {
  return TunedTable{system_stamp(gpu, kSm90a, 13000), "llama3", std::move(entries)};
}

using flashjit::test::TempDir;

}  // namespace

TEST_CASE("tuned table: JSON round trip and stamp", "[tune][table]") {
  TunedEntry e = entry(shape(4096), fa3(144));
  e.runner_up = fa3(128), e.runner_up_tflops = 590;
  e.heuristic = fa3(128), e.heuristic_tflops = 590;
  e.rel_l2 = 3.5e-3;
  e.candidates = {29, 49, 2, 1, 26};
  ProblemShape window = shape(8192, MaskKind::sliding_window, 4);
  window.window_left = 512, window.window_right = 0;
  KernelConfig wc = fa3(128, MaskKind::sliding_window);
  const TunedTable t = table({e, entry(window, wc)});
  CHECK(t.stamp.nvrtc == flashjit::compile::nvrtc_version());
  CHECK(t.stamp.flashjit == flashjit::version());

  auto back = parse_table(to_json(t), "t.json");
  REQUIRE(back.ok());
  CHECK(back->stamp.gpu == kGpu);
  CHECK(back->stamp.arch == kSm90a);
  CHECK(back->stamp.driver == 13000);
  CHECK(back->sweep == "llama3");
  REQUIRE(back->entries.size() == 2);
  const TunedEntry& b = back->entries[0];
  CHECK(b.problem == e.problem);
  CHECK(b.best == e.best);
  CHECK(b.tflops == 600);
  CHECK(b.runner_up == e.runner_up);
  CHECK(b.runner_up_tflops == 590);
  CHECK(b.heuristic == e.heuristic);
  CHECK(b.rel_l2 == e.rel_l2);
  CHECK(b.candidates.enumerated == 29);
  CHECK(b.candidates.timed == 26);
  CHECK(back->entries[1].problem == window);
  CHECK_FALSE(back->entries[1].rel_l2);
  CHECK_FALSE(back->entries[1].runner_up);

  TempDir dir;
  const fs::path file = dir.path / "sub" / "h200.json";
  REQUIRE(save_table(t, file).ok());
  auto loaded = load_table(file);
  REQUIRE(loaded.ok());
  CHECK(loaded->entries.size() == 2);
  CHECK(fs::directory_iterator(file.parent_path()) != fs::directory_iterator());
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& f : fs::directory_iterator(file.parent_path())) ++files;
  CHECK(files == 1);  // no temporary left behind
}

TEST_CASE("tuned table: errors name the field", "[tune][table]") {
  std::string good = to_json(table({entry(shape(64), fa3(128))}));
  auto error_of = [](const std::string& text) {
    auto t = parse_table(text, "bad.json");
    REQUIRE_FALSE(t.ok());
    return t.error().message;
  };
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  CHECK(error_of("nope").find("bad.json") != std::string::npos);
  CHECK(error_of(replace("flashjit-tuned-table", "other")).find("format") != std::string::npos);
  CHECK(error_of(replace("\"version\": 1", "\"version\": 9")).find("version") != std::string::npos);
  CHECK(error_of(replace("\"sm_90a\"", "\"sm_x\"")).find("stamp.arch") != std::string::npos);
  CHECK(error_of(replace("\"seqlen_q\": 64", "\"seqlen_q\": -1")).find("entries[0].problem") != std::string::npos);
  CHECK(error_of(replace("\"block_n\": 128", "\"block_n\": \"x\"")).find("entries[0].best") != std::string::npos);
  CHECK(error_of(replace("\"tflops\": 600.0", "\"tflops\": \"fast\"")).find("entries[0].tflops") != std::string::npos);
}

TEST_CASE("tuned table: lookup takes the closest bucket", "[tune][table]") {
  TunedTables tables;
  REQUIRE(tables.add(table({entry(shape(1024), fa3(64)), entry(shape(4096), fa3(112)), entry(shape(16384), fa3(144)),
                            entry(shape(4096, MaskKind::none), fa3(176, MaskKind::none)),
                            entry(shape(1024, MaskKind::causal, 16), fa3(80))}),
                     "t.json"));
  CHECK(tables.entry_count() == 5);
  auto pick = [&](const ProblemShape& s) { return tables.lookup(to_problem(s), kSm90a); };
  CHECK(pick(shape(4096)) == fa3(112));     // exact
  CHECK(pick(shape(3000)) == fa3(112));     // nearest in log space
  CHECK(pick(shape(1500)) == fa3(64));
  CHECK(pick(shape(128)) == fa3(64));       // beyond the ends: the nearest end
  CHECK(pick(shape(65536)) == fa3(144));
  CHECK(pick(shape(9000)) == fa3(144));     // log2: 9000 is nearer 16384 than 4096
  CHECK(pick(shape(2048, MaskKind::none)) == fa3(176, MaskKind::none));  // the mask kind must match
  // batch * heads_q is the third coordinate.
  CHECK(pick(shape(1024, MaskKind::causal, 8)) == fa3(80));   // ln 2 from batch 16, ln 8 from batch 1
  CHECK(pick(shape(1024, MaskKind::causal, 2)) == fa3(64));
  // seqlen_q and seqlen_k count separately: the sum of both log distances.
  ProblemShape uneven = shape(1024);
  uneven.seqlen_k = 3000;  // 1024: ln 2.93 = 1.07; 4096: ln 4 + ln 1.37 = 1.70
  CHECK(pick(uneven) == fa3(64));
  uneven.seqlen_q = 2048, uneven.seqlen_k = 4096;  // 1024: ln 2 + ln 4 = 2.08; 4096: ln 2 = 0.69
  CHECK(pick(uneven) == fa3(112));
  // Other dtype, head dim, GQA group or mask: nothing matches.
  ProblemShape fp16 = shape(4096);
  fp16.dtype = DType::fp16;
  CHECK_FALSE(pick(fp16));
  ProblemShape d64 = shape(4096);
  d64.head_dim = 64;
  CHECK_FALSE(pick(d64));
  ProblemShape mha = shape(4096);
  mha.heads_kv = 32;
  CHECK_FALSE(pick(mha));
  CHECK_FALSE(pick(shape(4096, MaskKind::sliding_window)));
}

TEST_CASE("tuned table: entries that do not fit are passed over", "[tune][table]") {
  KernelConfig invalid = fa3(128);
  invalid.block_n = 72;  // not a multiple of 16
  KernelConfig sm80 = fa3(128);
  sm80.algorithm = Algorithm::fa2, sm80.arch = Arch{80, false}, sm80.warps = 4, sm80.block_n = 64;
  TunedTables tables;
  REQUIRE(tables.add(table({entry(shape(4096), invalid), entry(shape(4096, MaskKind::none), sm80),
                            entry(shape(1024), fa3(96)), entry(shape(1024, MaskKind::none), fa3(80, MaskKind::none))}),
                     "t.json"));
  CHECK(tables.entry_count() == 3);  // validate() drops the invalid entry at load
  // The nearest bucket's config is the invalid one (dropped): the next nearest is used.
  CHECK(tables.lookup(to_problem(shape(4096)), kSm90a) == fa3(96));
  // supports() fails (an sm_80 cubin does not load on an sm_90a device: another major version): passed over.
  CHECK(tables.lookup(to_problem(shape(4096, MaskKind::none)), kSm90a) == fa3(80, MaskKind::none));
}

TEST_CASE("tuned table: stamps decide what loads and what applies to a device", "[tune][table]") {
  TempDir dir;
  TunedTable current = table({entry(shape(4096), fa3(112))});
  TunedTable old_flashjit = current;
  old_flashjit.stamp.flashjit = "0.0.1";
  TunedTable old_nvrtc = current;
  old_nvrtc.stamp.nvrtc = "11.8";
  TunedTable h100 = table({entry(shape(4096), fa3(144))}, "NVIDIA H100 80GB HBM3");
  REQUIRE(save_table(current, dir.path / "a" / "h200.json").ok());
  REQUIRE(save_table(h100, dir.path / "a" / "h100.json").ok());
  REQUIRE(save_table(old_flashjit, dir.path / "a" / "old.json").ok());
  REQUIRE(save_table(old_nvrtc, dir.path / "b.json").ok());
  std::ofstream(dir.path / "a" / "broken.json") << "{";
  std::ofstream(dir.path / "a" / "notes.txt") << "not a table";

  const TunedTables all =
      TunedTables::load({dir.path / "a", dir.path / "b.json", dir.path / "missing.json"}, flashjit::log::Logger{});
  CHECK(all.size() == 2);  // h100 and h200; the other versions and the broken file are skipped
  CHECK(all.gpus(kSm90a) == std::vector<std::string>{"NVIDIA H100 80GB HBM3", "NVIDIA H200"});
  CHECK(all.gpus(Arch{80, false}).empty());

  const TunedTables h200 = all.for_device(kGpu, kSm90a);
  CHECK(h200.size() == 1);
  CHECK(h200.lookup(to_problem(shape(4096)), kSm90a) == fa3(112));
  CHECK(all.for_device("NVIDIA H100 80GB HBM3", kSm90a).lookup(to_problem(shape(4096)), kSm90a) == fa3(144));
  CHECK(all.for_device("NVIDIA A100-SXM4-80GB", Arch{80, false}).empty());
  CHECK(all.for_device(kGpu, Arch{90, false}).empty());  // same name, other arch

  CHECK(stamp_mismatch(current.stamp, current.stamp, true).empty());
  CHECK(stamp_mismatch(old_nvrtc.stamp, current.stamp, false).find("NVRTC 11.8") != std::string::npos);
  CHECK(stamp_mismatch(h100.stamp, current.stamp, false).empty());
  CHECK(stamp_mismatch(h100.stamp, current.stamp, true).find("H100") != std::string::npos);
  TunedTable other_driver = current;
  other_driver.stamp.driver = 12040;
  CHECK(stamp_mismatch(other_driver.stamp, current.stamp, true).empty());  // recorded, not matched

  // FLASHJIT_TUNED (':'-separated) first, then <cache>/tuned when it exists.
  fs::create_directories(dir.path / "cache" / "tuned");
  ::setenv("FLASHJIT_TUNED", (dir.path.string() + "/x.json::" + dir.path.string() + "/y").c_str(), 1);
  const auto sources = TunedTables::default_sources(flashjit::runtime::resolve({}).tuned_tables, dir.path / "cache");
  ::unsetenv("FLASHJIT_TUNED");
  CHECK(sources == std::vector<fs::path>{dir.path / "x.json", dir.path / "y", dir.path / "cache" / "tuned"});
  CHECK(TunedTables::default_sources({}, dir.path / "nothing").empty());
}

TEST_CASE("tuned table: choose() uses the table, else the heuristics", "[tune][table]") {
  TunedTables tables;
  REQUIRE(tables.add(table({entry(shape(4096), fa3(112))}), "t.json"));
  AttentionProblem p = to_problem(shape(4096));
  auto tuned = flashjit::dispatch::choose(p, kSm90a, Algorithm::automatic, &tables);
  REQUIRE(tuned.ok());
  CHECK(*tuned == fa3(112));
  // No table, or no matching bucket: the heuristics' pick, unchanged.
  auto plain = flashjit::dispatch::choose(p, kSm90a);
  REQUIRE(plain.ok());
  CHECK(*plain == flashjit::dispatch::fa3_heuristic(DType::bf16, 128, MaskKind::causal, kSm90a));
  AttentionProblem other = to_problem(shape(4096, MaskKind::none));
  auto fallback = flashjit::dispatch::choose(other, kSm90a, Algorithm::automatic, &tables);
  REQUIRE(fallback.ok());
  CHECK(*fallback == flashjit::dispatch::fa3_heuristic(DType::bf16, 128, MaskKind::none, kSm90a));
  // An explicit algorithm ignores the tables.
  auto explicit_fa2 = flashjit::dispatch::choose(p, kSm90a, Algorithm::fa2, &tables);
  REQUIRE(explicit_fa2.ok());
  CHECK(explicit_fa2->algorithm == Algorithm::fa2);
  // A table for another device does not apply to this one.
  CHECK(tables.for_device("NVIDIA H100 80GB HBM3", kSm90a).lookup(p, kSm90a) == std::nullopt);
}

TEST_CASE("tuned table: a varlen problem takes the tiles of its padded twin, with varlen set", "[tune][table][varlen]") {
  TunedTables tables;
  REQUIRE(tables.add(table({entry(shape(4096), fa3(96))}), "t.json"));
  AttentionProblem p = to_problem(shape(4096));  // seqlen_q / seqlen_k: the max lengths
  p.q = p.k = p.v = reinterpret_cast<const void*>(0x100000);
  p.o = reinterpret_cast<void*>(0x200000);
  p.cu_seqlens_q = p.cu_seqlens_k = reinterpret_cast<const int*>(0x300000);
  p.total_q = p.total_k = 5000;
  REQUIRE(check(p).ok());
  auto c = flashjit::dispatch::choose(p, kSm90a, Algorithm::automatic, &tables);
  REQUIRE(c.ok());
  KernelConfig expected = fa3(96);
  expected.varlen = true;
  CHECK(*c == expected);
  // A table entry that is itself varlen never serves a fixed-length problem.
  KernelConfig varlen_entry = fa3(112);
  varlen_entry.varlen = true;
  TunedTables other;
  REQUIRE(other.add(table({entry(shape(4096), varlen_entry)}), "v.json"));
  CHECK(other.lookup(to_problem(shape(4096)), kSm90a) == std::nullopt);
}

TEST_CASE("tuned table: Runtime::select for a target consults the tables of its GPU name", "[tune][table][select]") {
  TempDir dir;
  REQUIRE(save_table(table({entry(shape(4096), fa3(112))}), dir.path / "h200.json").ok());
  flashjit::RuntimeOptions options;
  options.cache_dir = dir.path / "cache";
  options.tuned_tables = std::vector<fs::path>{dir.path / "h200.json"};
  auto rt = flashjit::Runtime::create(options);
  REQUIRE(rt.ok());
  AttentionProblem p = to_problem(shape(4096));  // no pointers: a target's selection reads none
  const flashjit::Target h200{kSm90a, 132, kGpu};
  auto tuned = (*rt)->select(p, h200);
  REQUIRE(tuned.ok());
  CHECK(*tuned == fa3(112));
  // No GPU name, or another one: the heuristics alone.
  auto plain = (*rt)->select(p, flashjit::Target{kSm90a, 132, ""});
  REQUIRE(plain.ok());
  CHECK(*plain == fa3_heuristic(DType::bf16, 128, MaskKind::causal, kSm90a));
  auto other = (*rt)->select(p, flashjit::Target{kSm90a, 132, "NVIDIA H100 80GB HBM3"});
  REQUIRE(other.ok());
  CHECK(*other == *plain);
  // The problem is checked, the target too.
  AttentionProblem bad = p;
  bad.head_dim = 12;
  CHECK_FALSE((*rt)->select(bad, h200).ok());
  auto no_sms = (*rt)->select(p, flashjit::Target{kSm90a, 0, ""});
  REQUIRE_FALSE(no_sms.ok());
  CHECK(no_sms.error().message.find("target sms must be >= 1") != std::string::npos);
}

// Issue 29: fields of the wrong type threw (nlohmann type_error) out of every entry point that loads tables;
// a version of 2^40 + 1 read as 1; deep nesting overflowed the stack in the error's dump().
TEST_CASE("tuned table: malformed tables are errors, and loading them only warns", "[tune][table]") {
  const std::string good = to_json(table({entry(shape(64), fa3(128))}));
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  struct Case { std::string text; const char* says; };
  const Case cases[] = {
      {replace("\"flashjit-tuned-table\"", "7"), "format"},
      {replace("\"flashjit-tuned-table\"", "[\"flashjit-tuned-table\"]"), "format"},
      {replace("\"version\": 1", "\"version\": 1099511627777"), "version"},
      {replace("\"version\": 1", "\"version\": 18446744073709551615"), "version"},
      {replace("\"version\": 1", "\"version\": \"1\""), "version"},
      {replace("\"version\": 1", "\"version\": 1e9999"), "not valid JSON"},  // found by the fuzz run
      {replace("\"driver\": 13000", "\"driver\": \"13.0\""), "stamp.driver"},
      {replace("\"driver\": 13000", "\"driver\": 4294967297"), "stamp.driver"},
      {replace("\"sweep\": \"llama3\"", "\"sweep\": {\"a\": 1}"), "sweep"},
      {replace("\"enumerated\": 0", "\"enumerated\": 4294967296"), "entries[0].candidates.enumerated"},
      {replace("\"best\": {", "\"best\": " + std::string(70000, '[') + std::string(70000, ']') + ", \"x\": {"),
       "nested deeper than"},
  };
  TempDir dir;
  for (const auto& c : cases) {
    INFO(c.says);
    flashjit::Result<TunedTable> t = flashjit::Error();
    REQUIRE_NOTHROW(t = parse_table(c.text, "bad.json"));
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message.find(c.says) != std::string::npos);
    std::ofstream(dir.path / "bad.json") << c.text;
    std::vector<std::pair<flashjit::LogLevel, std::string>> lines;
    flashjit::log::Logger logger(flashjit::LogLevel::warn,
                                 [&](flashjit::LogLevel l, std::string_view m) { lines.emplace_back(l, std::string(m)); });
    TunedTables loaded(logger);
    REQUIRE_NOTHROW(loaded = TunedTables::load({dir.path}, logger));
    CHECK(loaded.gpus(kSm90a).empty());
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].second.find("ignoring tuned table") != std::string::npos);
  }
}
