// Tests of sweep files: value forms and range expansion, the cross product, defaults, errors naming the
// entry and the field, the candidate space, and the shipped configs/*.json.
#include <filesystem>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "tune/sweep.hpp"

using flashjit::Algorithm;
using flashjit::DType;
using flashjit::ErrorCode;
using flashjit::MaskKind;
using flashjit::dispatch::ProblemShape;
using flashjit::tune::load_sweep;
using flashjit::tune::parse_sweep;
using flashjit::KvLayout;
using flashjit::tune::DecodeShape;

namespace {

// The problems of a sweep with one entry whose other fields are `fields`.
std::vector<ProblemShape> expand(const std::string& fields) {
  auto s = parse_sweep(R"({"problems": [{"heads_q": 8, "head_dim": 64, )" + fields + "}]}", "t.json");
  INFO(fields);
  if (!s.ok()) INFO(s.error().to_string());
  REQUIRE(s.ok());
  return s->problems;
}

std::vector<int> seqlens_q(const std::vector<ProblemShape>& ps) {
  std::vector<int> out;
  for (const auto& p : ps) out.push_back(p.seqlen_q);
  return out;
}

// The error message of a sweep that must not parse.
std::string error_of(const std::string& text) {
  auto s = parse_sweep(text, "bad.json");
  INFO(text);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == ErrorCode::invalid_argument);
  return s.error().message;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("sweep: value forms and ranges", "[tune][sweep]") {
  CHECK(seqlens_q(expand(R"("seqlen": 128)")) == std::vector<int>{128});
  CHECK(seqlens_q(expand(R"("seqlen": [64, 32])")) == std::vector<int>{64, 32});
  CHECK(seqlens_q(expand(R"("seqlen": {"values": [1, 2, 3]})")) == std::vector<int>{1, 2, 3});
  CHECK(seqlens_q(expand(R"("seqlen": {"from": 64, "to": 256, "step": 64})")) == std::vector<int>{64, 128, 192, 256});
  CHECK(seqlens_q(expand(R"("seqlen": {"from": 64, "to": 250, "step": 64})")) == std::vector<int>{64, 128, 192});
  CHECK(seqlens_q(expand(R"("seqlen": {"from": 3, "to": 5})")) == std::vector<int>{3, 4, 5});
  CHECK(seqlens_q(expand(R"("seqlen": {"from": 32, "to": 2048, "factor": 2})")) ==
        std::vector<int>{32, 64, 128, 256, 512, 1024, 2048});
  CHECK(seqlens_q(expand(R"("seqlen": {"from": 7, "to": 7, "factor": 4})")) == std::vector<int>{7});
}

TEST_CASE("sweep: cross product, defaults and duplicates", "[tune][sweep]") {
  auto ps = expand(R"("seqlen_q": [1, 2], "seqlen_k": [10, 20, 30], "mask": ["none", "causal"], "batch": [1, 4])");
  REQUIRE(ps.size() == 2 * 3 * 2 * 2);
  // The mask turns slowest, then batch, ..., seqlen_k fastest.
  CHECK(ps[0].mask == MaskKind::none);
  CHECK(ps[0].batch == 1);
  CHECK(ps[0].seqlen_q == 1);
  CHECK(ps[0].seqlen_k == 10);
  CHECK(ps[1].seqlen_k == 20);
  CHECK(ps[3].seqlen_q == 2);
  CHECK(ps[6].batch == 4);
  CHECK(ps[12].mask == MaskKind::causal);
  // Defaults: bf16, heads_kv = heads_q, no mask constants.
  CHECK(ps[0].dtype == DType::bf16);
  CHECK(ps[0].heads_kv == 8);
  CHECK(ps[0].window_left == -1);
  CHECK(ps[0].chunk_size == 0);

  // "seqlen" sets both lengths together (no cross product between them).
  auto diag = expand(R"("seqlen": [64, 128], "heads_kv": [2, 8], "dtype": ["bf16", "fp16"])");
  REQUIRE(diag.size() == 8);
  for (const auto& p : diag) CHECK(p.seqlen_q == p.seqlen_k);
  CHECK(diag.back().dtype == DType::fp16);
  CHECK(diag.back().heads_kv == 8);

  // Mask constants apply to the masks that use them; repeated problems appear once, in order.
  auto masks = expand(R"("seqlen": 256, "mask": ["none", "sliding_window"], "window_left": [64, 128])");
  REQUIRE(masks.size() == 3);
  CHECK(masks[0].mask == MaskKind::none);
  CHECK(masks[0].window_left == -1);
  CHECK(masks[1].window_left == 64);
  CHECK(masks[2].window_left == 128);
  auto twice = parse_sweep(R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": [1, 2]},
                                            {"heads_q": 8, "head_dim": 64, "seqlen": [2, 3]}]})", "t.json");
  REQUIRE(twice.ok());
  CHECK(seqlens_q(twice->problems) == std::vector<int>{1, 2, 3});
}

TEST_CASE("sweep: name, description and the candidate space", "[tune][sweep]") {
  auto s = parse_sweep(R"({"description": "d", "problems": [{"heads_q": 8, "head_dim": 128, "seqlen": 64}],
                           "candidates": {"algorithm": ["fa3", "fa2"], "block_n": {"from": 64, "to": 128, "step": 32},
                                          "stages": 2, "warps": [1, 2]}})",
                       "dir/my_sweep.json");
  REQUIRE(s.ok());
  CHECK(s->name == "my_sweep");  // the file's stem unless "name" is given
  CHECK(s->description == "d");
  CHECK(s->candidates.algorithms == std::vector<Algorithm>{Algorithm::fa3, Algorithm::fa2});
  CHECK(s->candidates.block_n == std::vector<int>{64, 96, 128});
  CHECK(s->candidates.stages == std::vector<int>{2});
  CHECK(s->candidates.warps == std::vector<int>{1, 2});
  CHECK(s->candidates.block_m.empty());
  auto named = parse_sweep(R"({"name": "n", "problems": [{"heads_q": 8, "head_dim": 128, "seqlen": 64}]})", "x.json");
  REQUIRE(named.ok());
  CHECK(named->name == "n");
  CHECK(named->candidates == flashjit::tune::CandidateSpace{});
}

TEST_CASE("sweep: errors name the entry and the field", "[tune][sweep]") {
  const std::string ok_entry = R"({"heads_q": 8, "head_dim": 64, "seqlen": 64})";
  auto in_second = [&](const std::string& entry) { return R"({"problems": [)" + ok_entry + ", " + entry + "]}"; };
  struct Case {
    std::string text;
    std::vector<std::string> parts;  // all in the message
  };
  const Case cases[] = {
      {"{", {"bad.json", "not valid JSON"}},
      {"[]", {"must be a JSON object"}},
      {R"({"problem": []})", {"problem", "unknown field"}},
      {R"({"problems": []})", {"problems", "non-empty"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": 64, "seqlenq": 3})"), {"bad.json", "problems[1].seqlenq", "unknown field"}},
      {in_second(R"({"head_dim": 64, "seqlen": 64})"), {"problems[1].heads_q", "missing"}},
      {in_second(R"({"heads_q": 8, "seqlen": 64})"), {"problems[1].head_dim", "missing"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64})"), {"problems[1].seqlen_q", "missing"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen_q": 4})"), {"problems[1].seqlen_k", "missing"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": 4, "seqlen_k": 4})"), {"problems[1].seqlen", "not both"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": "long"})"), {"problems[1].seqlen", "expected an integer"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": [64, 1.5]})"), {"problems[1].seqlen[1]", "expected an integer"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": []})"), {"problems[1].seqlen", "empty"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": {"from": 9, "to": 3}})"), {"problems[1].seqlen", "greater"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": {"from": 1, "to": 3, "step": 0}})"), {"problems[1].seqlen.step"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": {"from": 1, "to": 3, "factor": 1}})"), {"problems[1].seqlen", "factor"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": {"from": 1, "to": 9, "step": 1, "factor": 2}})"), {"not both"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": {"from": 1}})"), {"problems[1].seqlen", "\"to\""}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": {"from": 1, "to": 100000000}})"), {"problems[1].seqlen", "more than"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": {"value": [1]}})"), {"problems[1].seqlen", "expected an integer, a list"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": 64, "dtype": "fp32"})"), {"problems[1].dtype", "fp32", "bf16"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": 64, "mask": ["none", "diagonal"]})"), {"problems[1].mask[1]", "diagonal"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": 64, "window_left": 4})"), {"problems[1].window_left", "sliding_window"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": 64, "chunk_size": 4, "mask": "causal"})"), {"problems[1].chunk_size"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": 64, "page_size": [16, 24]})"), {"problems[1]", "page_size", "power of two in [1, 256]"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": 64, "mask": "chunked"})"), {"problems[1].chunk_size", ">= 1"}},
      {in_second(R"({"heads_q": 8, "heads_kv": [2, 3], "head_dim": 64, "seqlen": 64})"), {"problems[1].heads_kv", "multiple"}},
      {in_second(R"({"heads_q": 8, "head_dim": 60, "seqlen": 64})"), {"problems[1].head_dim", "multiple of 8"}},
      {in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": 64, "batch": 0})"), {"problems[1].batch", ">= 1"}},
      {in_second("7"), {"problems[1]", "object"}},
      {R"({"problems": [)" + ok_entry + R"(], "candidates": {"algorithm": "auto"}})", {"candidates.algorithm", "auto"}},
      {R"({"problems": [)" + ok_entry + R"(], "candidates": {"block_n": [64, "x"]}})", {"candidates.block_n[1]"}},
      {R"({"problems": [)" + ok_entry + R"(], "candidates": {"tile": 3}})", {"candidates.tile", "unknown field"}},
      {R"({"problems": [)" + ok_entry + R"(], "name": 3})", {"name", "string"}},
  };
  for (const auto& c : cases) {
    const std::string message = error_of(c.text);
    INFO(c.text << "\n-> " << message);
    for (const auto& part : c.parts) CHECK(contains(message, part));
  }
  CHECK(contains(error_of(in_second(R"({"heads_q": 8, "head_dim": 64, "seqlen": 64, "mask": "chunked"})")), "sweep bad.json: "));
}

// The decode problems of a sweep with one decode entry whose other fields are `fields`.
std::vector<DecodeShape> expand_decode(const std::string& fields) {
  auto s = parse_sweep(R"({"problems": [{"kind": "decode", "heads_q": 32, "heads_kv": 8, "head_dim": 128, )" + fields +
                           "}]}",
                       "t.json");
  INFO(fields);
  if (!s.ok()) INFO(s.error().to_string());
  REQUIRE(s.ok());
  CHECK(s->problems.empty());
  return s->decode;
}

TEST_CASE("sweep: decode problems", "[tune][sweep][decode]") {
  // Defaults: bf16, batch 1, q_len 1, contiguous, no window.
  auto one = expand_decode(R"("seqlen_k": 4096)");
  REQUIRE(one.size() == 1);
  CHECK(one[0] == DecodeShape{DType::bf16, 1, 1, 32, 8, 128, 4096, KvLayout::contiguous, 0, -1});
  CHECK(flashjit::tune::describe(one[0]) == "decode bf16 B1 q1 Sk4096 H32/8 D128 contiguous");

  // Cross product: dtype, layout, batch, q_len, heads, head_dim, page_size, window_left, then seqlen_k fastest.
  auto grid = expand_decode(R"("seqlen_k": {"from": 1024, "to": 4096, "factor": 2}, "batch": [1, 8], "q_len": [1, 4],
                               "dtype": ["bf16", "fp16"], "window_left": [-1, 256])");
  REQUIRE(grid.size() == 3 * 2 * 2 * 2 * 2);
  CHECK(grid[0].seqlen_k == 1024);
  CHECK(grid[1].seqlen_k == 2048);
  CHECK(grid[3].window_left == 256);
  CHECK(grid[6].q_len == 4);
  CHECK(grid[12].batch == 8);
  CHECK(grid[24].dtype == DType::fp16);
  CHECK(flashjit::tune::describe(grid[3]) == "decode bf16 B1 q1 Sk1024 H32/8 D128 contiguous window256");

  // page_size applies to the paged layout only: contiguous x page sizes collapse to one problem.
  auto layouts = expand_decode(R"("seqlen_k": 8192, "layout": ["contiguous", "paged"], "page_size": [16, 64])");
  REQUIRE(layouts.size() == 3);
  CHECK(layouts[0].layout == KvLayout::contiguous);
  CHECK(layouts[0].page_size == 0);
  CHECK(layouts[1].layout == KvLayout::paged);
  CHECK(layouts[1].page_size == 16);
  CHECK(layouts[2].page_size == 64);
  CHECK(flashjit::tune::describe(layouts[2]) == "decode bf16 B1 q1 Sk8192 H32/8 D128 paged64");

  // The problem the planner sees: max_seqlen_k and a page table for the longest sequence.
  const flashjit::DecodeProblem p = flashjit::tune::to_problem(layouts[2]);
  CHECK(p.max_seqlen_k == 8192);
  CHECK(p.layout == KvLayout::paged);
  CHECK(p.page_size == 64);
  CHECK(p.max_pages_per_seq == 128);
  CHECK(p.heads_q == 32);
  CHECK(flashjit::tune::to_problem(one[0]).cache_seqlen == 4096);

  // Prefill and decode entries mix; "kind": "prefill" is the default spelled out; duplicates appear once.
  auto mixed = parse_sweep(R"({"problems": [
      {"kind": "prefill", "heads_q": 8, "head_dim": 64, "seqlen": 128},
      {"kind": "decode", "heads_q": 8, "head_dim": 64, "seqlen_k": [512, 1024]},
      {"heads_q": 8, "head_dim": 64, "seqlen": [128, 256]},
      {"kind": "decode", "heads_q": 8, "head_dim": 64, "seqlen_k": [1024, 2048]}]})", "m.json");
  REQUIRE(mixed.ok());
  CHECK(seqlens_q(mixed->problems) == std::vector<int>{128, 256});
  REQUIRE(mixed->decode.size() == 3);
  CHECK(mixed->decode[0].seqlen_k == 512);
  CHECK(mixed->decode[2].seqlen_k == 2048);
  CHECK(mixed->decode[0].heads_kv == 8);  // MHA unless heads_kv is given
}

TEST_CASE("sweep: decode errors name the entry and the field", "[tune][sweep][decode]") {
  const std::string ok_entry = R"({"heads_q": 8, "head_dim": 64, "seqlen": 64})";
  auto in_second = [&](const std::string& fields) {
    return R"({"problems": [)" + ok_entry + R"(, {"kind": "decode", )" + fields + "}]}";
  };
  const std::string base = R"("heads_q": 32, "heads_kv": 8, "head_dim": 128, "seqlen_k": 1024)";
  struct Case {
    std::string text;
    std::vector<std::string> parts;
  };
  const Case cases[] = {
      {R"({"problems": [{"kind": "encode", "heads_q": 8, "head_dim": 64, "seqlen": 64}]})", {"problems[0].kind", "encode", "prefill, decode"}},
      {R"({"problems": [{"kind": ["decode"], "heads_q": 8, "head_dim": 64, "seqlen": 64}]})", {"problems[0].kind"}},
      {in_second(base + R"(, "mask": "causal")"), {"bad.json", "problems[1].mask", "unknown field", "seqlen_k"}},
      {in_second(base + R"(, "seqlen_q": 1)"), {"problems[1].seqlen_q", "unknown field"}},
      {in_second(R"("heads_q": 32, "head_dim": 128)"), {"problems[1].seqlen_k", "missing"}},
      {in_second(R"("head_dim": 128, "seqlen_k": 64)"), {"problems[1].heads_q", "missing"}},
      {in_second(R"("heads_q": 8, "seqlen_k": 64)"), {"problems[1].head_dim", "missing"}},
      {in_second(base + R"(, "q_len": 17)"), {"problems[1].q_len", "[1, 16]"}},
      {in_second(base + R"(, "q_len": [1, 0])"), {"problems[1].q_len", "[1, 16]"}},
      {in_second(R"("heads_q": 32, "heads_kv": 1, "head_dim": 128, "seqlen_k": 64, "q_len": 8)"), {"problems[1].q_len", "128"}},
      {in_second(R"("heads_q": 32, "heads_kv": 6, "head_dim": 128, "seqlen_k": 64)"), {"problems[1].heads_kv", "multiple"}},
      {in_second(R"("heads_q": 32, "head_dim": 72, "seqlen_k": 64)"), {"problems[1].head_dim", "multiple of 16"}},
      {in_second(R"("heads_q": 32, "head_dim": 128, "seqlen_k": 0)"), {"problems[1].seqlen_k", ">= 1"}},
      {in_second(R"("heads_q": 32, "head_dim": 128, "seqlen_k": "4k")"), {"problems[1].seqlen_k", "expected an integer"}},
      {in_second(base + R"(, "batch": 0)"), {"problems[1].batch", ">= 1"}},
      {in_second(base + R"(, "layout": "ring")"), {"problems[1].layout", "ring", "contiguous, paged"}},
      {in_second(base + R"(, "layout": "paged")"), {"problems[1].page_size", "missing", "paged"}},
      {in_second(base + R"(, "page_size": 16)"), {"problems[1].page_size", "only applies to the paged layout"}},
      {in_second(base + R"(, "layout": "paged", "page_size": [16, 24])"), {"problems[1].page_size", "power of two"}},
      {in_second(base + R"(, "layout": "paged", "page_size": 512)"), {"problems[1].page_size", "256"}},
      {in_second(base + R"(, "window_left": -2)"), {"problems[1].window_left", "-1"}},
      {in_second(base + R"(, "dtype": "fp8")"), {"problems[1].dtype", "fp8"}},
  };
  for (const auto& c : cases) {
    const std::string message = error_of(c.text);
    INFO(c.text << "\n-> " << message);
    for (const auto& part : c.parts) CHECK(contains(message, part));
  }
}

TEST_CASE("sweep: the shipped configs", "[tune][sweep]") {
  const std::filesystem::path dir = std::filesystem::path(FLASHJIT_SOURCE_DIR) / "configs";
  auto llama = load_sweep(dir / "llama3.json");
  REQUIRE(llama.ok());
  REQUIRE(llama->problems.size() == 22);
  for (const auto& p : llama->problems) {
    CHECK(p.dtype == DType::bf16);
    CHECK(p.head_dim == 128);
    CHECK(p.heads_q == 32);
    CHECK(p.heads_kv == 8);
    CHECK(p.batch == 1);
    CHECK(p.seqlen_q == p.seqlen_k);
  }
  CHECK(llama->problems.front().seqlen_q == 32);
  CHECK(llama->problems[10].seqlen_q == 16384);
  CHECK(llama->problems[11].mask == MaskKind::causal);

  auto paper = load_sweep(dir / "fa3_paper.json");
  REQUIRE(paper.ok());
  REQUIRE(paper->problems.size() == 6);
  for (const auto& p : paper->problems) {
    CHECK(p.heads_q * p.head_dim == 2048);
    CHECK(p.seqlen_q == 16384);
  }

  auto decode = load_sweep(dir / "decode.json");
  REQUIRE(decode.ok());
  CHECK(decode->problems.empty());
  // The B x Sk grid (contiguous), then the three headline shapes contiguous, paged 16 and paged 64, then B16 Sk 8k
  // again fused with an append.
  REQUIRE(decode->decode.size() == 6 * 7 + 3 * 3 + 3);
  for (const auto& p : decode->decode) {
    CHECK(p.dtype == DType::bf16);
    CHECK(p.q_len == 1);
    CHECK(p.heads_q == 32);
    CHECK(p.heads_kv == 8);
    CHECK(p.head_dim == 128);
    CHECK(p.window_left == -1);
  }
  for (std::size_t i = 0; i < 42; ++i) {
    const auto& p = decode->decode[i];
    CHECK(p.layout == KvLayout::contiguous);
    CHECK(p.seqlen_k == (32 << (i % 7)));
    CHECK(p.batch == std::vector<int>{4, 16, 32, 64, 128, 256}[i / 7]);
  }
  const std::vector<std::pair<int, int>> headline = {{1, 32768}, {64, 16384}, {16, 8192}};
  for (std::size_t h = 0; h < 3; ++h)
    for (std::size_t k = 0; k < 3; ++k) {
      const auto& p = decode->decode[42 + 3 * h + k];
      CHECK(p.batch == headline[h].first);
      CHECK(p.seqlen_k == headline[h].second);
      CHECK(p.layout == (k == 0 ? KvLayout::contiguous : KvLayout::paged));
      CHECK(p.page_size == std::vector<int>{0, 16, 64}[k]);
      CHECK_FALSE(p.append);
    }
  for (std::size_t k = 0; k < 3; ++k) {
    auto fused = decode->decode[51 + k];
    CHECK(fused.append);
    fused.append = false;
    CHECK(fused == decode->decode[48 + k]);  // B16 Sk 8k, contiguous, paged 16, paged 64
  }
  // The append kernels of the same caches on their own.
  REQUIRE(decode->append.size() == 3);
  for (std::size_t k = 0; k < 3; ++k) {
    const auto& a = decode->append[k];
    CHECK(a.dtype == DType::bf16);
    CHECK(a.heads_kv == 8);
    CHECK(a.head_dim == 128);
    CHECK(a.layout == (k == 0 ? KvLayout::contiguous : KvLayout::paged));
    CHECK(a.page_size == std::vector<int>{0, 16, 64}[k]);
  }

  auto missing = load_sweep(dir / "no_such_sweep.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::io);
}

// Issue 29: deep nesting crashed the error's dump(); an unbounded candidate space hung precompile; integers past
// INT64_MAX read as negative.
TEST_CASE("sweep: hostile files are refused quickly", "[tune][sweep]") {
  const std::string deep = std::string(70000, '[') + std::string(70000, ']');
  CHECK(contains(error_of(R"({"problems": [{"heads_q": )" + deep + "}]}"), "nested deeper than"));
  CHECK(contains(error_of(R"({"problems": )" + deep + "}"), "nested deeper than"));
  const std::string huge = R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": 128}], "candidates": {
    "block_n": {"from": 16, "to": 10000, "step": 16}, "stages": {"from": 1, "to": 5000},
    "warps": {"from": 1, "to": 9000}, "block_m": {"from": 1, "to": 9000}}})";
  CHECK(contains(error_of(huge), "candidates: the space holds up to"));
  // Found by the fuzz run: a number too large for a double threw out_of_range (not a parse_error) out of parse.
  flashjit::Result<flashjit::tune::Sweep> big = flashjit::Error();
  REQUIRE_NOTHROW(big = parse_sweep(R"({"problems": [{"heads_q": 1e9999}]})", "big.json"));
  REQUIRE_FALSE(big.ok());
  CHECK(contains(big.error().message, "not valid JSON"));
  CHECK(contains(error_of(R"({"problems": [{"heads_q": 8, "head_dim": 18446744073709551615, "seqlen": 128}]})"),
                 "18446744073709551615 is out of range"));
  // A space right at the limit still parses.
  auto ok = parse_sweep(R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": 128}],
                            "candidates": {"algorithm": "fa2", "block_n": [32, 64], "stages": [2, 3], "warps": [4, 8]}})",
                        "ok.json");
  CHECK(ok.ok());
}
