#include "capi/args.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "capi/struct_size.hpp"
#include "runtime/settings.hpp"

namespace flashjit::capi {
namespace {

// Fields appended to a struct must start at or past the end of the struct before them, so that a caller built
// against the older header, whose struct_size is that struct's sizeof (its tail padding included), covers none of
// them: the variants follow check_seqlens and chunk_size, which ended the structs at 248 and 264 bytes (LP64).
static_assert(sizeof(void*) != 8 || (offsetof(flashjit_attention_args, softcap) == 248 &&
                                     offsetof(flashjit_decode_args, softcap) == 264),
              "a variant field starts inside the older struct's size");
// The snippets' fields followed the variants, which ended the structs at 280 and 296 bytes (LP64).
static_assert(sizeof(void*) != 8 || (offsetof(flashjit_attention_args, score_mod) == 280 &&
                                     offsetof(flashjit_decode_args, score_mod) == 296),
              "a snippet field starts inside the older struct's size");
// The paged fields followed the alignment, which ended flashjit_attention_args at 464 bytes (LP64).
static_assert(sizeof(void*) != 8 || offsetof(flashjit_attention_args, page_table) == 464,
              "a paged field starts inside the older struct's size");
// The CSR page-table fields followed check_pages, which ended flashjit_attention_args at 496 bytes (LP64).
static_assert(sizeof(void*) != 8 || offsetof(flashjit_attention_args, page_indptr) == 496,
              "a CSR field starts inside the older struct's size");
// The decode's CSR page-table fields followed seqlens_out, which ended flashjit_decode_args at 552 bytes (LP64).
static_assert(sizeof(void*) != 8 || offsetof(flashjit_decode_args, page_indptr) == 552,
              "a decode CSR field starts inside the older struct's size");
// The bias fields followed the block mask's fields in flashjit_attention_args (576 bytes, LP64) and the CSR fields in
// flashjit_decode_args (568).
static_assert(sizeof(void*) != 8 || (offsetof(flashjit_attention_args, bias) == 576 &&
                                     offsetof(flashjit_decode_args, bias) == 568),
              "a bias field starts inside the older struct's size");
// The relative-logits fields followed the bias strides, which ended flashjit_attention_args at 624 bytes (LP64).
static_assert(sizeof(void*) != 8 || offsetof(flashjit_attention_args, rel_bias) == 624,
              "a rel_bias field starts inside the older struct's size");
static_assert(sizeof(flashjit_attention_args::aux_pointers) / sizeof(void*) == ModAux::kPointers &&
                  sizeof(flashjit_attention_args::aux_scalars) / sizeof(float) == ModAux::kScalars &&
                  sizeof(flashjit_attention_args::aux_integers) / sizeof(int64_t) == ModAux::kIntegers,
              "the C ABI's aux arrays are ModAux's");

// flashjit_bias_type is BiasType in the same order.
static_assert(FLASHJIT_BIAS_NONE == static_cast<int>(BiasType::none) && FLASHJIT_BIAS_FP32 == static_cast<int>(BiasType::fp32) &&
              FLASHJIT_BIAS_BF16 == static_cast<int>(BiasType::bf16) && FLASHJIT_BIAS_FP16 == static_cast<int>(BiasType::fp16) &&
              FLASHJIT_BIAS_BOOL == static_cast<int>(BiasType::boolean));
Result<BiasType> bias_type_of(int v) {
  if (v >= FLASHJIT_BIAS_NONE && v <= FLASHJIT_BIAS_BOOL) return static_cast<BiasType>(v);
  return Error(ErrorCode::invalid_argument,
               fmt::format("bias_type {} is not a flashjit_bias_type (0 none, 1 fp32, 2 bf16, 3 fp16, 4 bool)", v));
}

// The bias of an attention or decode args struct, where the caller's struct has it.
template <class Args, class Problem>
Status read_bias(const Args& a, Problem& p) {
  if (FLASHJIT_PRESENT(a, bias)) p.bias = a.bias;
  if (FLASHJIT_PRESENT(a, bias_type)) {
    auto type = bias_type_of(a.bias_type);
    if (!type.ok()) return std::move(type).error();
    p.bias_type = *type;
  }
  if (FLASHJIT_PRESENT(a, bias_strides))
    p.bias_strides = BiasStrides{a.bias_strides.batch, a.bias_strides.head, a.bias_strides.q, a.bias_strides.k};
  return {};
}

// The snippets and their aux values of an attention or decode args struct, where the caller's struct has them.
template <class Args, class Problem>
void read_snippets(const Args& a, Problem& p) {
  if (FLASHJIT_PRESENT(a, score_mod)) p.score_mod = a.score_mod;
  if (FLASHJIT_PRESENT(a, mask_mod)) p.mask_mod = a.mask_mod;
  if (FLASHJIT_PRESENT(a, aux_pointers))
    for (int i = 0; i < ModAux::kPointers; ++i) p.aux.pointers[i] = a.aux_pointers[i];
  if (FLASHJIT_PRESENT(a, aux_scalars))
    for (int i = 0; i < ModAux::kScalars; ++i) p.aux.scalars[i] = a.aux_scalars[i];
  if (FLASHJIT_PRESENT(a, aux_integers))
    for (int i = 0; i < ModAux::kIntegers; ++i) p.aux.integers[i] = a.aux_integers[i];
}


Result<std::optional<LogLevel>> log_level_of(int v) {
  switch (v) {
    case FLASHJIT_LOG_DEFAULT: return std::optional<LogLevel>{};
    case FLASHJIT_LOG_ERROR: return std::optional{LogLevel::error};
    case FLASHJIT_LOG_WARN: return std::optional{LogLevel::warn};
    case FLASHJIT_LOG_INFO: return std::optional{LogLevel::info};
    case FLASHJIT_LOG_DEBUG: return std::optional{LogLevel::debug};
    default:
      return Error(ErrorCode::invalid_argument,
                   fmt::format("log_level {} is not a flashjit_log_level (0 default, 1 error .. 4 debug)", v));
  }
}

int log_level_code(LogLevel level) {
  switch (level) {
    case LogLevel::error: return FLASHJIT_LOG_ERROR;
    case LogLevel::warn: return FLASHJIT_LOG_WARN;
    case LogLevel::info: return FLASHJIT_LOG_INFO;
    case LogLevel::debug: return FLASHJIT_LOG_DEBUG;
  }
  return FLASHJIT_LOG_DEBUG;
}

// The pdl and check_pages fields: 1 on, -1 off, 0 the default (nullopt: the environment decides).
Result<std::optional<bool>> switch_of(int v, const char* field) {
  switch (v) {
    case 0: return std::optional<bool>{};
    case 1: return std::optional{true};
    case -1: return std::optional{false};
    default:
      return Error(ErrorCode::invalid_argument,
                   fmt::format("{} is {}: 1 turns it on, -1 off, 0 leaves the default", field, v));
  }
}

LogCallback log_callback_of(flashjit_log_callback callback, void* user) {
  return [callback, user](LogLevel level, std::string_view message) {
    const std::string text(message);  // NUL-terminated
    callback(log_level_code(level), text.c_str(), user);
  };
}

}  // namespace

// Copies `n` bytes at `src` (just past the caller's struct) into `dst` without touching memory that is not
// mapped readable: the bytes in the page of the struct's last byte, src[-1], directly (that page is readable),
// the rest through the kernel, which reports EFAULT instead of faulting. False when some byte is not readable.
bool read_tail(const unsigned char* src, std::size_t n, unsigned char* dst) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(src);
  const std::uintptr_t page_end = ((addr - 1) / page + 1) * page;  // end of src[-1]'s page
  const std::size_t direct = std::min<std::size_t>(n, page_end - addr);
  std::memcpy(dst, src, direct);
  if (direct == n) return true;
  iovec local{dst + direct, n - direct}, remote{const_cast<unsigned char*>(src + direct), n - direct};
  const ssize_t got = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
  if (got >= 0) return static_cast<std::size_t>(got) == n - direct;
  if (errno == EFAULT) return false;
  // process_vm_readv refused (a seccomp filter): a pipe's write() reports EFAULT the same way.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  const bool ok = ::write(fds[1], src + direct, n - direct) == static_cast<ssize_t>(n - direct) &&
                  ::read(fds[0], dst + direct, n - direct) == static_cast<ssize_t>(n - direct);
  ::close(fds[0]), ::close(fds[1]);
  return ok;
}

Result<RuntimeOptions> read_options(const flashjit_runtime_options* options) {
  RuntimeOptions out;
  if (options == nullptr) return out;
  const flashjit_runtime_options& o = *options;
  FLASHJIT_TRY(check_struct_size(o, FLASHJIT_RUNTIME_OPTIONS_MIN_SIZE, "flashjit_runtime_options"));
  if (FLASHJIT_PRESENT(o, cache_dir) && o.cache_dir != nullptr) {
    if (*o.cache_dir == '\0')
      return Error(ErrorCode::invalid_argument, "cache_dir is an empty string (NULL selects the default folder)");
    out.cache_dir = std::filesystem::path(o.cache_dir);
  }
  if (FLASHJIT_PRESENT(o, log_level)) {
    auto level = log_level_of(o.log_level);
    if (!level.ok()) return std::move(level).error();
    out.log_level = *level;
  }
  if (FLASHJIT_PRESENT(o, precompiled_only) && o.precompiled_only != 0) out.jit = false;
  if (FLASHJIT_PRESENT(o, cache_max_mb) && o.cache_max_mb != 0) out.cache_max_mb = o.cache_max_mb;
  if (FLASHJIT_PRESENT(o, tuned_tables) && o.tuned_tables != nullptr)
    out.tuned_tables = runtime::split_paths(o.tuned_tables);
  if (FLASHJIT_PRESENT(o, pdl)) {
    auto on = switch_of(o.pdl, "pdl");
    if (!on.ok()) return std::move(on).error();
    out.pdl = *on;
  }
  if (FLASHJIT_PRESENT(o, check_pages)) {
    auto on = switch_of(o.check_pages, "check_pages");
    if (!on.ok()) return std::move(on).error();
    out.check_pages = *on;
  }
  if (FLASHJIT_PRESENT(o, log_callback) && o.log_callback != nullptr)
    out.log_callback = log_callback_of(o.log_callback, FLASHJIT_PRESENT(o, log_user) ? o.log_user : nullptr);
  if (FLASHJIT_PRESENT(o, check_seqlens)) {
    auto on = switch_of(o.check_seqlens, "check_seqlens");
    if (!on.ok()) return std::move(on).error();
    out.check_seqlens = *on;
  }
  if (FLASHJIT_PRESENT(o, compile_in_process)) {
    auto on = switch_of(o.compile_in_process, "compile_in_process");
    if (!on.ok()) return std::move(on).error();
    out.compile_in_process = *on;
  }
  if (FLASHJIT_PRESENT(o, compile_timeout_s) && o.compile_timeout_s != 0) {
    if (!(o.compile_timeout_s > 0))
      return Error(ErrorCode::invalid_argument,
                   fmt::format("compile_timeout_s is {}: a positive number of seconds, or 0 for the default",
                               o.compile_timeout_s));
    out.compile_timeout_s = o.compile_timeout_s;
  }
  if (FLASHJIT_PRESENT(o, compile_worker) && o.compile_worker != nullptr) {
    if (*o.compile_worker == '\0')
      return Error(ErrorCode::invalid_argument, "compile_worker is an empty string (NULL selects the default)");
    out.compile_worker = std::filesystem::path(o.compile_worker);
  }
  return out;
}

Result<ForwardArgs> read_args(const flashjit_attention_args* args) {
  if (args == nullptr) return Error(ErrorCode::invalid_argument, "args is NULL");
  const flashjit_attention_args& a = *args;
  FLASHJIT_TRY(check_struct_size(a, FLASHJIT_ATTENTION_ARGS_MIN_SIZE, "flashjit_attention_args"));
  ForwardArgs out;
  AttentionProblem& p = out.problem;
  auto dtype = dtype_of(a.dtype);
  if (!dtype.ok()) return std::move(dtype).error();
  p.dtype = *dtype;
  p.batch = a.batch, p.seqlen_q = a.seqlen_q, p.seqlen_k = a.seqlen_k;
  p.heads_q = a.heads_q, p.heads_kv = a.heads_kv, p.head_dim = a.head_dim;
  p.q = a.q, p.k = a.k, p.v = a.v, p.o = a.o, p.lse = a.lse;
  if (FLASHJIT_PRESENT(a, q_strides)) p.q_strides = strides_of(a.q_strides);
  if (FLASHJIT_PRESENT(a, k_strides)) p.k_strides = strides_of(a.k_strides);
  if (FLASHJIT_PRESENT(a, v_strides)) p.v_strides = strides_of(a.v_strides);
  if (FLASHJIT_PRESENT(a, o_strides)) p.o_strides = strides_of(a.o_strides);
  if (FLASHJIT_PRESENT(a, mask)) {
    auto mask = mask_of(a.mask);
    if (!mask.ok()) return std::move(mask).error();
    p.mask = *mask;
  }
  if (FLASHJIT_PRESENT(a, window_left)) p.window_left = a.window_left;
  if (FLASHJIT_PRESENT(a, window_right)) p.window_right = a.window_right;
  if (FLASHJIT_PRESENT(a, chunk_size)) p.chunk_size = a.chunk_size;
  if (FLASHJIT_PRESENT(a, softmax_scale) && a.softmax_scale != 0.f) p.softmax_scale = a.softmax_scale;
  if (FLASHJIT_PRESENT(a, stream)) p.stream = a.stream;
  if (FLASHJIT_PRESENT(a, config_json)) out.config_json = a.config_json;
  if (FLASHJIT_PRESENT(a, cu_seqlens_q)) p.cu_seqlens_q = a.cu_seqlens_q;
  if (FLASHJIT_PRESENT(a, cu_seqlens_k)) p.cu_seqlens_k = a.cu_seqlens_k;
  if (FLASHJIT_PRESENT(a, total_q)) p.total_q = a.total_q;
  if (FLASHJIT_PRESENT(a, total_k)) p.total_k = a.total_k;
  if (FLASHJIT_PRESENT(a, head_dim_v)) p.head_dim_v = a.head_dim_v;
  if (FLASHJIT_PRESENT(a, check_seqlens)) p.check_seqlens = a.check_seqlens != 0;
  if (FLASHJIT_PRESENT(a, softcap)) p.softcap = a.softcap;
  if (FLASHJIT_PRESENT(a, alibi_slopes)) p.alibi_slopes = a.alibi_slopes;
  if (FLASHJIT_PRESENT(a, alibi_slopes_batch_stride)) p.alibi_slopes_batch_stride = a.alibi_slopes_batch_stride;
  if (FLASHJIT_PRESENT(a, sinks)) p.sinks = a.sinks;
  read_snippets(a, p);
  if (FLASHJIT_PRESENT(a, alignment)) {
    auto alignment = alignment_of(a.alignment);
    if (!alignment.ok()) return std::move(alignment).error();
    p.alignment = *alignment;
  }
  if (FLASHJIT_PRESENT(a, page_table)) p.page_table = a.page_table;
  if (FLASHJIT_PRESENT(a, seqused_k)) p.seqused_k = a.seqused_k;
  if (FLASHJIT_PRESENT(a, page_size)) p.page_size = a.page_size;
  if (FLASHJIT_PRESENT(a, num_pages)) p.num_pages = a.num_pages;
  if (FLASHJIT_PRESENT(a, max_pages_per_seq)) p.max_pages_per_seq = a.max_pages_per_seq;
  if (FLASHJIT_PRESENT(a, check_pages)) p.check_pages = a.check_pages != 0;
  if (FLASHJIT_PRESENT(a, page_indptr)) p.page_indptr = a.page_indptr;
  if (FLASHJIT_PRESENT(a, last_page_len)) p.last_page_len = a.last_page_len;
  read_block_mask(a, p.block_mask);
  FLASHJIT_TRY(read_bias(a, p));
  if (FLASHJIT_PRESENT(a, rel_bias)) p.rel_bias = a.rel_bias;
  if (FLASHJIT_PRESENT(a, rel_bias_head_stride)) p.rel_bias_head_stride = a.rel_bias_head_stride;
  if (FLASHJIT_PRESENT(a, rel_bias_extent)) p.rel_bias_extent = a.rel_bias_extent;
  if (FLASHJIT_PRESENT(a, rel_bias_offset)) p.rel_bias_offset = a.rel_bias_offset;
  return out;
}

Result<DecodeProblem> read_decode_args(const flashjit_decode_args* args) {
  if (args == nullptr) return Error(ErrorCode::invalid_argument, "args is NULL");
  const flashjit_decode_args& a = *args;
  FLASHJIT_TRY(check_struct_size(a, FLASHJIT_DECODE_ARGS_MIN_SIZE, "flashjit_decode_args"));
  DecodeProblem p;
  auto dtype = dtype_of(a.dtype);
  if (!dtype.ok()) return std::move(dtype).error();
  p.dtype = *dtype;
  p.q = a.q, p.o = a.o, p.lse = a.lse, p.k_cache = a.k_cache, p.v_cache = a.v_cache;
  p.seqlens_k = a.seqlens_k, p.page_table = a.page_table;
  p.batch = a.batch, p.q_len = a.q_len, p.heads_q = a.heads_q, p.heads_kv = a.heads_kv, p.head_dim = a.head_dim;
  p.max_seqlen_k = a.max_seqlen_k;
  if (FLASHJIT_PRESENT(a, layout)) {
    switch (a.layout) {
      case FLASHJIT_KV_CONTIGUOUS: p.layout = KvLayout::contiguous; break;
      case FLASHJIT_KV_PAGED: p.layout = KvLayout::paged; break;
      default:
        return Error(ErrorCode::invalid_argument,
                     fmt::format("layout {} is not a flashjit_kv_layout (0 contiguous, 1 paged)", a.layout));
    }
  }
  if (FLASHJIT_PRESENT(a, cache_seqlen)) p.cache_seqlen = a.cache_seqlen;
  if (FLASHJIT_PRESENT(a, num_pages)) p.num_pages = a.num_pages;
  if (FLASHJIT_PRESENT(a, page_size)) p.page_size = a.page_size;
  if (FLASHJIT_PRESENT(a, max_pages_per_seq)) p.max_pages_per_seq = a.max_pages_per_seq;
  if (FLASHJIT_PRESENT(a, q_strides)) p.q_strides = strides_of(a.q_strides);
  if (FLASHJIT_PRESENT(a, o_strides)) p.o_strides = strides_of(a.o_strides);
  if (FLASHJIT_PRESENT(a, k_strides)) p.k_strides = strides_of(a.k_strides);
  if (FLASHJIT_PRESENT(a, v_strides)) p.v_strides = strides_of(a.v_strides);
  if (FLASHJIT_PRESENT(a, window_left)) p.window_left = a.window_left;
  if (FLASHJIT_PRESENT(a, softmax_scale) && a.softmax_scale != 0.f) p.softmax_scale = a.softmax_scale;
  if (FLASHJIT_PRESENT(a, num_splits)) p.num_splits = a.num_splits;
  if (FLASHJIT_PRESENT(a, workspace)) p.workspace = a.workspace;
  if (FLASHJIT_PRESENT(a, workspace_bytes)) p.workspace_bytes = a.workspace_bytes;
  if (FLASHJIT_PRESENT(a, check_pages)) p.check_pages = a.check_pages != 0;
  if (FLASHJIT_PRESENT(a, stream)) p.stream = a.stream;
  if (FLASHJIT_PRESENT(a, split_merge)) p.split_merge = static_cast<SplitMerge>(a.split_merge);  // check()ed
  if (FLASHJIT_PRESENT(a, chunk_size)) p.chunk_size = a.chunk_size;
  if (FLASHJIT_PRESENT(a, softcap)) p.softcap = a.softcap;
  if (FLASHJIT_PRESENT(a, alibi_slopes)) p.alibi_slopes = a.alibi_slopes;
  if (FLASHJIT_PRESENT(a, alibi_slopes_batch_stride)) p.alibi_slopes_batch_stride = a.alibi_slopes_batch_stride;
  if (FLASHJIT_PRESENT(a, sinks)) p.sinks = a.sinks;
  read_snippets(a, p);
  read_fused_append(a, p);
  if (FLASHJIT_PRESENT(a, page_indptr)) p.page_indptr = a.page_indptr;
  if (FLASHJIT_PRESENT(a, last_page_len)) p.last_page_len = a.last_page_len;
  FLASHJIT_TRY(read_bias(a, p));
  if (p.workspace == nullptr && p.workspace_bytes != 0)
    return Error(ErrorCode::invalid_argument,
                 fmt::format("workspace is NULL but workspace_bytes is {} (NULL with 0: the runtime's workspace)",
                             p.workspace_bytes));
  return p;
}

Result<MergeProblem> read_merge_args(const flashjit_merge_args* args) {
  if (args == nullptr) return Error(ErrorCode::invalid_argument, "args is NULL");
  const flashjit_merge_args& a = *args;
  FLASHJIT_TRY(check_struct_size(a, FLASHJIT_MERGE_ARGS_MIN_SIZE, "flashjit_merge_args"));
  static_assert(FLASHJIT_MAX_MERGE_STATES == kMaxMergeStates);
  MergeProblem p;
  auto dtype = dtype_of(a.dtype);
  if (!dtype.ok()) return std::move(dtype).error();
  p.dtype = *dtype;
  p.batch = a.batch, p.seqlen = a.seqlen, p.heads = a.heads, p.head_dim = a.head_dim;
  if (a.num_states < 1 || a.num_states > kMaxMergeStates)
    return Error(ErrorCode::invalid_argument,
                 fmt::format("num_states must be in [1, {}], got {}", kMaxMergeStates, a.num_states));
  if (a.o_in == nullptr) return Error(ErrorCode::invalid_argument, "o_in is NULL (an array of num_states pointers)");
  if (a.lse_in == nullptr)
    return Error(ErrorCode::invalid_argument, "lse_in is NULL (an array of num_states pointers)");
  p.num_states = a.num_states;
  for (int i = 0; i < a.num_states; ++i) p.o_in[i] = a.o_in[i], p.lse_in[i] = a.lse_in[i];
  p.o = a.o;
  if (FLASHJIT_PRESENT(a, in_strides)) p.in_strides = strides_of(a.in_strides);
  if (FLASHJIT_PRESENT(a, o_strides)) p.o_strides = strides_of(a.o_strides);
  if (FLASHJIT_PRESENT(a, lse)) p.lse = a.lse;
  if (FLASHJIT_PRESENT(a, stream)) p.stream = a.stream;
  return p;
}

Result<Target> read_target(const flashjit_target* target) {
  if (target == nullptr) return Error(ErrorCode::invalid_argument, "target is NULL");
  const flashjit_target& t = *target;
  FLASHJIT_TRY(check_struct_size(t, FLASHJIT_TARGET_MIN_SIZE, "flashjit_target"));
  Target out;
  if (t.arch == nullptr) return Error(ErrorCode::invalid_argument, "target arch is NULL (e.g. \"sm_90a\")");
  auto arch = Arch::parse(t.arch);
  if (!arch)
    return Error(ErrorCode::invalid_argument,
                 fmt::format("target arch \"{}\" is not an arch (sm_80, sm_86, sm_89, sm_90a, ...)", t.arch));
  out.arch = *arch;
  if (FLASHJIT_PRESENT(t, sms)) {
    if (t.sms < 0)
      return Error(ErrorCode::invalid_argument, fmt::format("target sms must be >= 0 (0: 132), got {}", t.sms));
    if (t.sms > 0) out.sms = t.sms;
  }
  if (FLASHJIT_PRESENT(t, gpu_name) && t.gpu_name != nullptr) out.gpu = t.gpu_name;
  return out;
}


namespace {

Result<PartialConfig> parse(const char* json) {
  if (json == nullptr) return Error(ErrorCode::invalid_argument, "config_json is NULL");
  auto config = parse_config_json(json);
  if (!config.ok()) return std::move(config).error().with("in config_json");
  return config;
}

}  // namespace

Result<AnyKernelConfig> read_config(const char* json) {
  auto partial = parse(json);
  if (!partial.ok()) return std::move(partial).error();
  return Runtime::resolve(*partial);
}

Result<KernelConfig> read_config_for(const char* json, const AttentionProblem& problem, const Runtime& runtime) {
  auto partial = parse(json);
  if (!partial.ok()) return std::move(partial).error();
  auto* config = partial->config.get_if<KernelConfig>();
  if (config == nullptr)
    return Error(ErrorCode::invalid_argument,
                 fmt::format("config_json names a {} kernel; an attention call runs prefill kernels",
                             to_string(partial->config.kind())));
  auto from_problem = [&](const char* field, auto value, auto& member) {
    if (partial->has(field)) return;
    member = value;
    partial->given.push_back(field);
  };
  from_problem("dtype", problem.dtype, config->dtype);
  from_problem("head_dim", problem.head_dim, config->head_dim);
  from_problem("head_dim_v", problem.head_dim_v == problem.head_dim ? 0 : problem.head_dim_v, config->head_dim_v);
  from_problem("mask", problem.mask, config->mask);
  from_problem("varlen", problem.varlen(), config->varlen);
  from_problem("page_size", problem.paged() ? problem.page_size : 0, config->page_size);
  from_problem("softcap", problem.softcap > 0.f, config->softcap);
  from_problem("alibi", problem.alibi_slopes != nullptr, config->alibi);
  from_problem("sinks", problem.sinks != nullptr, config->sinks);
  from_problem("score_mod", std::string(problem.score_mod ? problem.score_mod : ""), config->score_mod);
  from_problem("mask_mod", std::string(problem.mask_mod ? problem.mask_mod : ""), config->mask_mod);
  from_problem("bias", problem.bias != nullptr ? problem.bias_type : BiasType::none, config->bias);
  from_problem("rel_bias", problem.rel_bias != nullptr, config->rel_bias);
  from_problem("seqused_k", problem.seqused_k != nullptr && !problem.paged(), config->seqused_k);
  if (!partial->has("arch")) {
    auto picked = runtime.select(problem);  // checks the problem and finds its device
    if (!picked.ok()) return std::move(picked).error();
    from_problem("arch", picked->arch, config->arch);
  }
  return *Runtime::resolve(*partial).get_if<KernelConfig>();
}

}  // namespace flashjit::capi
