#include "codegen/embedded_templates.hpp"
#include "common/hash.hpp"

namespace flashjit::codegen {

const std::string& templates_hash() {
  static const std::string hash = [] {
    Sha256 h;
    for (const auto& t : embedded_templates()) {
      h.update(t.name).update(std::string_view("\0", 1));
      h.update(t.text).update(std::string_view("\0", 1));
    }
    return h.hex_digest();
  }();
  return hash;
}

}  // namespace flashjit::codegen
