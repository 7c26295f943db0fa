// Tests of code generation and of the embedded templates: what the generated translation unit contains, and
// that every include resolves to an embedded template (NVRTC never reads a file, never needs the toolkit's
// headers).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/embedded_templates.hpp"
#include "codegen/generate.hpp"
#include "dispatch/heuristics.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::DType;
using flashjit::ErrorCode;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using flashjit::codegen::embedded_templates;
using flashjit::codegen::generate;

using flashjit::test::contains;

namespace {


struct Include {
  bool angled;       // <...>
  std::string path;  // as written
};

// Every #include directive of a text (any spacing, "..." or <...>). Directives inside comments are not
// special-cased: the templates have none.
std::vector<Include> includes(const std::string& text) {
  static const std::regex re(R"(^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]*)[>"])", std::regex::multiline);
  std::vector<Include> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back({(*it)[1] == "<", (*it)[2]});
  return out;
}

// Lines that mention #include at all (to catch forms the regex above would miss, e.g. macro includes).
int include_lines(const std::string& text) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    auto p = line.find_first_not_of(" \t");
    if (p != std::string::npos && line[p] == '#' && contains(line, "include")) ++n;
  }
  return n;
}

std::set<std::string> embedded_names() {
  std::set<std::string> names;
  for (const auto& t : embedded_templates()) names.insert(t.name);
  return names;
}

// The heuristic and reference configs (only the valid ones: the validity of the heuristic's configs is the
// dispatch tests' business).
std::vector<KernelConfig> sample_configs() {
  std::vector<KernelConfig> out;
  for (MaskKind m : {MaskKind::none, MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked,
                     MaskKind::chunked_causal})
    for (DType t : {DType::bf16, DType::fp16}) {
      for (int d : {64, 96, 128, 256})
        for (Arch a : {Arch{90, true}, Arch{80, false}}) {
          auto c = flashjit::dispatch::fa2_heuristic(t, d, m, a);
          if (validate(c).empty()) out.push_back(c);
        }
      for (int d : {40, 64, 128, 256}) out.push_back(flashjit::dispatch::naive_config(t, d, m, Arch{90, true}));
      for (int d : {64, 128, 256}) out.push_back(flashjit::dispatch::fa3_heuristic(t, d, m, Arch{90, true}));
    }
  return out;
}

}  // namespace

TEST_CASE("generate: the source of a fa2 config", "[codegen]") {
  KernelConfig c;
  c.algorithm = Algorithm::fa2;
  c.arch = Arch{90, true};
  c.dtype = DType::bf16;
  c.head_dim = 128, c.block_m = 128, c.block_n = 64, c.stages = 2, c.warps = 8;
  c.mask = MaskKind::causal;
  REQUIRE(validate(c).empty());
  auto g = generate(c);
  REQUIRE(g.ok());
  const std::string& text = g->text;
  INFO(text);
  CHECK(g->name == "fa2_bf16_d128_bm128_bn64_s2_w8_causal_sm90a");
  CHECK(g->entry == "flashjit_fa2_bf16_d128_bm128_bn64_s2_w8_causal_sm90a");
  CHECK(contains(text, "extern \"C\" __global__"));
  CHECK(contains(text, g->entry + "(const __grid_constant__ flashjit::AttentionParams params)"));
  CHECK(contains(text, "// config: " + to_json(c) + "\n"));
  CHECK(contains(text, "#include \"fa2/kernel.cuh\""));
  CHECK_FALSE(contains(text, "reference/kernel.cuh"));
  CHECK(contains(text, "flashjit::fa2::Kernel<"));
  CHECK(contains(text, "/*element=*/flashjit::bf16"));
  CHECK(contains(text, "/*head_dim=*/128"));
  CHECK(contains(text, "/*block_m=*/128"));
  CHECK(contains(text, "/*block_n=*/64"));
  CHECK(contains(text, "/*stages=*/2"));
  CHECK(contains(text, "/*warps=*/8"));
  CHECK(contains(text, "/*mask=*/flashjit::MaskKind::causal"));
  CHECK(contains(text, fmt::format("static_assert(Kernel::kSmemBytes == {},", shared_memory_bytes(c))));
  CHECK(contains(text, "static_assert(Kernel::kThreads == 256,"));
  CHECK(contains(text, "__launch_bounds__(256, 1)"));
  CHECK(contains(text, FLASHJIT_VERSION));
}

TEST_CASE("generate: the source of a naive config", "[codegen]") {
  KernelConfig c;
  c.algorithm = Algorithm::naive;
  c.arch = Arch{80, false};
  c.dtype = DType::fp16;
  c.head_dim = 40, c.block_m = 1, c.block_n = 128, c.stages = 1, c.warps = 4;
  c.mask = MaskKind::sliding_window;
  REQUIRE(validate(c).empty());
  auto g = generate(c);
  REQUIRE(g.ok());
  const std::string& text = g->text;
  INFO(text);
  CHECK(g->name == "naive_fp16_d40_w4_sliding_window_sm80");
  CHECK(g->entry == "flashjit_naive_fp16_d40_w4_sliding_window_sm80");
  CHECK(contains(text, g->entry + "("));
  CHECK(contains(text, "// config: " + to_json(c) + "\n"));
  CHECK(contains(text, "#include \"reference/kernel.cuh\""));
  CHECK_FALSE(contains(text, "fa2/kernel.cuh"));
  CHECK(contains(text, "flashjit::reference::Kernel<"));
  CHECK(contains(text, "/*element=*/flashjit::fp16"));
  CHECK(contains(text, "/*head_dim=*/40"));
  CHECK(contains(text, "/*threads=*/128"));
  CHECK(contains(text, "/*mask=*/flashjit::MaskKind::sliding_window"));
  CHECK(contains(text, fmt::format("static_assert(Kernel::kSmemBytes == {},", (128 + 64 + 40) * 4)));
  CHECK(contains(text, "static_assert(Kernel::kThreads == 128,"));
}

TEST_CASE("generate: every sample config names its entry, embeds its JSON and asserts its resources",
          "[codegen]") {
  std::set<std::string> texts, entries;
  const auto configs = sample_configs();
  REQUIRE(configs.size() >= 5 * 2 * (4 + 3 + 4 + 3));  // fa2 sm_90a d64-256, sm_80 d64-128, naive, fa3
  for (const auto& c : configs) {
    auto g = generate(c);
    INFO(readable_name(c));
    CHECK(g.ok());
    if (!g.ok()) continue;
    CHECK(g->name == readable_name(c));
    CHECK(g->entry == "flashjit_" + readable_name(c));
    CHECK(contains(g->text, "extern \"C\" __global__"));
    CHECK(contains(g->text, "\n" + g->entry + "("));
    CHECK(contains(g->text, "// config: " + to_json(c) + "\n"));
    const char* header = c.algorithm == Algorithm::fa2   ? "#include \"fa2/kernel.cuh\""
                         : c.algorithm == Algorithm::fa3 ? "#include \"fa3/kernel.cuh\""
                                                         : "#include \"reference/kernel.cuh\"";
    CHECK(contains(g->text, header));
    CHECK(contains(g->text, fmt::format("static_assert(Kernel::kSmemBytes == {},", shared_memory_bytes(c))));
    CHECK(contains(g->text, fmt::format("static_assert(Kernel::kThreads == {},", threads_per_cta(c))));
    CHECK(contains(g->text, std::string("/*mask=*/flashjit::MaskKind::") + to_string(c.mask)));
    // Deterministic.
    auto again = generate(c);
    REQUIRE(again.ok());
    CHECK(again->text == g->text);
    texts.insert(g->text);
    entries.insert(g->entry);
  }
  CHECK(texts.size() == configs.size());  // also fails when some config did not generate
  CHECK(entries.size() == configs.size());
}

TEST_CASE("generate: varlen is a template argument of every kernel, and part of the name", "[codegen][varlen]") {
  for (KernelConfig c : {flashjit::dispatch::fa2_heuristic(DType::bf16, 128, MaskKind::causal, Arch{80, false}),
                         flashjit::dispatch::fa3_heuristic(DType::fp16, 64, MaskKind::none, Arch{90, true}),
                         flashjit::dispatch::naive_config(DType::bf16, 40, MaskKind::chunked, Arch{90, true})}) {
    INFO(readable_name(c));
    // fa3 has pack_gqa after varlen; every kernel then page_size.
    const std::string after = c.algorithm == flashjit::Algorithm::fa3 ? ", /*pack_gqa=*/false, /*page_size=*/0>"
                              : c.algorithm == flashjit::Algorithm::fa2 ? ",\n    /*page_size=*/0>"
                                                                        : ", /*page_size=*/0>";
    auto fixed = generate(c);
    REQUIRE(fixed.ok());
    CHECK(contains(fixed->text, "/*varlen=*/false" + after));
    c.varlen = true;
    auto varlen = generate(c);
    REQUIRE(varlen.ok());
    CHECK(contains(varlen->text, "/*varlen=*/true" + after));
    CHECK(contains(varlen->text, "// config: " + to_json(c) + "\n"));
    CHECK(contains(varlen->name, "_varlen_"));
    CHECK(varlen->entry == "flashjit_" + varlen->name);
    CHECK(varlen->name != fixed->name);
  }
}

TEST_CASE("generate: fa3's pack_gqa is a template argument after varlen, and part of the name", "[codegen]") {
  KernelConfig c = flashjit::dispatch::fa3_heuristic(DType::bf16, 64, MaskKind::sliding_window, Arch{90, true});
  c.pack_gqa = true, c.varlen = true;
  auto packed = generate(c);
  REQUIRE(packed.ok());
  CHECK(contains(packed->text, "/*varlen=*/true, /*pack_gqa=*/true, /*page_size=*/0>"));
  CHECK(contains(packed->name, "_packgqa_varlen_"));
  CHECK(contains(packed->text, R"("pack_gqa":true)"));  // in the config JSON, so the cache key
  c.alibi = true;  // ALiBi reads one head per tile: refused, naming the field
  auto refused = generate(c);
  REQUIRE_FALSE(refused.ok());
  CHECK(contains(refused.error().message, "pack_gqa"));
}

TEST_CASE("generate: page_size is a template argument of every kernel, in the name and the config JSON only when set",
          "[codegen][paged]") {
  for (KernelConfig c : {flashjit::dispatch::fa2_heuristic(DType::bf16, 128, MaskKind::causal, Arch{80, false}),
                         flashjit::dispatch::fa3_heuristic(DType::bf16, 128, MaskKind::causal, Arch{90, true}),
                         flashjit::dispatch::naive_config(DType::fp16, 40, MaskKind::none, Arch{90, true})}) {
    INFO(readable_name(c));
    auto contiguous = generate(c);
    REQUIRE(contiguous.ok());
    CHECK_FALSE(contains(contiguous->name, "_paged"));
    CHECK_FALSE(contains(to_json(c), "page_size"));  // sparse: the cache keys of contiguous kernels stay
    c.varlen = true, c.page_size = 16;
    auto paged = generate(c);
    REQUIRE(paged.ok());
    CHECK(contains(paged->text, "/*page_size=*/16>"));
    CHECK(contains(paged->name, "_varlen_paged16_"));
    CHECK(contains(paged->text, R"("page_size":16)"));
    c.page_size = 24;  // not a power of two: refused, naming the field
    auto refused = generate(c);
    REQUIRE_FALSE(refused.ok());
    CHECK(contains(refused.error().message, "page_size"));
  }
}

TEST_CASE("generate: variants are a template argument after varlen only when on, and part of the name",
          "[codegen][variant]") {
  for (KernelConfig c : {flashjit::dispatch::fa2_heuristic(DType::bf16, 128, MaskKind::causal, Arch{80, false}),
                         flashjit::dispatch::fa3_heuristic(DType::fp16, 64, MaskKind::none, Arch{90, true}),
                         flashjit::dispatch::naive_config(DType::bf16, 40, MaskKind::chunked, Arch{90, true})}) {
    INFO(readable_name(c));
    auto plain = generate(c);
    REQUIRE(plain.ok());
    CHECK_FALSE(contains(plain->text, "Variant"));
    c.softcap = true, c.sinks = true;
    auto with = generate(c);
    REQUIRE(with.ok());
    const std::string before = "/*page_size=*/0";
    CHECK(contains(with->text, before + ",\n    /*variant=*/flashjit::Variant</*softcap=*/true, /*alibi=*/false, "
                                        "/*sinks=*/true>>;"));
    CHECK(contains(with->name, "_softcap_sinks_"));
    CHECK(contains(with->text, "// config: " + to_json(c) + "\n"));
  }
}

TEST_CASE("generate: snippets sit in flashjit_user under #line directives that name them, then the file's lines",
          "[codegen][variant]") {
  KernelConfig c = flashjit::dispatch::fa3_heuristic(DType::bf16, 128, MaskKind::causal, Arch{90, true});
  c.score_mod = "__device__ float score_mod(float s, int, int, int, int, const flashjit::ModContext&) {\n  return s;\n}";
  c.mask_mod = "__device__ bool mask_mod(int, int, int q, int k, const flashjit::ModContext&) { return k <= q; }\n";
  auto g = generate(c);
  REQUIRE(g.ok());
  const std::string& t = g->text;
  CHECK(contains(t, "namespace flashjit_user {\n#line 1 \"score_mod\"\n" + c.score_mod + "\n#line 1 \"mask_mod\"\n" +
                        c.mask_mod + "}  // namespace flashjit_user\n"));
  CHECK(contains(t, "/*score_mod=*/flashjit_score_mod, /*mask_mod=*/flashjit_mask_mod>>;"));
  CHECK(contains(t, "return flashjit_user::score_mod(score, b, h, q_idx, kv_idx, ctx);"));
  CHECK(contains(t, "return flashjit_user::mask_mod(b, h, q_idx, kv_idx, ctx);"));
  CHECK(contains(g->name, "_smod"));
  CHECK(contains(g->name, "_mmod"));
  // The directive after the snippets gives the next line its real number in the file NVRTC compiles.
  const std::string file = g->name + ".cu";
  const auto at = t.find("#line ", t.find("}  // namespace flashjit_user"));
  REQUIRE(at != std::string::npos);
  const int stated = std::stoi(t.substr(at + 6));
  const int actual = static_cast<int>(std::count(t.begin(), t.begin() + static_cast<long>(at), '\n')) + 2;
  CHECK(stated == actual);
  CHECK(t.substr(t.find('"', at) + 1, file.size()) == file);
  // Decode takes them the same way; without snippets no namespace at all.
  flashjit::DecodeKernelConfig d;
  d.score_mod = c.score_mod;
  auto gd = generate(d);
  REQUIRE(gd.ok());
  CHECK(contains(gd->text, "#line 1 \"score_mod\""));
  CHECK(contains(gd->text, "/*score_mod=*/flashjit_score_mod, /*mask_mod=*/flashjit::NoMod>>;"));
  d.score_mod.clear();
  auto plain = generate(d);
  REQUIRE(plain.ok());
  CHECK_FALSE(contains(plain->text, "flashjit_user"));
}

TEST_CASE("generate: an invalid config is invalid_config", "[codegen]") {
  KernelConfig c;
  SECTION("bad head_dim") { c.head_dim = 65; }
  SECTION("bad block_n") { c.block_n = 24; }
  SECTION("algorithm auto") { c.algorithm = Algorithm::automatic; }
  SECTION("algorithm fa3 on sm_80") {
    c.algorithm = Algorithm::fa3;
    c.arch = Arch{80, false};
  }
  SECTION("naive with fa2 tiles") { c.algorithm = Algorithm::naive; }
  SECTION("sm_80a") { c.arch = Arch{80, true}; }
  SECTION("over the shared memory limit") {
    c.arch = Arch{86, false};
    c.stages = 4;
  }
  INFO(to_json(c));
  REQUIRE(!validate(c).empty());
  auto g = generate(c);
  REQUIRE(!g.ok());
  CHECK(g.error().code == ErrorCode::invalid_config);
  CHECK(g.error().message == check(c).error().message);
}

TEST_CASE("embedded templates: unique .cuh names; relative paths; non-empty; #pragma once", "[codegen]") {
  const auto& ts = embedded_templates();
  REQUIRE(!ts.empty());
  std::set<std::string> names;
  for (const auto& t : ts) {
    REQUIRE(t.name != nullptr);
    REQUIRE(t.text != nullptr);
    const std::string name = t.name, text = t.text;
    INFO(name);
    CHECK(names.insert(name).second);
    CHECK(name.size() > 4);
    CHECK(name.ends_with(".cuh"));
    CHECK(!name.starts_with("/"));
    CHECK(!contains(name, ".."));
    CHECK(!contains(name, "\\"));
    CHECK(!text.empty());
    // Headers are included from several others (params.cuh by mask.cuh and the kernels).
    CHECK(contains(text, "#pragma once"));
  }
  for (const char* expected : {"fa2/kernel.cuh", "reference/kernel.cuh", "attention/mask.cuh",
                               "attention/params.cuh", "common/types.cuh"})
    CHECK(names.count(expected) == 1);
}

TEST_CASE("embedded templates are the files under templates/", "[codegen]") {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(FLASHJIT_SOURCE_DIR) / "templates";
  REQUIRE(fs::is_directory(root));
  std::map<std::string, std::string> on_disk;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || e.path().extension() != ".cuh") continue;
    std::ifstream in(e.path(), std::ios::binary);
    on_disk[fs::relative(e.path(), root).generic_string()] =
        std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::map<std::string, std::string> embedded;
  for (const auto& t : embedded_templates()) embedded[t.name] = t.text;
  std::set<std::string> disk_names, embedded_names_;
  for (const auto& [n, _] : on_disk) disk_names.insert(n);
  for (const auto& [n, _] : embedded) embedded_names_.insert(n);
  REQUIRE(disk_names == embedded_names_);
  for (const auto& [name, text] : on_disk) {
    INFO(name << " differs from its embedded copy (stale build?)");
    CHECK(embedded[name] == text);
  }
}

TEST_CASE("every include of the templates and of generated sources is an embedded template", "[codegen]") {
  const auto names = embedded_names();
  auto check_text = [&](const std::string& what, const std::string& text) {
    const auto incs = includes(text);
    INFO(what);
    // The regex saw every directive (no macro includes or odd spellings slipped by).
    CHECK(static_cast<int>(incs.size()) == include_lines(text));
    for (const auto& inc : incs) {
      INFO((inc.angled ? "<" : "\"") << inc.path << (inc.angled ? ">" : "\""));
      // No toolkit or system header at all: <cuda_bf16.h>, <cuda_fp16.h>, <cstdint>, <cuda/...>, ...
      CHECK_FALSE(inc.angled);
      CHECK(names.count(inc.path) == 1);
    }
  };
  SECTION("templates") {
    int total = 0;
    for (const auto& t : embedded_templates()) {
      check_text(t.name, t.text);
      total += static_cast<int>(includes(t.text).size());
    }
    CHECK(total > 0);  // the parser found the templates' own includes
  }
  SECTION("generated sources") {
    for (const auto& c : sample_configs()) {
      auto g = generate(c);
      INFO(readable_name(c));
      CHECK(g.ok());
      if (!g.ok()) continue;
      CHECK(includes(g->text).size() == 1);
      check_text(g->name, g->text);
    }
  }
  SECTION("the include scanner itself") {
    const std::string sample =
        "#include \"a/b.cuh\"\n  #  include <cuda_bf16.h>\n#include<cstdint>\n// not #include here\nint x;\n";
    auto incs = includes(sample);
    REQUIRE(incs.size() == 3);
    CHECK((!incs[0].angled && incs[0].path == "a/b.cuh"));
    CHECK((incs[1].angled && incs[1].path == "cuda_bf16.h"));
    CHECK((incs[2].angled && incs[2].path == "cstdint"));
    CHECK(include_lines(sample) == 3);
  }
}

TEST_CASE("the templates use no toolkit type headers by any spelling", "[codegen]") {
  // Belt and braces for the include check: no directive may name a toolkit header, even quoted.
  for (const auto& t : embedded_templates()) {
    for (const auto& inc : includes(t.text)) {
      INFO(t.name << " includes " << inc.path);
      CHECK_FALSE(inc.path.starts_with("cuda"));
      CHECK_FALSE(inc.path.ends_with(".h"));
      CHECK_FALSE(contains(inc.path, "cuda/"));
    }
  }
}

TEST_CASE("generate: block_sparse follows the variant (NoVariant without one) and names the kernel",
          "[codegen][block_sparse]") {
  for (KernelConfig c : {flashjit::dispatch::fa2_heuristic(DType::bf16, 128, MaskKind::causal, Arch{80, false}),
                         flashjit::dispatch::fa3_heuristic(DType::fp16, 64, MaskKind::none, Arch{90, true}),
                         flashjit::dispatch::naive_config(DType::bf16, 40, MaskKind::chunked, Arch{90, true})}) {
    INFO(readable_name(c));
    c.block_sparse = true;
    auto plain = generate(c);
    REQUIRE(plain.ok());
    CHECK(contains(plain->text, "/*page_size=*/0,\n    /*variant=*/flashjit::NoVariant,\n    /*block_sparse=*/true>;"));
    CHECK(contains(plain->name, "_bsparse_"));
    c.sinks = true;
    auto with = generate(c);
    REQUIRE(with.ok());
    CHECK(contains(with->text, "/*sinks=*/true>,\n    /*block_sparse=*/true>;"));
  }
}

TEST_CASE("generate: seqused_k names the variant and block_sparse before its flag, and the kernel",
          "[codegen][seqused]") {
  for (KernelConfig c : {flashjit::dispatch::fa2_heuristic(DType::bf16, 128, MaskKind::causal, Arch{80, false}),
                         flashjit::dispatch::fa3_heuristic(DType::fp16, 64, MaskKind::none, Arch{90, true}),
                         flashjit::dispatch::naive_config(DType::bf16, 40, MaskKind::chunked, Arch{90, true})}) {
    INFO(readable_name(c));
    auto off = generate(c);
    REQUIRE(off.ok());
    CHECK(!contains(off->text, "seqused_k"));
    CHECK(!contains(off->name, "_sequsedk"));
    c.seqused_k = true;
    auto plain = generate(c);
    REQUIRE(plain.ok());
    // fa3 names its bias_tma flag (after block_sparse) on the way.
    const std::string flags = c.algorithm == flashjit::Algorithm::fa3 ? "/*block_sparse=*/false, /*bias_tma=*/false,\n"
                                                                      : "/*block_sparse=*/false,\n";
    CHECK(contains(plain->text, "/*page_size=*/0,\n    /*variant=*/flashjit::NoVariant,\n    " + flags +
                                "    /*seqused_k=*/true>;"));
    CHECK(contains(plain->name, "_sequsedk_"));
    c.varlen = true, c.alibi = true;
    auto with = generate(c);
    REQUIRE(with.ok());
    CHECK(contains(with->text, "/*varlen=*/true"));
    CHECK(contains(with->text, "/*alibi=*/true"));
    CHECK(contains(with->text, ">,\n    " + flags + "    /*seqused_k=*/true>;"));
    CHECK(contains(with->name, "_varlen_alibi_sequsedk_"));
  }
}

TEST_CASE("generate: rel_bias names the snippets and the bias (none) before its flag, and the kernel",
          "[codegen][rel_bias]") {
  for (KernelConfig c : {flashjit::dispatch::fa2_heuristic(DType::bf16, 128, MaskKind::causal, Arch{80, false}),
                         flashjit::dispatch::fa3_heuristic(DType::fp16, 64, MaskKind::none, Arch{90, true}),
                         flashjit::dispatch::naive_config(DType::bf16, 40, MaskKind::chunked, Arch{90, true})}) {
    INFO(readable_name(c));
    c.rel_bias = true;
    auto plain = generate(c);
    REQUIRE(plain.ok());
    CHECK(contains(plain->text, "/*variant=*/flashjit::Variant</*softcap=*/false, /*alibi=*/false, /*sinks=*/false,\n"
                                "        /*score_mod=*/flashjit::NoMod, /*mask_mod=*/flashjit::NoMod, "
                                "/*bias=*/flashjit::BiasType::none, /*rel_bias=*/true>>;"));
    CHECK(contains(plain->name, "_relbias_"));
    c.bias = flashjit::BiasType::fp16, c.alibi = true;
    auto with = generate(c);
    REQUIRE(with.ok());
    CHECK(contains(with->text, "/*alibi=*/true"));
    CHECK(contains(with->text, "/*bias=*/flashjit::BiasType::fp16, /*rel_bias=*/true>>;"));
    CHECK(contains(with->name, "_alibi_biasfp16_relbias_"));
  }
}

TEST_CASE("generate: a block_mask kernel takes its mask and its mask_mod's wrapper", "[codegen][block_mask]") {
  flashjit::BlockMaskKernelConfig c;
  c.mask = MaskKind::sliding_window;
  auto plain = generate(c);
  REQUIRE(plain.ok());
  CHECK(contains(plain->text, "#include \"block_mask/kernel.cuh\""));
  CHECK(contains(plain->text, "/*mask=*/flashjit::MaskKind::sliding_window, /*mask_mod=*/flashjit::NoMod, /*warps=*/4>"));
  c.mask_mod = "__device__ bool mask_mod(int b, int h, int q, int k, const flashjit::ModContext&) { return q >= k; }\n";
  auto with = generate(c);
  REQUIRE(with.ok());
  CHECK(contains(with->text, "#line 1 \"mask_mod\""));
  CHECK(contains(with->text, "/*mask_mod=*/flashjit_mask_mod"));
  CHECK(contains(with->text, "struct flashjit_mask_mod {"));
}
