// SHA-256, used for cache keys, template hashes and entry checksums.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace flashjit {

class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view bytes);
  Sha256& update(const void* data, std::size_t size);
  std::array<std::uint8_t, 32> digest();
  std::string hex_digest();  // 64 lowercase hex characters

 private:
  void block(const std::uint8_t* p);
  std::array<std::uint32_t, 8> h_;
  std::array<std::uint8_t, 64> buf_{};
  std::size_t buf_len_ = 0;
  std::uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view bytes);

}  // namespace flashjit
