#include "compile/key.hpp"

#include "codegen/embedded_templates.hpp"
#include "codegen/generate.hpp"
#include "common/hash.hpp"
#include "compile/nvrtc.hpp"

namespace flashjit::compile {

std::string kernel_key(std::string_view config_json, std::string_view source, const std::vector<std::string>& options) {
  Sha256 h;
  auto field = [&](std::string_view name, std::string_view value) {
    h.update(name).update("=").update(value).update(std::string_view("\n", 1));
  };
  field("flashjit", FLASHJIT_VERSION);
  field("config", config_json);
  field("source", Sha256().update(source).hex_digest());
  field("templates", codegen::templates_hash());
  field("nvrtc", nvrtc_version());
  for (const auto& o : options) field("option", o);
  return h.hex_digest();
}

std::string kernel_key(const AnyKernelConfig& config, const std::vector<std::string>& options) {
  const auto source = codegen::generate(config);
  return kernel_key(to_json(config), source.ok() ? std::string_view(source->text) : std::string_view(), options);
}

}  // namespace flashjit::compile
