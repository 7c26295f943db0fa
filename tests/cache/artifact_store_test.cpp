// The artifact store without NVRTC (a compiler stands in): a build that throws fails its call and lets the next
// one retry; the source of a failed compile is saved where no one else can redirect it (issue 29).
#include "cache/artifact_store.hpp"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "support/catch.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using flashjit::cache::ArtifactStore;
using flashjit::cache::CacheOptions;
using flashjit::cache::DiskCache;
using flashjit::test::TempDir;

namespace {

flashjit::KernelConfig fa2_config() {
  flashjit::KernelConfig c;
  c.algorithm = flashjit::Algorithm::fa2;
  c.arch = *flashjit::Arch::parse("sm_80");
  c.head_dim = 64;
  c.block_m = 64, c.block_n = 64, c.warps = 4, c.stages = 2;
  return c;
}

DiskCache open_cache(const fs::path& dir) {
  auto c = DiskCache::open(CacheOptions{dir, 0});
  INFO((c ? std::string() : c.error().to_string()));
  REQUIRE(c.ok());
  return std::move(c).value();
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  std::string old;
  bool had;
  ScopedEnv(const char* n, const std::string& value) : name(n) {
    const char* v = ::getenv(n);
    had = v != nullptr;
    if (had) old = v;
    ::setenv(n, value.c_str(), 1);
  }
  ~ScopedEnv() { had ? ::setenv(name.c_str(), old.c_str(), 1) : ::unsetenv(name.c_str()); }
};

}  // namespace

TEST_CASE("artifact store: a build that throws fails that call only; the next call builds", "[cache]") {
  TempDir tmp;
  REQUIRE(flashjit::validate(fa2_config()).empty());
  int calls = 0;
  ArtifactStore store(open_cache(tmp.path), /*jit=*/true, flashjit::log::Logger{},
                      [&](const flashjit::codegen::GeneratedSource&, const std::vector<std::string>&)
                          -> flashjit::Result<flashjit::compile::CompiledKernel> {
                        if (++calls == 1) throw std::runtime_error("compiler exploded");
                        flashjit::compile::CompiledKernel k;
                        k.cubin = "\x7f" "ELF fake cubin";
                        return k;
                      });
  flashjit::Result<std::shared_ptr<const flashjit::cache::Artifact>> first = flashjit::Error();
  REQUIRE_NOTHROW(first = store.get(fa2_config()));
  REQUIRE_FALSE(first.ok());
  CHECK(first.error().message.find("compiler exploded") != std::string::npos);
  flashjit::Result<std::shared_ptr<const flashjit::cache::Artifact>> second = flashjit::Error();
  REQUIRE_NOTHROW(second = store.get(fa2_config()));
  REQUIRE(second.ok());
  CHECK((*second)->cubin == "\x7f" "ELF fake cubin");
  CHECK(calls == 2);
}

TEST_CASE("artifact store: a failed compile's source is saved without following links", "[cache]") {
  TempDir cache_dir, tmp, victim_dir;
  DiskCache disk = open_cache(cache_dir.path);
  REQUIRE(::chmod(cache_dir.path.c_str(), 0500) == 0);  // read-only: the source goes to the temporary folder
  DiskCache read_only = open_cache(cache_dir.path);
  REQUIRE_FALSE(read_only.writable());
  ScopedEnv env("TMPDIR", tmp.path.string());

  const fs::path victim = victim_dir / "precious";
  { std::ofstream(victim) << "root's secret\n"; }
  REQUIRE(::chmod(victim.c_str(), 0600) == 0);
  const std::string name = "fa2_kernel_that_failed";
  // Another user's links where a failed source would go: the file itself, and a whole folder.
  for (const std::string& folder : {std::string("flashjit-failed"), "flashjit-failed-" + std::to_string(::geteuid())}) {
    fs::create_directories(tmp.path / folder);
    REQUIRE(::chmod((tmp.path / folder).c_str(), 0777) == 0);
    fs::create_symlink(victim, tmp.path / folder / (name + ".cu"));
  }
  SECTION("a link at the file's path") {}
  SECTION("the folder itself a link") {
    const fs::path mine = tmp.path / ("flashjit-failed-" + std::to_string(::geteuid()));
    fs::remove_all(mine);
    fs::create_symlink(victim_dir.path, mine);
  }
  const std::string saved = flashjit::cache::save_failed_source(read_only, name, "__global__ void k() {}\n");
  CHECK(read_file(victim) == "root's secret\n");
  INFO(saved);
  REQUIRE(saved.find("(nowhere") == std::string::npos);
  CHECK(read_file(saved) == "__global__ void k() {}\n");
  CHECK_FALSE(fs::is_symlink(saved));
  struct stat st {};
  REQUIRE(::lstat(fs::path(saved).parent_path().c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 077) == 0);
  CHECK(fs::path(saved).parent_path().parent_path() == tmp.path);
  ::chmod(cache_dir.path.c_str(), 0700);
}
