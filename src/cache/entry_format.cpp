#include "cache/entry_format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "common/hash.hpp"
#include "common/json_depth.hpp"

namespace flashjit::cache {
using nlohmann::json;

bool valid_key(std::string_view key) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  return key.size() == 64 && std::all_of(key.begin(), key.end(), hex);
}

std::filesystem::path entry_path(const std::filesystem::path& root, const std::string& key) {
  return root / key.substr(0, 2) / (key + std::string(kSuffix));
}

std::string encode(const Entry& e) {
  json h = {{"key", e.key},
            {"cubin_bytes", e.cubin.size()},
            {"source_bytes", e.source.size()},
            {"cubin_sha256", sha256_hex(e.cubin)},
            {"source_sha256", sha256_hex(e.source)},
            {"meta_sha256", sha256_hex(e.meta.dump())},
            {"meta", e.meta}};
  std::string out = fmt::format("{}\n{}\n", kMagic, h.dump());
  out.reserve(out.size() + e.cubin.size() + e.source.size());
  return out.append(e.cubin).append(e.source);
}

Result<json> parse_header(std::string_view magic, std::string_view line, const std::string& key) {
  auto bad = [](std::string why) { return Error(ErrorCode::cache, std::move(why)); };
  if (magic != kMagic) return bad("bad magic line (not a flashjit cache entry of this version)");
  if (Status depth = check_json_depth(line); !depth) return bad(depth.error().message);
  json h = json::parse(line, nullptr, false);
  if (h.is_discarded() || !h.is_object()) return bad("header is not a JSON object");
  for (const char* f : {"key", "cubin_sha256", "source_sha256", "meta_sha256"})
    if (!h.contains(f) || !h[f].is_string()) return bad(fmt::format("header field '{}' missing", f));
  for (const char* f : {"cubin_bytes", "source_bytes"})
    if (!h.contains(f) || !h[f].is_number_unsigned()) return bad(fmt::format("header field '{}' missing", f));
  if (!h.contains("meta")) return bad("header field 'meta' missing");
  if (h["key"].get<std::string>() != key) return bad(fmt::format("header is for key {}", h["key"].get<std::string>()));
  if (sha256_hex(h["meta"].dump()) != h["meta_sha256"].get<std::string>()) return bad("meta checksum mismatch");
  return h;
}

Result<Entry> decode(std::string_view bytes, const std::string& key) {
  auto bad = [](std::string why) { return Error(ErrorCode::cache, std::move(why)); };
  auto nl1 = bytes.find('\n');
  auto nl2 = nl1 == std::string_view::npos ? nl1 : bytes.find('\n', nl1 + 1);
  if (nl2 == std::string_view::npos) return bad("truncated header");
  auto header = parse_header(bytes.substr(0, nl1), bytes.substr(nl1 + 1, nl2 - nl1 - 1), key);
  if (!header) return std::move(header).error();
  json& h = *header;
  const std::string_view payload = bytes.substr(nl2 + 1);
  const auto cubin_bytes = h["cubin_bytes"].get<std::uint64_t>(), source_bytes = h["source_bytes"].get<std::uint64_t>();
  if (cubin_bytes > payload.size() || source_bytes != payload.size() - cubin_bytes)
    return bad(fmt::format("size mismatch: header says {} + {} bytes, file has {}", cubin_bytes, source_bytes,
                           payload.size()));
  Entry e{key, std::string(payload.substr(0, cubin_bytes)), std::string(payload.substr(cubin_bytes)),
          std::move(h["meta"])};
  if (sha256_hex(e.cubin) != h["cubin_sha256"].get<std::string>()) return bad("cubin checksum mismatch");
  if (sha256_hex(e.source) != h["source_sha256"].get<std::string>()) return bad("source checksum mismatch");
  return e;
}

}  // namespace flashjit::cache
