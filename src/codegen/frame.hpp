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
};

GeneratedSource render(const Frame& frame);

// The device element type of a dtype ("flashjit::bf16").
const char* element_type(DType dtype);

// The variant template argument (templates/attention/variant.cuh) that follows a kernel's last parameter,
// ",\n    /*variant=*/flashjit::Variant<...>", when any variant is on; empty otherwise.
std::string variant_arg(bool softcap, bool alibi, bool sinks);

}  // namespace flashjit::codegen
