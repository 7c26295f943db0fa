#include "runtime/targets.hpp"

#include <fmt/format.h>

namespace flashjit::runtime {

Status check_target(const Target& target) {
  if (target.sms < 1)
    return Error(ErrorCode::invalid_argument, fmt::format("target sms must be >= 1, got {}", target.sms));
  return {};
}

std::string describe(const Target& target) {
  return fmt::format("a {} target with {} SMs{}", target.arch.to_string(), target.sms,
                     target.gpu.empty() ? "" : fmt::format(" ({})", target.gpu));
}

}  // namespace flashjit::runtime
