// Append bandwidth microbenchmark (session 26): the shipped template against variants and plain copies.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <random>
#include <cuda_runtime.h>
#include "append/kernel.cuh"

using namespace flashjit;
constexpr int HKV = 8, D = 128;

template <class K, int MinBlocks>
__global__ void __launch_bounds__(K::kThreads, MinBlocks) shipped(const __grid_constant__ AppendParams p) { K::run(p); }

// Variant: decomposition computed once, carried by adds; paged: one table read per thread when its vectors
// stay in one page.
template <class T, int kHeadDim, int kPageSize, int kWarps, int kVectors>
struct V2 {
  static constexpr int kThreads = 32 * kWarps, kVE = 16 / sizeof(T), kRV = kHeadDim / kVE, kCta = kThreads * kVectors;
  static constexpr bool kPaged = kPageSize > 0;
  static __device__ void run(const AppendParams& p) {
    const int b = blockIdx.y; const bool values = blockIdx.z == 1;
    const T* src = static_cast<const T*>(values ? p.v : p.k);
    T* cache = static_cast<T*>(values ? p.v_cache : p.k_cache);
    const long long s_batch = values ? p.v_batch : p.k_batch, s_seq = values ? p.v_seq : p.k_seq, s_head = values ? p.v_head : p.k_head;
    const long long c_batch = values ? p.vc_batch : p.kc_batch, c_seq = values ? p.vc_seq : p.kc_seq, c_head = values ? p.vc_head : p.kc_head;
    const int first = blockIdx.x * kCta + threadIdx.x;
    ptx::grid_dependency_wait();
    int start = 0, count = p.new_len;
    if (p.cu_seqlens != nullptr) { start = ptx::load_after_wait(p.cu_seqlens + b); count = min(max(ptx::load_after_wait(p.cu_seqlens + b + 1) - start, 0), p.new_len); }
    const int cached = ptx::load_after_wait(p.cache_seqlens + b);
    const int total = count * p.heads_kv * kRV;
    const int* table = kPaged ? p.page_table + static_cast<long long>(b) * p.page_table_stride : nullptr;
    const T* sbase = src + b * s_batch + start * s_seq;
    uint4 data[kVectors]; T* dst[kVectors];
    int page0 = -1, lastpage = -2;
    if constexpr (kPaged) {
      const int i0 = min(first, total - 1), i1 = min(first + (kVectors - 1) * kThreads, total - 1);
      const int t0 = i0 / kRV / p.heads_kv + cached, t1 = i1 / kRV / p.heads_kv + cached;
      if (first < total && t0 / kPageSize == t1 / kPageSize && t0 >= 0 && t1 < p.capacity) { lastpage = t0 / kPageSize; page0 = ptx::load_after_wait(table + lastpage); }
    }
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      const int i = first + j * kThreads;
      dst[j] = nullptr;
      if (i >= total) continue;
      const int row = i / kRV, token = row / p.heads_kv, head = row - token * p.heads_kv;
      const int column = (i % kRV) * kVE;
      data[j] = *reinterpret_cast<const uint4*>(sbase + token * s_seq + head * s_head + column);
      const int pos = cached + token;
      if (pos < 0 || pos >= p.capacity) continue;
      T* at;
      if constexpr (kPaged) {
        const int page = pos / kPageSize == lastpage ? page0 : ptx::load_after_wait(table + pos / kPageSize);
        if (page < 0 || page >= p.num_pages) continue;
        at = cache + page * c_batch + (pos % kPageSize) * c_seq;
      } else at = cache + b * c_batch + pos * c_seq;
      dst[j] = at + head * c_head + column;
    }
    ptx::launch_dependents();
#pragma unroll
    for (int j = 0; j < kVectors; ++j) if (dst[j] != nullptr) *reinterpret_cast<uint4*>(dst[j]) = data[j];
    if (p.seqlens_out != nullptr && blockIdx.x == 0 && !values && threadIdx.x == 0) p.seqlens_out[b] = cached + count;
  }
};
template <class K, int MinBlocks>
__global__ void __launch_bounds__(K::kThreads, MinBlocks) v2(const __grid_constant__ AppendParams p) { K::run(p); }

// Plain copies of n vectors: same shape (kV loads, then kV stores, then exit) and a grid-stride loop.
template <int kV>
__global__ void __launch_bounds__(128, 8) copy_shape(const uint4* s, uint4* d, long long n) {
  long long i0 = (long long)blockIdx.x * 128 * kV + threadIdx.x; uint4 x[kV];
#pragma unroll
  for (int j = 0; j < kV; ++j) if (i0 + j * 128 < n) x[j] = s[i0 + j * 128];
#pragma unroll
  for (int j = 0; j < kV; ++j) if (i0 + j * 128 < n) d[i0 + j * 128] = x[j];
}

struct Case { int batch, nnew, page; };
static float time_ms(cudaStream_t st, auto&& fn, int reps = 20) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) fn();
  std::vector<float> t;
  for (int r = 0; r < 7; ++r) { cudaEventRecord(a, st); for (int i = 0; i < reps; ++i) fn(); cudaEventRecord(b, st); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms / reps); }
  std::sort(t.begin(), t.end()); return t[3];
}

int main() {
  cudaStream_t st; cudaStreamCreate(&st);
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  std::vector<Case> cases = {{8, 4096, 0}, {8, 4096, 16}, {64, 512, 0}, {64, 512, 16}, {64, 512, 1}, {8, 4096, 256}};
  for (auto c : cases) {
    const int cached = 4097, ps = std::max(c.page, 1);
    const int cap = (cached + c.nnew + ps - 1) / ps * ps;
    const size_t newel = (size_t)c.batch * c.nnew * HKV * D, cacheel = (size_t)c.batch * cap * HKV * D + (c.page ? (size_t)cap * HKV * D : 0);
    bf16 *k, *v, *kc, *vc; cudaMalloc(&k, newel * 2); cudaMalloc(&v, newel * 2); cudaMalloc(&kc, cacheel * 2); cudaMalloc(&vc, cacheel * 2);
    cudaMemset(k, 1, newel * 2); cudaMemset(v, 2, newel * 2);
    int *lens, *table = nullptr; cudaMalloc(&lens, c.batch * 4);
    std::vector<int> hl(c.batch, cached); cudaMemcpy(lens, hl.data(), c.batch * 4, cudaMemcpyHostToDevice);
    const int per_row = cap / ps, pages = c.batch * per_row + per_row;
    if (c.page) { std::vector<int> perm(pages); for (int i = 0; i < pages; ++i) perm[i] = i; std::mt19937 g(1); std::shuffle(perm.begin(), perm.end(), g);
      cudaMalloc(&table, c.batch * per_row * 4); cudaMemcpy(table, perm.data(), c.batch * per_row * 4, cudaMemcpyHostToDevice); }
    AppendParams p{}; p.k = k; p.v = v; p.k_cache = kc; p.v_cache = vc; p.cache_seqlens = lens; p.page_table = table;
    p.k_seq = p.v_seq = HKV * D; p.k_head = p.v_head = D; p.k_batch = p.v_batch = (long long)c.nnew * HKV * D;
    p.kc_seq = p.vc_seq = HKV * D; p.kc_head = p.vc_head = D; p.kc_batch = p.vc_batch = (long long)(c.page ? c.page : cap) * HKV * D;
    p.heads_kv = HKV; p.new_len = c.nnew; p.capacity = cap; p.num_pages = pages; p.page_table_stride = per_row;
    const double bytes = 2.0 * newel * 2;  // written
    const long long per_seq = (long long)c.nnew * HKV * (D / 8);
    auto launch = [&](auto kern, int threads, int vec) { dim3 grid((per_seq + threads * vec - 1) / (threads * vec), c.batch, 2); kern<<<grid, threads, 0, st>>>(p); };
    printf("case B%d +%d page %d (%.1f MB written)\n", c.batch, c.nnew, c.page, bytes / 1e6);
    auto report = [&](const char* name, float ms) { printf("  %-34s %8.3f ms %6.2f TB/s written\n", name, ms, bytes / ms / 1e9); };
#define RUNP(PS) \
    report("shipped w4 v4 lb4", time_ms(st, [&] { launch(shipped<append::AppendKernel<bf16, D, PS, 4, 4>, 4>, 128, 4); })); \
    report("shipped w4 v4 lb8", time_ms(st, [&] { launch(shipped<append::AppendKernel<bf16, D, PS, 4, 4>, 8>, 128, 4); })); \
    report("shipped w4 v2 lb8", time_ms(st, [&] { launch(shipped<append::AppendKernel<bf16, D, PS, 4, 2>, 8>, 128, 2); })); \
    report("shipped w4 v2 lb16", time_ms(st, [&] { launch(shipped<append::AppendKernel<bf16, D, PS, 4, 2>, 16>, 128, 2); })); \
    report("shipped w4 v8 lb4", time_ms(st, [&] { launch(shipped<append::AppendKernel<bf16, D, PS, 4, 8>, 4>, 128, 8); })); \
    report("shipped w8 v4 lb4", time_ms(st, [&] { launch(shipped<append::AppendKernel<bf16, D, PS, 8, 4>, 4>, 256, 4); })); \
    report("shipped w4 v1 lb16", time_ms(st, [&] { launch(shipped<append::AppendKernel<bf16, D, PS, 4, 1>, 16>, 128, 1); })); \
    report("v2 w4 v4 lb4", time_ms(st, [&] { launch(v2<V2<bf16, D, PS, 4, 4>, 4>, 128, 4); })); \
    report("v2 w4 v4 lb8", time_ms(st, [&] { launch(v2<V2<bf16, D, PS, 4, 4>, 8>, 128, 4); })); \
    report("v2 w4 v2 lb16", time_ms(st, [&] { launch(v2<V2<bf16, D, PS, 4, 2>, 16>, 128, 2); })); \
    report("v2 w4 v8 lb4", time_ms(st, [&] { launch(v2<V2<bf16, D, PS, 4, 8>, 4>, 128, 8); }));
    if (c.page == 0) { RUNP(0) } else if (c.page == 1) { RUNP(1) } else if (c.page == 16) { RUNP(16) } else { RUNP(256) }
    const long long n = (long long)(newel * 2 / 16);  // one tensor's vectors; copy k->kc and v->vc
    report("copy_shape v4 (k,v)", time_ms(st, [&] { copy_shape<4><<<(n + 511) / 512, 128, 0, st>>>((uint4*)k, (uint4*)kc, n); copy_shape<4><<<(n + 511) / 512, 128, 0, st>>>((uint4*)v, (uint4*)vc, n); }));
    report("copy_shape v2 (k,v)", time_ms(st, [&] { copy_shape<2><<<(n + 255) / 256, 128, 0, st>>>((uint4*)k, (uint4*)kc, n); copy_shape<2><<<(n + 255) / 256, 128, 0, st>>>((uint4*)v, (uint4*)vc, n); }));
    report("cudaMemcpyAsync (k,v)", time_ms(st, [&] { cudaMemcpyAsync(kc, k, newel * 2, cudaMemcpyDeviceToDevice, st); cudaMemcpyAsync(vc, v, newel * 2, cudaMemcpyDeviceToDevice, st); }));
    cudaError_t e = cudaGetLastError(); if (e) printf("error %s\n", cudaGetErrorString(e));
    cudaFree(k); cudaFree(v); cudaFree(kc); cudaFree(vc); cudaFree(lens); if (table) cudaFree(table);
  }
  return 0;
}
