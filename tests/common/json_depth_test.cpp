// The nesting bound on outside JSON (issue 29): brackets count outside strings only, and the limit is inclusive.
#include "common/json_depth.hpp"

#include <string>

#include "support/catch.hpp"

using flashjit::check_json_depth;

TEST_CASE("json depth: nesting past the limit is refused, brackets in strings do not count", "[common]") {
  CHECK(check_json_depth("{}", 1).ok());
  CHECK(check_json_depth("[[]]", 2).ok());
  CHECK_FALSE(check_json_depth("[[[]]]", 2).ok());
  CHECK(check_json_depth(R"({"a": "[[[[[[", "b": "\"[[[["})", 1).ok());
  CHECK(check_json_depth(R"(["\\", [1]])", 2).ok());  // an escaped backslash ends before the quote
  const std::string deep = std::string(70000, '[') + std::string(70000, ']');
  auto st = check_json_depth(deep);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == flashjit::ErrorCode::invalid_argument);
  CHECK(st.error().message == "JSON nested deeper than 64 levels");
  CHECK(check_json_depth(std::string(64, '[') + std::string(64, ']')).ok());
  CHECK_FALSE(check_json_depth(std::string(65, '{')).ok());  // unbalanced too
}
