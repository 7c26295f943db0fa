// Completing a config a text gave in part (Runtime::resolve): the fields not given take the dispatcher's
// choice for the config's arch.
#pragma once

#include "flashjit/config.hpp"

namespace flashjit::dispatch {

// Prefill: algorithm auto becomes fa3 where the arch and head dim allow it, else fa2, else naive; the tiles
// not given are the heuristic ones of that algorithm, dtype, head dim, mask and arch (fa3_heuristic,
// fa2_heuristic, naive_config). Decode and combine: their defaults. Not validated.
AnyKernelConfig resolve(const PartialConfig& config);

}  // namespace flashjit::dispatch
