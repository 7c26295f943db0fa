// The declaration of each config kind's fields, in canonical-JSON order. Adding a field to a kind is one
// line here (and its member in flashjit/config.hpp); the JSON, parsers, names of known fields, equality and
// hash follow.
#pragma once

#include "config/fields.hpp"

namespace flashjit::config {

inline bool has_warps(const KernelConfig& c) { return c.algorithm != Algorithm::fa3; }
inline bool has_consumer_warpgroups(const KernelConfig& c) { return c.algorithm == Algorithm::fa3; }

template <>
struct Kind<KernelConfig> {
  static constexpr const char* tag = nullptr;  // prefill JSON has no "kernel" field
  using C = KernelConfig;
  static constexpr auto fields = std::make_tuple(
      Field<C, Algorithm>{"algorithm", &C::algorithm}, Field<C, Arch>{"arch", &C::arch},
      Field<C, DType>{"dtype", &C::dtype}, Field<C, int>{"head_dim", &C::head_dim},
      Field<C, int>{"head_dim_v", &C::head_dim_v}, Field<C, int>{"block_m", &C::block_m}, Field<C, int>{"block_n", &C::block_n},
      Field<C, int>{"stages", &C::stages}, Field<C, int>{"warps", &C::warps, has_warps},
      Field<C, int>{"consumer_warpgroups", &C::consumer_warpgroups, has_consumer_warpgroups},
      Field<C, MaskKind>{"mask", &C::mask}, Field<C, Scheduler>{"scheduler", &C::scheduler},
      Field<C, bool>{"varlen", &C::varlen},
      Field<C, bool>{"pack_gqa", &C::pack_gqa, has_consumer_warpgroups, true},
      Field<C, int>{"page_size", &C::page_size, nullptr, true}, Field<C, bool>{"softcap", &C::softcap, nullptr, true},
      Field<C, bool>{"alibi", &C::alibi, nullptr, true}, Field<C, bool>{"sinks", &C::sinks, nullptr, true},
      Field<C, std::string>{"score_mod", &C::score_mod, nullptr, true},
      Field<C, std::string>{"mask_mod", &C::mask_mod, nullptr, true}, Field<C, BiasType>{"bias", &C::bias, nullptr, true},
      Field<C, bool>{"bias_tma", &C::bias_tma, has_consumer_warpgroups, true},
      Field<C, bool>{"rel_bias", &C::rel_bias, nullptr, true},
      Field<C, bool>{"block_sparse", &C::block_sparse, nullptr, true},
      Field<C, bool>{"seqused_k", &C::seqused_k, nullptr, true});
};

template <>
struct Kind<DecodeKernelConfig> {
  static constexpr const char* tag = "decode";
  using C = DecodeKernelConfig;
  static constexpr auto fields = std::make_tuple(
      Field<C, Arch>{"arch", &C::arch}, Field<C, DType>{"dtype", &C::dtype}, Field<C, int>{"head_dim", &C::head_dim},
      Field<C, int>{"rows", &C::rows}, Field<C, int>{"block_n", &C::block_n}, Field<C, int>{"stages", &C::stages},
      Field<C, int>{"warps", &C::warps}, Field<C, int>{"column_groups", &C::column_groups},
      Field<C, KvLayout>{"layout", &C::layout}, Field<C, int>{"page_size", &C::page_size},
      Field<C, MaskKind>{"mask", &C::mask}, Field<C, bool>{"cluster_merge", &C::cluster_merge},
      Field<C, bool>{"softcap", &C::softcap, nullptr, true}, Field<C, bool>{"alibi", &C::alibi, nullptr, true},
      Field<C, bool>{"sinks", &C::sinks, nullptr, true}, Field<C, std::string>{"score_mod", &C::score_mod, nullptr, true},
      Field<C, std::string>{"mask_mod", &C::mask_mod, nullptr, true}, Field<C, BiasType>{"bias", &C::bias, nullptr, true});
};

template <>
struct Kind<CombineKernelConfig> {
  static constexpr const char* tag = "combine";
  using C = CombineKernelConfig;
  static constexpr auto fields = std::make_tuple(
      Field<C, Arch>{"arch", &C::arch}, Field<C, DType>{"dtype", &C::dtype},
      Field<C, bool>{"fp32_inputs", &C::fp32_inputs}, Field<C, int>{"head_dim", &C::head_dim},
      Field<C, int>{"warps", &C::warps}, Field<C, bool>{"sinks", &C::sinks, nullptr, true});
};

template <>
struct Kind<AppendKernelConfig> {
  static constexpr const char* tag = "append";
  using C = AppendKernelConfig;
  static constexpr auto fields = std::make_tuple(
      Field<C, Arch>{"arch", &C::arch}, Field<C, DType>{"dtype", &C::dtype}, Field<C, int>{"head_dim", &C::head_dim},
      Field<C, KvLayout>{"layout", &C::layout}, Field<C, int>{"page_size", &C::page_size},
      Field<C, int>{"warps", &C::warps}, Field<C, int>{"vectors", &C::vectors});
};

template <>
struct Kind<BlockMaskKernelConfig> {
  static constexpr const char* tag = "block_mask";
  using C = BlockMaskKernelConfig;
  static constexpr auto fields =
      std::make_tuple(Field<C, Arch>{"arch", &C::arch}, Field<C, MaskKind>{"mask", &C::mask},
                      Field<C, std::string>{"mask_mod", &C::mask_mod, nullptr, true}, Field<C, int>{"warps", &C::warps});
};

}  // namespace flashjit::config
