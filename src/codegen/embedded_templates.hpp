// The device templates (templates/**/*.cuh), embedded at build time (cmake/embed_templates.cmake) and given
// to NVRTC as in-memory headers: no template file is read at run time.
#pragma once

#include <string>
#include <vector>

namespace flashjit::codegen {

struct EmbeddedTemplate {
  const char* name;  // path relative to templates/, as used in #include
  const char* text;
};

const std::vector<EmbeddedTemplate>& embedded_templates();

// SHA-256 over every template's name and text (part of each cache key).
const std::string& templates_hash();

}  // namespace flashjit::codegen
