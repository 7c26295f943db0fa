// Tests of what precompile compiles: the dispatcher's picks per problem and arch (deduplicated), the picks
// with each GPU's tuned tables, and the whole candidate space; for decode problems the planner's split kernel,
// the combine kernel when the keys are split, the merge kernel per (dtype, head dim, arch), all deduplicated;
// paged prefill problems their page sizes' kernels; for append problems and decodes fused with an append, the
// append kernels of every size class.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "dispatch/append_plan.hpp"
#include "dispatch/decode_heuristics.hpp"
#include "dispatch/heuristics.hpp"
#include "support/catch.hpp"
#include "tune/candidates.hpp"
#include "tune/precompile_plan.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using namespace flashjit::dispatch;
using namespace flashjit::tune;

namespace {

const Arch kSm90a{90, true};
const Arch kSm80{80, false};

Sweep llama_like() {
  auto s = parse_sweep(R"({"problems": [{"heads_q": 32, "heads_kv": 8, "head_dim": 128,
                                         "seqlen": [512, 4096], "mask": ["none", "causal"]}]})", "llama.json");
  REQUIRE(s.ok());
  return *s;
}

}  // namespace

TEST_CASE("precompile plan: the dispatcher's picks, once each", "[tune][plan]") {
  const Sweep sweep = llama_like();
  const auto plan = precompile_plan(sweep, {kSm90a}, {}, false);
  REQUIRE(plan.configs.size() == 2);  // one kernel per mask serves every length
  CHECK(plan.configs[0] == *flashjit::dispatch::choose(to_problem(sweep.problems[0]), kSm90a));
  CHECK(plan.configs[1].mask == MaskKind::causal);
  const auto two_archs = precompile_plan(sweep, {kSm90a, kSm80}, {}, false);
  REQUIRE(two_archs.configs.size() == 4);
  CHECK(two_archs.configs[2].algorithm == Algorithm::fa2);
  CHECK(two_archs.configs[2].arch == kSm80);
}

TEST_CASE("precompile plan: tuned picks of every GPU of the arch", "[tune][plan]") {
  const Sweep sweep = llama_like();
  KernelConfig tuned = *flashjit::dispatch::choose(to_problem(sweep.problems[1]), kSm90a);
  tuned.block_n = 144;
  TunedEntry e;
  e.problem = sweep.problems[1];
  e.best = tuned;
  TunedTables tables;
  REQUIRE(tables.add(TunedTable{system_stamp("NVIDIA H200", kSm90a, 0), "llama", {e}}, "t.json"));
  const auto plan = precompile_plan(sweep, {kSm90a}, tables, false);
  REQUIRE(plan.configs.size() == 3);
  CHECK(std::find(plan.configs.begin(), plan.configs.end(), tuned) != plan.configs.end());
  CHECK(precompile_plan(sweep, {kSm80}, tables, false).configs.size() == 2);  // the table is for sm_90a
}

TEST_CASE("precompile plan: all candidates", "[tune][plan]") {
  const Sweep sweep = llama_like();
  const auto plan = precompile_plan(sweep, {kSm90a}, {}, true);
  const auto per_mask = enumerate(sweep.problems[0], sweep.candidates, kSm90a);
  CHECK(plan.configs.size() == 2 * per_mask.valid.size());
  CHECK(plan.invalid == static_cast<int>(2 * per_mask.invalid.size()));
  for (const auto& c : plan.configs) CHECK(validate(c).empty());
}

namespace {

// The split kernels prepare_decode loads for each decode problem of the sweep, distinct.
std::vector<flashjit::DecodeKernelConfig> prepare_kernels(const Sweep& sweep, const flashjit::Arch& arch, int sms) {
  std::vector<flashjit::DecodeKernelConfig> out;
  for (const auto& shape : sweep.decode)
    for (const auto& c : flashjit::dispatch::decode_prepare_kernels(to_problem(shape), arch, sms))
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

// Whether `list` holds each of `wanted` exactly once and nothing else.
bool contains_each_once(const std::vector<flashjit::DecodeKernelConfig>& list,
                        const std::vector<flashjit::DecodeKernelConfig>& wanted) {
  if (list.size() != wanted.size()) return false;
  for (const auto& c : wanted)
    if (std::count(list.begin(), list.end(), c) != 1) return false;
  return true;
}

Sweep decode_sweep(const std::string& entries) {
  auto s = parse_sweep(R"({"problems": [)" + entries + "]}", "decode.json");
  if (!s.ok()) INFO(s.error().to_string());
  REQUIRE(s.ok());
  return *s;
}

}  // namespace

TEST_CASE("precompile plan: decode problems give their split, combine and merge kernels", "[tune][plan][decode]") {
  using flashjit::CombineKernelConfig;
  using flashjit::DecodeKernelConfig;
  using flashjit::KvLayout;
  namespace dispatch = flashjit::dispatch;
  // B1 over 32k keys: 8 KV heads leave SMs idle, so the keys are split (combine kernel); B256 fills the GPU in
  // one split, with two stages instead of three (more CTAs than SMs). Paged caches take other kernels.
  const Sweep sweep = decode_sweep(R"({"kind": "decode", "heads_q": 32, "heads_kv": 8, "head_dim": 128,
                                       "batch": [1, 256], "seqlen_k": 32768, "layout": ["contiguous", "paged"],
                                       "page_size": 16})");
  REQUIRE(sweep.decode.size() == 4);
  const auto plan = precompile_plan(sweep, {kSm90a}, {}, false);
  CHECK(plan.configs.empty());
  const auto b1 = dispatch::plan_decode(to_problem(sweep.decode[0]), kSm90a, kDefaultPrecompileSms);
  const auto b256 = dispatch::plan_decode(to_problem(sweep.decode[1]), kSm90a, kDefaultPrecompileSms);
  REQUIRE(b1.splits.num_splits > 1);
  REQUIRE(b256.splits.num_splits == 1);
  CHECK(b1.split.stages == 3);
  CHECK(b256.split.stages == 2);
  auto b256_three = b256.split;
  b256_three.stages = 3;
  CHECK(b1.split == b256_three);
  // The split kernels: each problem's own and every one its prepare_decode loads (any smaller batch, any
  // max_seqlen_k), once each, the first problem's first.
  CHECK(plan.decode[0] == b1.split);
  CHECK(contains_each_once(plan.decode, prepare_kernels(sweep, kSm90a, kDefaultPrecompileSms)));
  CHECK(std::count_if(plan.decode.begin(), plan.decode.end(),
                      [](const DecodeKernelConfig& c) { return c.layout == KvLayout::paged; }) > 0);
  REQUIRE(plan.combine.size() == 1);  // one combine kernel serves every split plan of a dtype and head dim
  CHECK(plan.combine[0] == b1.combine);
  CHECK(plan.combine[0].fp32_inputs);
  REQUIRE(plan.merge.size() == 1);
  CHECK(plan.merge[0] == dispatch::merge_kernel_config(flashjit::DType::bf16, 128, kSm90a));
  CHECK_FALSE(plan.merge[0].fp32_inputs);

  // Every kernel once, in the order prefill, decode, combine, merge; each valid.
  const auto kernels = plan.kernels();
  REQUIRE(kernels.size() == plan.decode.size() + 2);
  CHECK(kernels[0] == flashjit::AnyKernelConfig(plan.decode[0]));
  CHECK(kernels.back() == flashjit::AnyKernelConfig(plan.merge[0]));
  for (const auto& k : kernels) CHECK(validate(k).empty());

  // B256 alone splits nothing, but prepare_decode at B256 loads the combine kernel for the smaller batches
  // (which split): so it is compiled. So does prepare_decode of a short cache (200 keys split at no batch
  // size): its workspace and combine kernel cover any max_seqlen_k.
  const Sweep big = decode_sweep(R"({"kind": "decode", "heads_q": 32, "heads_kv": 8, "head_dim": 128,
                                     "batch": 256, "seqlen_k": 32768})");
  CHECK(precompile_plan(big, {kSm90a}, {}, false).combine == plan.combine);
  const Sweep short_cache = decode_sweep(R"({"kind": "decode", "heads_q": 32, "heads_kv": 8, "head_dim": 128,
                                             "batch": [1, 64], "seqlen_k": 200})");
  REQUIRE(dispatch::plan_decode(to_problem(short_cache.decode[0]), kSm90a, 132).splits.num_splits == 1);
  const auto short_plan = precompile_plan(short_cache, {kSm90a}, {}, false);
  CHECK(contains_each_once(short_plan.decode, prepare_kernels(short_cache, kSm90a, kDefaultPrecompileSms)));
  CHECK(short_plan.combine == plan.combine);
  CHECK(short_plan.merge.size() == 1);

  // The SM count decides whether keys are split: on a 1-SM GPU nothing is, so no combine kernel.
  const auto one_sm = precompile_plan(sweep, {kSm90a}, {}, false, 1);
  CHECK(contains_each_once(one_sm.decode, prepare_kernels(sweep, kSm90a, 1)));
  CHECK(one_sm.combine.empty());
  CHECK(one_sm.merge.size() == 1);

  // Two archs: everything per arch.
  const auto two = precompile_plan(sweep, {kSm90a, kSm80}, {}, false);
  CHECK(two.decode.size() == plan.decode.size() + prepare_kernels(sweep, kSm80, kDefaultPrecompileSms).size());
  CHECK(two.combine.size() == 2);
  CHECK(two.merge.size() == 2);
  CHECK(two.decode[plan.decode.size()].arch == kSm80);
}

TEST_CASE("precompile plan: decode kernels dedupe across problems, mixed with prefill", "[tune][plan][decode]") {
  const Sweep sweep = decode_sweep(R"({"heads_q": 32, "heads_kv": 8, "head_dim": 128, "seqlen": 4096},
      {"kind": "decode", "heads_q": 32, "heads_kv": 8, "head_dim": 128, "batch": [1, 2, 4], "seqlen_k": [8192, 16384]},
      {"kind": "decode", "heads_q": 32, "heads_kv": 8, "head_dim": [64, 128], "batch": 1, "seqlen_k": 8192,
       "dtype": ["bf16", "fp16"], "q_len": [1, 2], "window_left": [-1, 512]})");
  REQUIRE(sweep.problems.size() == 1);
  const auto plan = precompile_plan(sweep, {kSm90a}, {}, false);
  REQUIRE(plan.configs.size() == 1);
  CHECK(plan.configs[0] == *flashjit::dispatch::choose(to_problem(sweep.problems[0]), kSm90a));
  // Split kernels: per dtype, head dim, window and rows (group 4 x q_len 1 or 2: 16 rows either way), with
  // those of the smaller batches and other lengths prepare_decode loads.
  CHECK(contains_each_once(plan.decode, prepare_kernels(sweep, kSm90a, kDefaultPrecompileSms)));
  // Combine kernels per dtype and head dim (each has a split plan); merge kernels likewise.
  CHECK(plan.combine.size() == 2 * 2);
  CHECK(plan.merge.size() == 2 * 2);
  std::set<std::string> names;
  for (const auto& k : plan.kernels()) CHECK(names.insert(to_json(k)).second);
  CHECK(names.size() == 1 + plan.decode.size() + 4 + 4);
  // --all-candidates does not change the decode part (decode has no candidate space).
  const auto all = precompile_plan(sweep, {kSm90a}, {}, true);
  CHECK(all.decode == plan.decode);
  CHECK(all.combine == plan.combine);
  CHECK(all.merge == plan.merge);
}

TEST_CASE("precompile plan: paged prefill problems give kernels with their page sizes", "[tune][plan][paged]") {
  auto sweep = parse_sweep(R"({"problems": [{"heads_q": 32, "heads_kv": 8, "head_dim": 128, "batch": 4,
                                             "seqlen_q": 1024, "seqlen_k": 8192, "mask": "causal",
                                             "page_size": [0, 1, 16, 256]}]})", "paged.json");
  REQUIRE(sweep.ok());
  REQUIRE(sweep->problems.size() == 4);
  CHECK(sweep->problems[1].page_size == 1);
  const auto plan = precompile_plan(*sweep, {kSm90a, kSm80}, {}, false);
  std::set<int> sm90a_pages, sm80_pages;
  for (const KernelConfig& c : plan.configs) {
    INFO(readable_name(c));
    (c.arch == kSm90a ? sm90a_pages : sm80_pages).insert(c.page_size);
    if (c.page_size > 0) CHECK(readable_name(c).find(fmt::format("_paged{}_", c.page_size)) != std::string::npos);
    if (c.page_size > 0 && c.page_size < 16 && c.arch == kSm90a) CHECK(c.block_n <= 128);  // gathered pages
  }
  CHECK(sm90a_pages == std::set<int>{0, 1, 16, 256});
  CHECK(sm80_pages == std::set<int>{0, 1, 16, 256});
  // The shape's JSON carries page_size only when paged, and reads back.
  CHECK(!to_json(sweep->problems[0]).contains("page_size"));
  auto back = shape_from_json(to_json(sweep->problems[2]));
  REQUIRE(back.ok());
  CHECK(*back == sweep->problems[2]);
  CHECK(describe(sweep->problems[2]).find("paged16") != std::string::npos);
}

TEST_CASE("precompile plan: append problems give the append kernels of every size class", "[tune][plan][append]") {
  using flashjit::AppendKernelConfig;
  using flashjit::KvLayout;
  auto sweep = parse_sweep(R"({"problems": [{"kind": "append", "heads_kv": 8, "head_dim": 128,
                                             "layout": ["contiguous", "paged"], "page_size": [16, 64]},
                                            {"kind": "append", "heads_kv": 1, "head_dim": 128, "layout": "paged",
                                             "page_size": 16}]})", "append.json");
  REQUIRE(sweep.ok());
  REQUIRE(sweep->append.size() == 4);
  const auto plan = precompile_plan(*sweep, {kSm90a, kSm80}, {}, false);
  CHECK(plan.configs.empty());
  CHECK(plan.decode.empty());
  CHECK(plan.combine.empty());
  CHECK(plan.merge.empty());
  // Per arch, per (dtype, head dim, layout, page size): what prepare_append_kv loads, in sweep order. The KV heads
  // select no kernel (H1 paged 16 is H8 paged 16's).
  std::vector<AppendKernelConfig> wanted;
  for (const Arch& arch : {kSm90a, kSm80})
    for (const auto& [layout, page] : {std::pair{KvLayout::contiguous, 0}, {KvLayout::paged, 16}, {KvLayout::paged, 64}})
      for (const auto& c : append_prepare_kernels(flashjit::DType::bf16, 128, layout, page, arch)) wanted.push_back(c);
  REQUIRE(wanted.size() == 2 * 3 * 2);  // one kernel per size class: one and two vectors per thread
  CHECK(plan.append == wanted);
  CHECK(plan.append[0].vectors != plan.append[1].vectors);
  CHECK(plan.append[2].layout == KvLayout::paged);
  CHECK(plan.append[2].page_size == 16);
  CHECK(plan.append[6].arch == kSm80);
  // Whatever append_kv picks for a size (one vector per thread for a small append, two past twice the GPU's
  // threads) is among them.
  for (std::int64_t vectors : {std::int64_t{256}, std::int64_t{1} << 30})
    CHECK(std::count(plan.append.begin(), plan.append.end(),
                     append_kernel_config(flashjit::DType::bf16, 128, KvLayout::paged, 64, kSm90a, vectors,
                                          kDefaultPrecompileSms)) == 1);
  // Every kernel once, valid, after the other kinds.
  const auto kernels = plan.kernels();
  REQUIRE(kernels.size() == wanted.size());
  CHECK(kernels.front() == flashjit::AnyKernelConfig(wanted.front()));
  for (const auto& k : kernels) CHECK(validate(k).empty());
  // --all-candidates leaves them as they are (an append kernel has no candidate space).
  CHECK(precompile_plan(*sweep, {kSm90a, kSm80}, {}, true).append == plan.append);
}

TEST_CASE("precompile plan: a decode fused with an append adds the append kernels its prepare loads",
          "[tune][plan][decode][append]") {
  using flashjit::KvLayout;
  const std::string decode = R"({"kind": "decode", "heads_q": 32, "heads_kv": 8, "head_dim": 128, "batch": 16,
                                 "seqlen_k": 8192, "layout": ["contiguous", "paged"], "page_size": 16)";
  const Sweep plain = decode_sweep(decode + "}");
  const Sweep fused = decode_sweep(decode + R"(, "append": true})");
  const auto without = precompile_plan(plain, {kSm90a}, {}, false);
  const auto with = precompile_plan(fused, {kSm90a}, {}, false);
  CHECK(without.append.empty());
  // The attention kernels do not change with the append in front of them.
  CHECK(with.decode == without.decode);
  CHECK(with.combine == without.combine);
  CHECK(with.merge == without.merge);
  std::vector<flashjit::AppendKernelConfig> wanted;
  for (const auto& [layout, page] : {std::pair{KvLayout::contiguous, 0}, {KvLayout::paged, 16}})
    for (const auto& c : append_prepare_kernels(flashjit::DType::bf16, 128, layout, page, kSm90a)) wanted.push_back(c);
  CHECK(with.append == wanted);
  CHECK(with.kernels().size() == without.kernels().size() + wanted.size());
  // ... among them the one Runtime::decode launches for this problem.
  for (const auto& shape : fused.decode) {
    const auto pick = append_kernel(append_of(to_problem(shape), nullptr), kSm90a, kDefaultPrecompileSms);
    CHECK(std::count(with.append.begin(), with.append.end(), pick) == 1);
  }
  // A fused decode in fp16 at d64 takes that dtype's and head dim's kernels; an append problem of the same cache
  // as a fused decode adds nothing.
  const auto fp16 = precompile_plan(decode_sweep(R"({"kind": "decode", "heads_q": 8, "head_dim": 64, "dtype": "fp16",
                                                     "seqlen_k": 1024, "append": true})"),
                                    {kSm80}, {}, false);
  CHECK(fp16.append == append_prepare_kernels(flashjit::DType::fp16, 64, KvLayout::contiguous, 0, kSm80));
  const auto both = precompile_plan(
      decode_sweep(decode + R"(, "append": true}, {"kind": "append", "heads_kv": 8, "head_dim": 128, "layout": "paged",
                                                    "page_size": 16})"),
      {kSm90a}, {}, false);
  CHECK(both.append == with.append);
}

TEST_CASE("precompile plan: biased and block-sparse problems give their kernels, and the block_mask kernels",
          "[tune][plan][bias][block_sparse]") {
  const char* mod = R"(__device__ bool mask_mod(int b, int h, int q, int k, const flashjit::ModContext& ctx) {
  return ctx.pointer<int>(0)[q] == ctx.pointer<int>(0)[k];
}
)";
  const std::string text = fmt::format(R"({{"problems": [{{"heads_q": 32, "heads_kv": 8, "head_dim": 128, "seqlen": 4096,
      "mask": "causal", "bias": ["none", "bf16"]}}, {{"heads_q": 32, "heads_kv": 8, "head_dim": 128, "seqlen": 16384,
      "mask": "causal", "mask_mod": {}, "block_size": [64, 128]}}]}})", nlohmann::json(mod).dump());
  auto sweep = parse_sweep(text, "variants.json");
  REQUIRE(sweep.ok());
  REQUIRE(sweep->problems.size() == 4);
  CHECK(sweep->problems[1].bias == flashjit::BiasType::bf16);
  CHECK(sweep->problems[3].block_size == 128);
  const auto plan = precompile_plan(*sweep, {kSm90a}, {}, false);
  REQUIRE(plan.configs.size() == 4);
  CHECK(plan.configs[0].bias == flashjit::BiasType::none);
  CHECK(plan.configs[1].bias == flashjit::BiasType::bf16);
  for (int i : {2, 3}) {
    INFO(readable_name(plan.configs[i]));
    CHECK(plan.configs[i].block_sparse);
    CHECK(sweep->problems[i].block_size % plan.configs[i].block_m == 0);
    CHECK(sweep->problems[i].block_size % plan.configs[i].block_n == 0);
  }
  // One block_mask kernel for the two block sizes (they are run-time arguments of the kernel).
  REQUIRE(plan.block_mask.size() == 1);
  CHECK(plan.block_mask[0].mask == MaskKind::causal);
  CHECK(plan.block_mask[0].mask_mod == mod);
  CHECK(plan.kernels().size() == 5);
  // The shapes' JSON carries the new fields only when set, and reads back; bad values name the field.
  CHECK(!to_json(sweep->problems[0]).contains("bias"));
  CHECK(!to_json(sweep->problems[0]).contains("block_size"));
  for (int i : {1, 3}) {
    auto back = shape_from_json(to_json(sweep->problems[i]));
    REQUIRE(back.ok());
    CHECK(*back == sweep->problems[i]);
  }
  CHECK(describe(sweep->problems[1]).find("biasbf16") != std::string::npos);
  CHECK(describe(sweep->problems[3]).find("blocks128") != std::string::npos);
  auto odd = parse_sweep(R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": 64, "block_size": 24}]})", "x.json");
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().message.find("block_size") != std::string::npos);
  auto paged = parse_sweep(R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": 64, "block_size": 64,
                                             "page_size": 16}]})", "x.json");
  REQUIRE_FALSE(paged.ok());
  CHECK(paged.error().message.find("dense keys") != std::string::npos);
  auto bias = parse_sweep(R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": 64, "bias": "int8"}]})", "x.json");
  REQUIRE_FALSE(bias.ok());
  CHECK(bias.error().message.find("none, fp32, bf16, fp16, bool") != std::string::npos);
}

TEST_CASE("precompile plan: rel_bias and seqused_k problems give their kernels", "[tune][plan][rel_bias][seqused]") {
  auto sweep = parse_sweep(R"({"problems": [{"heads_q": 32, "heads_kv": 8, "head_dim": 128, "seqlen": 4096,
      "mask": "causal", "rel_bias": [false, true], "seqused_k": [false, true]}]})", "x.json");
  REQUIRE(sweep.ok());
  REQUIRE(sweep->problems.size() == 4);  // seqused_k turning fastest
  const auto plan = precompile_plan(*sweep, {kSm90a}, {}, false);
  REQUIRE(plan.configs.size() == 4);
  for (int i = 0; i < 4; ++i) {
    INFO(readable_name(plan.configs[i]));
    CHECK(plan.configs[i].rel_bias == (i >= 2));
    CHECK(plan.configs[i].seqused_k == (i % 2 == 1));
    auto back = shape_from_json(to_json(sweep->problems[i]));
    REQUIRE(back.ok());
    CHECK(*back == sweep->problems[i]);
  }
  CHECK(!to_json(sweep->problems[0]).contains("rel_bias"));
  CHECK(!to_json(sweep->problems[0]).contains("seqused_k"));
  CHECK(describe(sweep->problems[3]).find(" relbias sequsedk") != std::string::npos);
  auto paged = parse_sweep(R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": 64, "seqused_k": true,
                                             "page_size": 16}]})", "x.json");
  REQUIRE_FALSE(paged.ok());
  CHECK(paged.error().message.find("seqused_k over contiguous keys") != std::string::npos);
}
