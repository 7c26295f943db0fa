// The readable-name tag of a kernel's variants, shared by the prefill and decode names: "_softcap_alibi_sinks"
// for those compiled in, in declaration order; empty without any.
#pragma once

#include <string>

namespace flashjit::config {

inline std::string variant_tag(bool softcap, bool alibi, bool sinks) {
  return std::string(softcap ? "_softcap" : "") + (alibi ? "_alibi" : "") + (sinks ? "_sinks" : "");
}

}  // namespace flashjit::config
