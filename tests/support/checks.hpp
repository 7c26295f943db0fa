// Small checks the CPU tests share: substring search and "this parse failed naming that field".
#pragma once

#include <string>

#include "flashjit/error.hpp"
#include "support/catch.hpp"

namespace flashjit::test {

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The parse must fail with invalid_config and a message naming `field` in quotes.
template <class R>
void require_error_naming(const R& r, const std::string& field) {
  REQUIRE(!r.ok());
  INFO(r.error().to_string());
  CHECK(r.error().code == ErrorCode::invalid_config);
  CHECK(contains(r.error().message, "'" + field + "'"));
}

}  // namespace flashjit::test
