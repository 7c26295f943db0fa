// Tests of append problems in sweep files ("kind": "append"): defaults, the cross product and its order, the
// layout / page_size rule, duplicates, errors naming the entry and the field; and the "append" flag of decode
// problems (a decode fused with an append).
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "tune/sweep.hpp"

using flashjit::DType;
using flashjit::ErrorCode;
using flashjit::KvLayout;
using flashjit::tune::AppendShape;
using flashjit::tune::describe;
using flashjit::tune::parse_sweep;

namespace {

// The append problems of a sweep with one append entry whose other fields are `fields`.
std::vector<AppendShape> expand_append(const std::string& fields) {
  auto s = parse_sweep(R"({"problems": [{"kind": "append", )" + fields + "}]}", "t.json");
  INFO(fields);
  if (!s.ok()) INFO(s.error().to_string());
  REQUIRE(s.ok());
  CHECK(s->problems.empty());
  CHECK(s->decode.empty());
  return s->append;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("sweep: append problems", "[tune][sweep][append]") {
  // Defaults: bf16, contiguous.
  auto one = expand_append(R"("heads_kv": 8, "head_dim": 128)");
  REQUIRE(one.size() == 1);
  CHECK(one[0] == AppendShape{DType::bf16, 8, 128, KvLayout::contiguous, 0});
  CHECK(describe(one[0]) == "append bf16 H8 D128 contiguous");

  // Cross product: dtype, layout, heads_kv, head_dim, then page_size fastest; contiguous x page sizes is one
  // problem (page_size applies to the paged layout only).
  auto grid = expand_append(R"("dtype": ["bf16", "fp16"], "heads_kv": [1, 8], "head_dim": {"values": [64, 128]},
                               "layout": ["contiguous", "paged"], "page_size": [1, 16, 256])");
  REQUIRE(grid.size() == 2 * 2 * 2 * (1 + 3));
  CHECK(grid[0] == AppendShape{DType::bf16, 1, 64, KvLayout::contiguous, 0});
  CHECK(grid[1] == AppendShape{DType::bf16, 1, 128, KvLayout::contiguous, 0});
  CHECK(grid[4] == AppendShape{DType::bf16, 1, 64, KvLayout::paged, 1});
  CHECK(grid[5] == AppendShape{DType::bf16, 1, 64, KvLayout::paged, 16});
  CHECK(grid[7] == AppendShape{DType::bf16, 1, 128, KvLayout::paged, 1});
  CHECK(grid[16].dtype == DType::fp16);
  CHECK(describe(grid[6]) == "append bf16 H1 D64 paged256");

  // Repeated problems appear once, in order, across entries; append problems mix with the other kinds.
  auto mixed = parse_sweep(R"({"problems": [
      {"kind": "append", "heads_kv": 8, "head_dim": 128, "layout": "paged", "page_size": [16, 64]},
      {"heads_q": 8, "head_dim": 64, "seqlen": 128},
      {"kind": "decode", "heads_q": 8, "head_dim": 64, "seqlen_k": 512},
      {"kind": "append", "heads_kv": 8, "head_dim": 128, "layout": ["paged", "contiguous"], "page_size": [64, 32]}]})",
                           "m.json");
  REQUIRE(mixed.ok());
  CHECK(mixed->problems.size() == 1);
  CHECK(mixed->decode.size() == 1);
  REQUIRE(mixed->append.size() == 4);
  CHECK(mixed->append[1].page_size == 64);
  CHECK(mixed->append[2].page_size == 32);
  CHECK(mixed->append[3].layout == KvLayout::contiguous);
}

TEST_CASE("sweep: append errors name the entry and the field", "[tune][sweep][append]") {
  auto in_second = [](const std::string& fields) {
    return R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": 64}, {"kind": "append", )" + fields + "}]}";
  };
  const std::string base = R"("heads_kv": 8, "head_dim": 128)";
  struct Case {
    std::string text;
    std::vector<std::string> parts;
  };
  const Case cases[] = {
      {R"({"problems": [{"kind": "appendix", "heads_kv": 8, "head_dim": 64}]})",
       {"problems[0].kind", "'appendix'", "prefill, decode, append"}},
      {R"({"problems": [{"kind": ["append"], "heads_kv": 8, "head_dim": 64}]})", {"problems[0].kind", "a string"}},
      {in_second(base + R"(, "batch": 4)"), {"bad.json", "problems[1].batch", "unknown field"}},
      {in_second(base + R"(, "new_len": 1)"), {"problems[1].new_len", "unknown field"}},
      {in_second(base + R"(, "heads_q": 32)"), {"problems[1].heads_q", "unknown field"}},
      {in_second(base + R"(, "append": true)"), {"problems[1].append", "unknown field"}},
      {in_second(R"("head_dim": 128)"), {"problems[1].heads_kv", "missing"}},
      {in_second(R"("heads_kv": 8)"), {"problems[1].head_dim", "missing"}},
      {in_second(R"("heads_kv": 0, "head_dim": 128)"), {"problems[1].heads_kv", ">= 1"}},
      {in_second(R"("heads_kv": 8, "head_dim": [128, 100])"), {"problems[1].head_dim", "multiple of 8 in [8, 256]", "got 100"}},
      {in_second(R"("heads_kv": 8, "head_dim": 264)"), {"problems[1].head_dim", "got 264"}},
      {in_second(R"("heads_kv": 100000000, "head_dim": 256)"), {"problems[1].heads_kv", "2^30"}},
      {in_second(R"("heads_kv": "8", "head_dim": 128)"), {"problems[1].heads_kv", "expected an integer"}},
      {in_second(base + R"(, "dtype": "fp8")"), {"problems[1].dtype", "'fp8'", "bf16, fp16"}},
      {in_second(base + R"(, "layout": "ring")"), {"problems[1].layout", "'ring'", "contiguous, paged"}},
      {in_second(base + R"(, "layout": "paged")"), {"problems[1].page_size", "missing", "paged"}},
      {in_second(base + R"(, "page_size": 16)"), {"problems[1].page_size", "only applies to the paged layout"}},
      {in_second(base + R"(, "layout": "paged", "page_size": [16, 24])"), {"problems[1].page_size", "power of two", "got 24"}},
      {in_second(base + R"(, "layout": "paged", "page_size": 512)"), {"problems[1].page_size", "[1, 256]"}},
  };
  for (const auto& c : cases) {
    auto s = parse_sweep(c.text, "bad.json");
    INFO(c.text);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == ErrorCode::invalid_argument);
    INFO(s.error().message);
    CHECK(contains(s.error().message, "sweep bad.json: "));
    for (const auto& part : c.parts) CHECK(contains(s.error().message, part));
  }
}

TEST_CASE("sweep: decode problems fused with an append", "[tune][sweep][decode][append]") {
  auto s = parse_sweep(R"({"problems": [{"kind": "decode", "heads_q": 32, "heads_kv": 8, "head_dim": 128, "q_len": 2,
                                         "seqlen_k": [1024, 2048], "append": [false, true]}]})", "t.json");
  REQUIRE(s.ok());
  REQUIRE(s->decode.size() == 4);
  // append turns slower than the sizes: after the snippets, before batch.
  CHECK_FALSE(s->decode[1].append);
  CHECK(s->decode[2].append);
  CHECK(s->decode[2].seqlen_k == 1024);
  CHECK(describe(s->decode[2]) == "decode bf16 B1 q2 Sk1024 H32/8 D128 contiguous append");
  CHECK(describe(s->decode[0]) == "decode bf16 B1 q2 Sk1024 H32/8 D128 contiguous");
  // The problem the planner sees: q_len new rows per sequence to append first.
  CHECK(flashjit::tune::to_problem(s->decode[2]).new_len == 2);
  CHECK(flashjit::tune::to_problem(s->decode[0]).new_len == 0);

  for (const char* bad : {R"("append": 1)", R"("append": "yes")", R"("append": [])"}) {
    const std::string entry = R"({"kind": "decode", "heads_q": 8, "head_dim": 64, "seqlen_k": 64, )";
    auto e = parse_sweep(R"({"problems": [)" + entry + bad + "}]}", "bad.json");
    INFO(bad);
    REQUIRE_FALSE(e.ok());
    INFO(e.error().message);
    CHECK(contains(e.error().message, "problems[0].append"));
  }
  // A prefill problem has no append flag.
  auto prefill =
      parse_sweep(R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": 64, "append": true}]})", "bad.json");
  REQUIRE_FALSE(prefill.ok());
  CHECK(contains(prefill.error().message, "problems[0].append: unknown field"));
}
