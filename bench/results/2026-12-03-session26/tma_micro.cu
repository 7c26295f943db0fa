// TMA issue ceiling for paged K/V tiles (session 26): loads only (a producer warp, a consumer warp that frees
// each stage as soon as it is full, no math), 128-key tiles of head dim 128 bf16 (two 64-column blocks, 128-byte
// swizzle) into two stages, one CTA per SM; boxes of 16/32/64 tokens (one per page, from a shuffled page table,
// issued by the producer warp's lanes like fa3's kWarpLoads) against one 128-token box per column block.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <random>
#include <cuda.h>
#include <cuda_runtime.h>
#include "ptx/tma.cuh"
#include "ptx/mbarrier.cuh"

using namespace flashjit;
constexpr int D = 128, HKV = 8, BN = 128, STAGES = 2, TILE_BYTES = BN * D * 2;

template <int kBox>
__global__ void __launch_bounds__(64, 1) loads_only(const __grid_constant__ CUtensorMap mk, const __grid_constant__ CUtensorMap mv,
                                                    const int* table, int table_stride, int batches, int tiles, int reps) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
  __shared__ __align__(8) unsigned long long bars[2 * STAGES];
  auto sa = [](const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) { ptx::mbarrier_init(sa(&bars[s]), 1); ptx::mbarrier_init(sa(&bars[STAGES + s]), 1); }
    ptx::mbarrier_init_fence();
  }
  __syncthreads();
  const int head = blockIdx.x % HKV, b = (blockIdx.x / HKV) % batches;
  const TensorMap* k = reinterpret_cast<const TensorMap*>(&mk);
  const TensorMap* v = reinterpret_cast<const TensorMap*>(&mv);
  const int total = tiles * reps;
  if (warp == 0) {
    constexpr int kPages = BN / kBox;
    for (int i = 0; i < total; ++i) {
      const int stage = i % STAGES, key0 = (i % tiles) * BN;
      int page = 0;
      if (kBox < BN && lane < kPages) page = table[b * table_stride + (key0 + lane * kBox) / kBox];
      ptx::mbarrier_wait(sa(&bars[STAGES + stage]), ((i / STAGES) & 1) ^ 1);
      if (lane == 0) ptx::mbarrier_arrive_expect_tx(sa(&bars[stage]), 2 * TILE_BYTES);
      __syncwarp();
      const unsigned kd = sa(smem + stage * 2 * TILE_BYTES), vd = kd + TILE_BYTES, bar = sa(&bars[stage]);
      if (lane < kPages) {
        for (int cb = 0; cb < 2; ++cb) {
          const unsigned off = cb * BN * 128 + lane * kBox * 128;
          if (kBox < BN) ptx::tma_load_4d(kd + off, k, bar, cb * 64, 0, head, page);
          else ptx::tma_load_4d(kd + off, k, bar, cb * 64, key0, head, b);
        }
        for (int cb = 0; cb < 2; ++cb) {
          const unsigned off = cb * BN * 128 + lane * kBox * 128;
          if (kBox < BN) ptx::tma_load_4d(vd + off, v, bar, cb * 64, 0, head, page);
          else ptx::tma_load_4d(vd + off, v, bar, cb * 64, key0, head, b);
        }
      }
    }
  } else if (lane == 0) {
    for (int i = 0; i < total; ++i) {
      const int stage = i % STAGES;
      ptx::mbarrier_wait(sa(&bars[stage]), (i / STAGES) & 1);
      ptx::mbarrier_arrive(sa(&bars[STAGES + stage]));
    }
  }
}

static CUtensorMap make_map(void* base, int rows_per_unit, long long units, int box_rows) {
  // view (D, rows, head, unit): element strides 1, HKV*D, D, rows*HKV*D
  CUtensorMap m;
  cuuint64_t dims[4] = {D, (cuuint64_t)rows_per_unit, HKV, (cuuint64_t)units};
  cuuint64_t strides[3] = {HKV * D * 2ull, D * 2ull, (cuuint64_t)rows_per_unit * HKV * D * 2ull};
  cuuint32_t box[4] = {64, (cuuint32_t)box_rows, 1, 1}, es[4] = {1, 1, 1, 1};
  CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, base, dims, strides, box, es,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r) printf("encode error %d\n", (int)r);
  return m;
}

int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int seqk = 8192, tiles = seqk / BN, reps = 40;
  const size_t smem = STAGES * 2 * TILE_BYTES + 1024;
  printf("loads only: %d CTAs (one per SM), K+V tiles of %d keys x d%d bf16, %d stages, %d tiles per CTA\n", sms, BN, D, STAGES, tiles * reps);
  printf("fa3 on B4 1024 new over 8192, llama3 causal, contiguous 596 TFLOP/s = %.2f us of math per tile per SM\n",
         4.0 * 128 * 128 * 128 / (596e12 / sms) * 1e6);
  for (int batches : {1, 4}) {
    const size_t el = (size_t)batches * seqk * HKV * D;
    void *kc, *vc; cudaMalloc(&kc, el * 2); cudaMalloc(&vc, el * 2); cudaMemset(kc, 0, el * 2); cudaMemset(vc, 0, el * 2);
    auto run = [&](auto kern, int box, const char* name) {
      const int page = box < BN ? box : seqk;
      const int per_seq = seqk / page, pages = batches * per_seq;
      std::vector<int> perm(pages); for (int i = 0; i < pages; ++i) perm[i] = i;
      std::mt19937 g(7); std::shuffle(perm.begin(), perm.end(), g);
      int* table; cudaMalloc(&table, pages * 4); cudaMemcpy(table, perm.data(), pages * 4, cudaMemcpyHostToDevice);
      CUtensorMap mk = make_map(kc, page, pages, box < BN ? box : BN), mv = make_map(vc, page, pages, box < BN ? box : BN);
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
      cudaEvent_t a, e; cudaEventCreate(&a); cudaEventCreate(&e);
      kern<<<sms, 64, smem>>>(mk, mv, table, per_seq, batches, tiles, 2);
      std::vector<float> t;
      for (int r = 0; r < 5; ++r) { cudaEventRecord(a); kern<<<sms, 64, smem>>>(mk, mv, table, per_seq, batches, tiles, reps); cudaEventRecord(e); cudaEventSynchronize(e); float ms; cudaEventElapsedTime(&ms, a, e); t.push_back(ms); }
      std::sort(t.begin(), t.end());
      const float ms = t[2]; const double per_tile_us = ms * 1e3 / (tiles * reps);
      const double bytes = (double)sms * tiles * reps * 2 * TILE_BYTES;
      printf("  B%d (%4.0f MB of K/V) %-22s %6.3f us per K+V tile per SM, %5.2f TB/s into shared memory (%s)\n", batches,
             el * 4 / 1e6, name, per_tile_us, bytes / (ms * 1e-3) / 1e12, cudaGetErrorString(cudaGetLastError()));
      cudaFree(table);
    };
    run(loads_only<128>, 128, "contiguous 128-key box");
    run(loads_only<64>, 64, "64-token pages");
    run(loads_only<32>, 32, "32-token pages");
    run(loads_only<16>, 16, "16-token pages");
    cudaFree(kc); cudaFree(vc);
  }
  return 0;
}
