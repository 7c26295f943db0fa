// Names of the config enums and the arch string, both ways.
#include <fmt/format.h>

#include <charconv>

#include "flashjit/config.hpp"

namespace flashjit {
namespace {

template <class E, std::size_t N>
std::optional<E> lookup(std::string_view s, const std::pair<E, const char*> (&table)[N]) {
  for (const auto& [e, name] : table)
    if (s == name) return e;
  return std::nullopt;
}
template <class E, std::size_t N>
const char* name_of(E e, const std::pair<E, const char*> (&table)[N]) {
  for (const auto& [v, name] : table)
    if (v == e) return name;
  return "?";
}

constexpr std::pair<Algorithm, const char*> kAlgorithms[] = {
    {Algorithm::naive, "naive"}, {Algorithm::fa2, "fa2"}, {Algorithm::fa3, "fa3"}, {Algorithm::automatic, "auto"}};
constexpr std::pair<DType, const char*> kDTypes[] = {{DType::bf16, "bf16"}, {DType::fp16, "fp16"}};
constexpr std::pair<MaskKind, const char*> kMasks[] = {{MaskKind::none, "none"},
                                                       {MaskKind::causal, "causal"},
                                                       {MaskKind::sliding_window, "sliding_window"},
                                                       {MaskKind::chunked, "chunked"},
                                                       {MaskKind::chunked_causal, "chunked_causal"}};
constexpr std::pair<Scheduler, const char*> kSchedulers[] = {{Scheduler::grid, "grid"},
                                                             {Scheduler::persistent, "persistent"}};
constexpr std::pair<KvLayout, const char*> kLayouts[] = {{KvLayout::contiguous, "contiguous"},
                                                         {KvLayout::paged, "paged"}};
constexpr std::pair<BiasType, const char*> kBiasTypes[] = {{BiasType::none, "none"},
                                                           {BiasType::fp32, "fp32"},
                                                           {BiasType::bf16, "bf16"},
                                                           {BiasType::fp16, "fp16"},
                                                           {BiasType::boolean, "bool"}};
constexpr std::pair<KernelKind, const char*> kKinds[] = {
    {KernelKind::prefill, "prefill"}, {KernelKind::decode, "decode"}, {KernelKind::combine, "combine"},
    {KernelKind::append, "append"}, {KernelKind::block_mask, "block_mask"}};

}  // namespace

const char* to_string(Algorithm a) { return name_of(a, kAlgorithms); }
const char* to_string(DType d) { return name_of(d, kDTypes); }
const char* to_string(MaskKind m) { return name_of(m, kMasks); }
const char* to_string(Scheduler s) { return name_of(s, kSchedulers); }
const char* to_string(KvLayout l) { return name_of(l, kLayouts); }
const char* to_string(BiasType b) { return name_of(b, kBiasTypes); }
const char* to_string(KernelKind k) { return name_of(k, kKinds); }
std::optional<Algorithm> parse_algorithm(std::string_view s) { return lookup(s, kAlgorithms); }
std::optional<DType> parse_dtype(std::string_view s) { return lookup(s, kDTypes); }
std::optional<MaskKind> parse_mask(std::string_view s) { return lookup(s, kMasks); }
std::optional<Scheduler> parse_scheduler(std::string_view s) { return lookup(s, kSchedulers); }
std::optional<KvLayout> parse_kv_layout(std::string_view s) { return lookup(s, kLayouts); }
std::optional<BiasType> parse_bias_type(std::string_view s) { return lookup(s, kBiasTypes); }

std::string Arch::to_string() const { return fmt::format("sm_{}{}", sm, accelerated ? "a" : ""); }

std::optional<Arch> Arch::parse(std::string_view s) {
  if (!s.starts_with("sm_")) return std::nullopt;
  s.remove_prefix(3);
  Arch a{0, false};
  if (s.ends_with("a")) {
    a.accelerated = true;
    s.remove_suffix(1);
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), a.sm);
  if (ec != std::errc() || end != s.data() + s.size() || a.sm < 50 || a.sm > 200) return std::nullopt;
  if (a.accelerated && a.sm < 90) return std::nullopt;
  return a;
}

}  // namespace flashjit
