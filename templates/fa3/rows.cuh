// Which query rows an FA3 work tile holds. Plain: kBM consecutive positions of one query head. Packed GQA
// (kPackGqa): the p.group query heads of one KV head together, tile row r = position r / group, head
// r % group of that KV head's group, so a tile covers kBM / group positions (the group divides kBM: the
// dispatcher checks). The TMA box of Q is then (columns, group, positions): in shared memory the same kBM
// rows as a plain tile, in that order.
#pragma once

#include "attention/params.cuh"

namespace flashjit::fa3 {

template <bool kPackGqa, int kBM>
struct Rows {
  int group;  // query heads per tile position: p.group packed, 1 plain

  __device__ explicit Rows(const AttentionParams& p) : group(kPackGqa ? p.group : 1) {}

  __device__ int positions() const { return kPackGqa ? kBM / group : kBM; }      // per tile
  __device__ int position(int r) const { return kPackGqa ? r / group : r; }      // of tile row r, from the first
  __device__ int head_in_group(int r) const { return kPackGqa ? r % group : 0; }  // of tile row r
  // The scheduler's heads: the work tile's head is a KV head when packed.
  __device__ int tile_heads(const AttentionParams& p) const { return kPackGqa ? p.heads_kv : p.heads_q; }
  __device__ int first_query_head(int tile_head) const { return kPackGqa ? tile_head * group : tile_head; }
  __device__ int kv_head(const AttentionParams& p, int tile_head) const {
    return kPackGqa ? tile_head : tile_head / p.group;
  }
  // Positions [first, end) of tile rows [r0, r1) (r1 > r0).
  __device__ void span(int r0, int r1, int& first, int& end) const {
    first = position(r0);
    end = position(r1 - 1) + 1;
  }
};

}  // namespace flashjit::fa3
