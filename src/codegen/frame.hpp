// The frame every generated translation unit shares: a header comment naming the kernel and its config,
// one include, the template instantiation, static_asserts that host and template agree on shared memory and
// CTA size, and one extern "C" entry that forwards its parameters to Kernel::run.
#pragma once

#include <string>

#include "codegen/generate.hpp"
#include "flashjit/config.hpp"

namespace flashjit::codegen {

struct Frame {
  std::string name;        // readable name; the entry is flashjit_<name>
  std::string json;        // canonical config
  std::string header;      // template to include
  std::string kernel;      // the instantiation
  std::string parameters;  // the entry's parameter list
  std::string arguments;   // what Kernel::run receives
  int smem = 0;
  int threads = 0;
  std::string score_mod;  // the user snippets (templates/attention/mod.cuh), placed after the include
  std::string mask_mod;
  int min_ctas = 1;       // __launch_bounds__'s minimum CTAs per SM
};

GeneratedSource render(const Frame& frame);

// The device element type of a dtype ("flashjit::bf16").
const char* element_type(DType dtype);

// The variant template argument (templates/attention/variant.cuh) that follows a kernel's last parameter,
// ",\n    /*variant=*/flashjit::Variant<...>", when any variant is on; empty otherwise. The snippets are the
// wrappers render() defines (flashjit_score_mod, flashjit_mask_mod); the bias its element type
// (templates/attention/bias.cuh); rel_bias names the bias (none without one) before its flag.
std::string variant_arg(bool softcap, bool alibi, bool sinks, bool score_mod, bool mask_mod,
                        BiasType bias, bool rel_bias = false);

}  // namespace flashjit::codegen
