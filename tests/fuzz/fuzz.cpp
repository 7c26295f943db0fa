// A bounded fuzz run of the parsers that read outside input (issue 29): kernel configs (JSON and key=value),
// sweeps, tuned tables, cache entries, the compile workers' protocols, and the C ABI's structs and JSON entry
// points. A seeded generator mutates valid seeds (byte flips, hostile tokens, deep nesting, splices, cuts);
// every input must come back as a value or an error. A crash, a sanitizer report (the CI builds this with
// AddressSanitizer and UndefinedBehaviorSanitizer, halting on the first report) or an input that takes longer
// than the hang limit fails the run.
//
//   flashjit_fuzz [SECONDS [SEED]]     default 60 s, seed 1; prints what it ran, exits 0 when nothing failed
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "cache/entry_format.hpp"
#include "common/json_depth.hpp"
#include "compile/worker.hpp"
#include "dispatch/tuned_table.hpp"
#include "flashjit/config.hpp"
#include "flashjit/flashjit.h"
#include "tune/sweep.hpp"
#include "tune/worker_protocol.hpp"

namespace {

constexpr unsigned kHangSeconds = 10;  // per input: far above any parse of these sizes
const char* g_target = "";
std::string g_input;

void on_hang(int) {
  const char msg[] = "flashjit_fuzz: an input ran past the hang limit in ";
  (void)!::write(2, msg, sizeof msg - 1);
  (void)!::write(2, g_target, std::strlen(g_target));
  (void)!::write(2, "\n", 1);
  std::ofstream("flashjit-fuzz-hang.txt", std::ios::binary) << g_input;
  std::_Exit(3);
}

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const char* const kTokens[] = {"[", "]", "{", "}", "\"", "\\", ",", ":", "null", "true", "-1", "0", "1e999",
                               "-0", "18446744073709551615", "9223372036854775807", "-9223372036854775808",
                               "4294967297", "2147483648", "1099511627777", "\"\\u0000\"", "\"\\ud800\"", "\xff",
                               "\"fa3\"", "\"sm_90a\"", "\"kernel\"", "\"decode\"", "\"combine\"", "\"values\"",
                               "\"from\"", "\"to\"", "\"step\"", "\"factor\"", "=", "\n", "NaN", "1.5"};

struct Mutator {
  std::mt19937_64 rng;
  explicit Mutator(std::uint64_t seed) : rng(seed) {}
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); }

  std::string mutate(std::string s, const std::vector<std::string>& seeds) {
    const int rounds = 1 + static_cast<int>(below(4));
    for (int r = 0; r < rounds; ++r) {
      const std::size_t at = below(s.size() + 1);
      switch (below(8)) {
        case 0: if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1 << below(8)); break;
        case 1: s.insert(at, kTokens[below(std::size(kTokens))]); break;
        case 2: if (!s.empty()) s.erase(at, 1 + below(16)); break;
        case 3: s.resize(below(s.size() + 1)); break;
        case 4: {  // deep nesting, sometimes past any limit
          const std::size_t depth = below(2) ? 1 + below(80) : 20000 + below(80000);
          const char open = below(2) ? '[' : '{';
          s.insert(at, std::string(depth, open) + (open == '[' ? std::string(depth, ']') : std::string()));
          break;
        }
        case 5: {  // a piece of another seed
          const std::string& o = seeds[below(seeds.size())];
          const std::size_t from = below(o.size());
          s.insert(at, o.substr(from, below(o.size() - from + 1)));
          break;
        }
        case 6: {  // a number replaced by a hostile one
          const std::size_t d = s.find_first_of("0123456789", at);
          if (d != std::string::npos) s.replace(d, s.find_first_not_of("0123456789", d) - d, kTokens[13 + below(7)]);
          break;
        }
        default: s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), static_cast<char>(below(256))); break;
      }
    }
    return s;
  }
};

struct Target {
  const char* name;
  std::vector<std::string> seeds;
  void (*run)(const std::string&);
};

void run_config(const std::string& s) {
  (void)flashjit::parse_config_json(s);
  (void)flashjit::any_config_from_json(s);
  (void)flashjit::config_from_json(s);
  std::vector<std::string> pairs;
  for (std::size_t from = 0; from <= s.size();) {
    const std::size_t sp = s.find(' ', from);
    pairs.push_back(s.substr(from, sp == std::string::npos ? std::string::npos : sp - from));
    if (sp == std::string::npos) break;
    from = sp + 1;
  }
  (void)flashjit::parse_config_pairs(pairs);
  char out[512];
  (void)flashjit_emit(s.c_str(), out, sizeof out);
}

void run_sweep(const std::string& s) { (void)flashjit::tune::parse_sweep(s, "fuzz.json"); }
void run_table(const std::string& s) { (void)flashjit::dispatch::parse_table(s, "fuzz.json"); }

void run_entry(const std::string& s) {
  (void)flashjit::cache::decode(s, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
}

void run_protocols(const std::string& s) {
  (void)flashjit::compile::decode_request(s);
  (void)flashjit::compile::decode_reply(s);
  (void)flashjit::tune::decode_result(s);
  (void)flashjit::check_json_depth(s);
}

// The C ABI's structs: the bytes of the input laid over a zeroed struct (pointers cleared to NULL or to a fake
// aligned address, so that only the library's checks run; host strings point into the input), struct_size taken
// from the input.
flashjit_runtime* g_runtime = nullptr;

template <class T>
T struct_from(const std::string& s) {
  T a;
  std::memset(&a, 0, sizeof a);
  std::memcpy(reinterpret_cast<char*>(&a), s.data(), std::min(s.size(), sizeof a));
  return a;
}

void run_capi(const std::string& s) {
  {
    auto a = struct_from<flashjit_attention_args>(s);
    a.struct_size %= sizeof a + 64;  // past sizeof: a newer header's struct, whose tail (zeros here) is read
    const void* fake = reinterpret_cast<const void*>(0x10000);
    a.q = a.k = a.v = fake, a.o = const_cast<void*>(fake), a.lse = nullptr, a.stream = nullptr;
    a.config_json = s.size() > 200 ? s.c_str() + 200 : nullptr;
    a.cu_seqlens_q = a.cu_seqlens_k = nullptr;
    // Paged: the input decides whether there is a page table and seqused_k; never a pointer of its own.
    const int* fake_ints = reinterpret_cast<const int*>(0x40000);
    a.page_table = a.page_table != nullptr ? fake_ints : nullptr;
    a.seqused_k = a.seqused_k != nullptr ? fake_ints : nullptr;
    // The snippets are host strings the library reads: the input's text (NUL-terminated) or none.
    a.score_mod = s.size() > 300 ? s.c_str() + 300 : nullptr;
    a.mask_mod = s.size() > 400 ? s.c_str() + 400 : nullptr;
    struct { flashjit_attention_args a; char tail[64]; } wide{a, {}};
    (void)flashjit_forward(g_runtime, &wide.a);
    char out[256];
    (void)flashjit_select(g_runtime, &wide.a, out, sizeof out);
  }
  {
    auto a = struct_from<flashjit_decode_args>(s);
    a.struct_size %= sizeof a + 64;
    const void* fake = reinterpret_cast<const void*>(0x20000);
    a.q = a.k_cache = a.v_cache = fake, a.o = const_cast<void*>(fake);
    a.lse = nullptr, a.seqlens_k = nullptr, a.page_table = nullptr, a.workspace = nullptr, a.stream = nullptr;
    a.score_mod = s.size() > 300 ? s.c_str() + 300 : nullptr;
    a.mask_mod = s.size() > 400 ? s.c_str() + 400 : nullptr;
    struct { flashjit_decode_args a; char tail[64]; } wide{a, {}};
    (void)flashjit_decode_workspace_bytes(g_runtime, &wide.a);
    (void)flashjit_decode(g_runtime, &wide.a);
  }
  {
    auto a = struct_from<flashjit_merge_args>(s);
    a.struct_size %= sizeof a + 64;
    a.o = reinterpret_cast<void*>(0x30000), a.lse = nullptr, a.o_in = nullptr, a.lse_in = nullptr, a.stream = nullptr;
    struct { flashjit_merge_args a; char tail[64]; } wide{a, {}};
    (void)flashjit_merge(g_runtime, &wide.a);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 60;
  const std::uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  ::signal(SIGALRM, on_hang);
  char dir[] = "/tmp/flashjit-fuzz-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 2;
  flashjit_runtime_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.cache_dir = dir;
  o.log_level = FLASHJIT_LOG_ERROR;
  o.log_callback = [](int, const char*, void*) {};
  if (flashjit_runtime_create(&o, &g_runtime) != FLASHJIT_OK) {
    std::fprintf(stderr, "flashjit_fuzz: no runtime: %s\n", flashjit_last_error());
    return 2;
  }

  flashjit::dispatch::TunedTable table;
  table.stamp = flashjit::dispatch::system_stamp("NVIDIA H200", flashjit::Arch{90, true}, 13000);
  table.entries.resize(1);
  table.entries[0].problem.heads_q = table.entries[0].problem.heads_kv = 8;
  table.entries[0].problem.head_dim = 128;
  table.entries[0].problem.seqlen_q = table.entries[0].problem.seqlen_k = 512;
  const std::string configs[] = {
      R"({"algorithm":"fa3","arch":"sm_90a","head_dim":128,"block_m":128,"block_n":128,"stages":2,"consumer_warpgroups":2,"mask":"causal"})",
      R"({"kernel":"decode","arch":"sm_90a","head_dim":128,"mask":"sliding_window"})",
      R"({"kernel":"combine","arch":"sm_80","head_dim":64})",
      "algorithm=fa2 arch=sm_80 head_dim=64 block_n=64 warps=4 stages=2 varlen=true"};
  std::vector<Target> targets = {
      {"config", {configs, configs + 4}, run_config},
      {"sweep", {}, run_sweep},
      {"tuned table", {flashjit::dispatch::to_json(table)}, run_table},
      {"cache entry", {}, run_entry},
      {"protocols", {}, run_protocols},
      {"c abi", {std::string(512, '\0'), std::string(512, '\x01'), std::string(configs[0]) + std::string(300, ' ')},
       run_capi},
  };
  for (const char* f : {"configs/llama3.json", "configs/decode.json", "configs/fa3_paper.json"}) {
    std::string text = read_file((std::string(FLASHJIT_SOURCE_DIR) + "/" + f).c_str());
    if (!text.empty()) targets[1].seeds.push_back(text);
  }
  targets[1].seeds.push_back(R"({"problems":[{"heads_q":8,"head_dim":64,"seqlen":{"from":128,"to":4096,"factor":2}}],
                                 "candidates":{"block_n":[64,128],"stages":{"values":[2,3]}}})");
  {
    flashjit::cache::Entry e;
    e.key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    e.cubin = std::string("\x7f" "ELF\0\1\2", 7);
    e.source = "__global__ void k() {}\n";
    e.meta = {{"name", "k"}, {"ptxas", {{"registers", 32}}}};
    targets[3].seeds.push_back(flashjit::cache::encode(e));
  }
  {
    flashjit::compile::CompiledKernel k;
    k.cubin = "cubin bytes";
    targets[4].seeds = {flashjit::compile::encode_request({"n", "e", "text"}, {"-arch=sm_80"}),
                        flashjit::compile::encode_reply(k),
                        flashjit::compile::encode_reply(flashjit::Error(flashjit::ErrorCode::compile, "m", "d"))};
  }
  for (auto& t : targets)
    if (t.seeds.empty()) t.seeds.push_back("{}");

  Mutator m(seed);
  std::vector<long> runs(targets.size(), 0);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long total = 0;
  while (std::chrono::steady_clock::now() < end) {
    const std::size_t i = static_cast<std::size_t>(total % static_cast<long>(targets.size()));
    Target& t = targets[i];
    g_target = t.name;
    g_input = m.mutate(t.seeds[m.below(t.seeds.size())], t.seeds);
    ::alarm(kHangSeconds);
    t.run(g_input);
    ::alarm(0);
    // Keep some mutants as seeds (bounded), so that mutations build on each other.
    if (m.below(16) == 0 && g_input.size() < (1u << 16)) {
      if (t.seeds.size() < 64) t.seeds.push_back(g_input);
      else t.seeds[4 + m.below(60)] = g_input;
    }
    ++runs[i], ++total;
  }
  flashjit_runtime_destroy(g_runtime);
  std::string rm = std::string("rm -rf ") + dir;
  (void)!std::system(rm.c_str());
  std::printf("flashjit_fuzz: %ld inputs in %.0f s (seed %llu):", total, seconds, static_cast<unsigned long long>(seed));
  for (std::size_t i = 0; i < targets.size(); ++i) std::printf(" %s %ld%s", targets[i].name, runs[i], i + 1 < targets.size() ? "," : "");
  std::printf("; no crash, hang or sanitizer report\n");
  return 0;
}
