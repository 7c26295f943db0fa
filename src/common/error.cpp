#include "flashjit/error.hpp"

namespace flashjit {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::invalid_config: return "invalid config";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::no_device: return "no device";
    case ErrorCode::driver: return "driver error";
    case ErrorCode::compile: return "compile error";
    case ErrorCode::cache: return "cache error";
    case ErrorCode::not_found: return "not found";
    case ErrorCode::io: return "i/o error";
    case ErrorCode::internal: return "internal error";
  }
  return "error";
}

std::string Error::to_string() const {
  std::string s = std::string(flashjit::to_string(code)) + ": " + message;
  for (const auto& c : context) s += "\n  " + c;
  if (!details.empty()) {
    s += "\n";
    s += details;
    if (s.back() != '\n') s += "\n";
  }
  return s;
}

}  // namespace flashjit
