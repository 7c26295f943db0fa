#include "compile/key.hpp"

#include "codegen/embedded_templates.hpp"
#include "common/hash.hpp"
#include "compile/nvrtc.hpp"

namespace flashjit::compile {

std::string kernel_key(std::string_view config_json, const std::vector<std::string>& options) {
  Sha256 h;
  auto field = [&](std::string_view name, std::string_view value) {
    h.update(name).update("=").update(value).update(std::string_view("\n", 1));
  };
  field("flashjit", FLASHJIT_VERSION);
  field("config", config_json);
  field("templates", codegen::templates_hash());
  field("nvrtc", nvrtc_version());
  for (const auto& o : options) field("option", o);
  return h.hex_digest();
}

std::string kernel_key(const KernelConfig& config, const std::vector<std::string>& options) {
  return kernel_key(to_json(config), options);
}

}  // namespace flashjit::compile
