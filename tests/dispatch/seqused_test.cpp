// seqused_k over contiguous keys on the host: check(AttentionProblem) of padded dense and ragged batches with
// per-sequence key counts (fake pointers, never dereferenced), the dispatcher's seqused_k configs (choose,
// supports), and check_seqlens over a stand-in driver whose "device" pointers are host memory.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dispatch/heuristics.hpp"
#include "dispatch/page_check.hpp"
#include "flashjit/problem.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::AttentionProblem;
using flashjit::DType;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using flashjit::test::contains;

namespace {

constexpr Arch kSm90a{90, true};
constexpr Arch kSm80{80, false};

const void* fake(std::uintptr_t address) { return reinterpret_cast<const void*>(address); }
const int* fake_ints(std::uintptr_t address) { return reinterpret_cast<const int*>(address); }

// A padded batch [4, 512 / 4096, 32 / 8, 128], causal, each sequence using seqused_k[b] of its 4096 keys.
AttentionProblem used_problem() {
  AttentionProblem p;
  p.dtype = DType::bf16;
  p.batch = 4, p.seqlen_q = 512, p.seqlen_k = 4096;
  p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128;
  p.mask = MaskKind::causal;
  p.q = fake(0x100000), p.k = fake(0x200000), p.v = fake(0x300000);
  p.o = reinterpret_cast<void*>(std::uintptr_t{0x400000});
  p.seqused_k = fake_ints(0x600000);
  return p;
}

std::string message(const flashjit::Status& s) { return s.ok() ? std::string() : s.error().message; }

CUresult host_copy(void* dst, CUdeviceptr src, size_t bytes) {
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}
CUresult no_sync(CUstream) { return CUDA_SUCCESS; }
CUresult not_capturing(CUstream, CUstreamCaptureStatus* s) {
  *s = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

}  // namespace

TEST_CASE("seqused_k: check() takes it over contiguous keys, dense or ragged, and names a bad one",
          "[dispatch][seqused]") {
  AttentionProblem p = used_problem();
  CHECK(check(p).ok());
  p.cu_seqlens_q = fake_ints(0x700000), p.cu_seqlens_k = fake_ints(0x800000);
  p.total_q = 1500, p.total_k = 9000;
  CHECK(check(p).ok());
  p = used_problem();
  p.seqused_k = fake_ints(0x600002);
  CHECK(contains(message(check(p)), "seqused_k (0x600002) must be 4-byte aligned (int32)"));
  p = used_problem();
  p.block_mask.kv_num_blocks = p.block_mask.kv_indices = fake_ints(0x900000);
  p.block_mask.num_q_blocks = 4, p.block_mask.num_kv_blocks = 32;
  CHECK(contains(message(check(p)), "seqused_k over contiguous keys does not take a block mask"));
  p = used_problem();
  p.page_size = 16;  // the page fields still need a page table
  CHECK(contains(message(check(p)), "page_size, num_pages and max_pages_per_seq are for paged problems"));
}

TEST_CASE("seqused_k: the dispatcher compiles it in for contiguous keys only", "[dispatch][seqused]") {
  for (const Arch arch : {kSm90a, kSm80}) {
    AttentionProblem p = used_problem();
    auto c = flashjit::dispatch::choose(p, arch);
    REQUIRE(c.ok());
    CHECK(c->seqused_k);
    CHECK(c->algorithm == (arch.accelerated ? Algorithm::fa3 : Algorithm::fa2));
    CHECK(flashjit::dispatch::supports(*c, p, arch).ok());
    for (Algorithm a : {Algorithm::fa2, Algorithm::naive}) {
      auto explicit_choice = flashjit::dispatch::choose(p, arch, a);
      REQUIRE(explicit_choice.ok());
      CHECK(explicit_choice->seqused_k);
    }
    KernelConfig plain = *c;
    plain.seqused_k = false;
    CHECK(contains(message(flashjit::dispatch::supports(plain, p, arch)),
                   "the problem has seqused_k over contiguous keys but the kernel does not read it: set seqused_k"));
    p.seqused_k = nullptr;
    auto none = flashjit::dispatch::choose(p, arch);
    REQUIRE(none.ok());
    CHECK_FALSE(none->seqused_k);
    CHECK(contains(message(flashjit::dispatch::supports(*c, p, arch)),
                   "a seqused_k kernel needs a problem with seqused_k over contiguous keys"));
  }
  // Paged problems read seqused_k through their pages: no seqused_k flag.
  AttentionProblem paged = used_problem();
  paged.page_table = fake_ints(0x500000), paged.page_size = 16, paged.num_pages = 1024, paged.max_pages_per_seq = 256;
  auto c = flashjit::dispatch::choose(paged, kSm90a);
  REQUIRE(c.ok());
  CHECK_FALSE(c->seqused_k);
  CHECK(c->page_size == 16);
}

TEST_CASE("seqused_k: check_seqlens refuses counts past seqlen_k or a sequence's own keys", "[dispatch][seqused]") {
  flashjit::cuda::Api api;
  api.cuMemcpyDtoH = host_copy, api.cuStreamSynchronize = no_sync, api.cuStreamIsCapturing = not_capturing;
  std::vector<int> used{40, 0, 17};
  AttentionProblem p;
  p.batch = 3, p.seqlen_q = 5, p.seqlen_k = 40;
  p.seqused_k = used.data();
  CHECK(flashjit::dispatch::check_seqlens(api, p).ok());
  used[0] = 41;
  CHECK(contains(message(flashjit::dispatch::check_seqlens(api, p)), "seqused_k[0] = 41 is outside [0, seqlen_k = 40]"));
  used[0] = -1;
  CHECK(contains(message(flashjit::dispatch::check_seqlens(api, p)), "seqused_k[0] = -1"));
  // Ragged keys: each count within its sequence's cu_seqlens_k length too.
  std::vector<int> cu_q{0, 5, 10, 15}, cu_k{0, 40, 45, 60};
  p.cu_seqlens_q = cu_q.data(), p.cu_seqlens_k = cu_k.data(), p.total_q = 15, p.total_k = 60;
  used = {40, 5, 15};
  CHECK(flashjit::dispatch::check_seqlens(api, p).ok());
  used[2] = 16;
  CHECK(contains(message(flashjit::dispatch::check_seqlens(api, p)),
                 "seqused_k[2] = 16 is more keys than sequence 2 has in cu_seqlens_k (15)"));
}
