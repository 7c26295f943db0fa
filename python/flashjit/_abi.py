"""ctypes mirror of include/flashjit/flashjit.h (structs and enum values)."""
import ctypes

OK = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_INVALID_CONFIG = 2
ERROR_UNSUPPORTED = 3
ERROR_NO_DEVICE = 4
ERROR_DRIVER = 5
ERROR_COMPILE = 6
ERROR_CACHE = 7
ERROR_NOT_FOUND = 8
ERROR_IO = 9
ERROR_INTERNAL = 10

DTYPE_BF16 = 0
DTYPE_FP16 = 1

MASK_NONE = 0
MASK_CAUSAL = 1
MASK_SLIDING_WINDOW = 2
MASK_CHUNKED = 3
MASK_CHUNKED_CAUSAL = 4

BIAS_NONE = 0  # flashjit_bias_type
BIAS_FP32 = 1
BIAS_BF16 = 2
BIAS_FP16 = 3
BIAS_BOOL = 4

KV_CONTIGUOUS = 0
KV_PAGED = 1
SPLIT_MERGE_AUTO = 0  # flashjit_split_merge
SPLIT_MERGE_COMBINE_KERNEL = 1
SPLIT_MERGE_CLUSTER = 2

MAX_MERGE_STATES = 32

LOG_DEFAULT = 0  # flashjit_log_level
LOG_ERROR = 1
LOG_WARN = 2
LOG_INFO = 3
LOG_DEBUG = 4

# flashjit_log_callback: (level, message, user)
LogCallback = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


# flashjit_attention_args.alignment
ALIGN_BOTTOM_RIGHT, ALIGN_TOP_LEFT = 0, 1
# The snippets' aux arrays (flashjit_attention_args.aux_pointers, aux_scalars, aux_integers).
AUX_POINTERS = AUX_SCALARS = AUX_INTEGERS = 8
# The user snippets' fields, which flashjit_attention_args and flashjit_decode_args both append after the variants.
_SNIPPET_FIELDS = [
    ("score_mod", ctypes.c_char_p),
    ("mask_mod", ctypes.c_char_p),
    ("aux_pointers", ctypes.c_void_p * AUX_POINTERS),
    ("aux_scalars", ctypes.c_float * AUX_SCALARS),
    ("aux_integers", ctypes.c_int64 * AUX_INTEGERS),
]


# The block mask's fields at the end of flashjit_attention_args (bm_kv_num_blocks NULL: none).
BLOCK_MASK_FIELDS = [
    ("bm_kv_num_blocks", ctypes.c_void_p),
    ("bm_kv_indices", ctypes.c_void_p),
    ("bm_full_kv_num_blocks", ctypes.c_void_p),
    ("bm_full_kv_indices", ctypes.c_void_p),
    ("bm_q_block", ctypes.c_int),
    ("bm_kv_block", ctypes.c_int),
    ("bm_num_q_blocks", ctypes.c_int),
    ("bm_num_kv_blocks", ctypes.c_int),
    ("bm_batch_stride", ctypes.c_int64),
    ("bm_head_stride", ctypes.c_int64),
]


class RuntimeOptions(ctypes.Structure):
    """flashjit_runtime_options; zero fields take the defaults (the environment). pdl, check_pages, check_seqlens and
    compile_in_process: 1 on, -1 off. A log_callback must stay referenced for as long as the runtime lives."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("cache_dir", ctypes.c_char_p),
        ("log_level", ctypes.c_int),
        ("precompiled_only", ctypes.c_int),
        ("cache_max_mb", ctypes.c_uint64),
        ("tuned_tables", ctypes.c_char_p),
        ("pdl", ctypes.c_int),
        ("check_pages", ctypes.c_int),
        ("log_callback", LogCallback),
        ("log_user", ctypes.c_void_p),
        ("check_seqlens", ctypes.c_int),
        ("compile_in_process", ctypes.c_int),
        ("compile_timeout_s", ctypes.c_double),
        ("compile_worker", ctypes.c_char_p),
    ]

    def __init__(self, **fields):
        super().__init__(**{"struct_size": ctypes.sizeof(RuntimeOptions), **fields})


class Strides(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int64), ("seq", ctypes.c_int64), ("head", ctypes.c_int64)]


class BiasStrides(ctypes.Structure):
    """flashjit_bias_strides: element strides of a bias [B, Hq, Sq, Sk]; 0 broadcasts."""

    _fields_ = [("batch", ctypes.c_int64), ("head", ctypes.c_int64), ("q", ctypes.c_int64), ("k", ctypes.c_int64)]


# An additive bias (flashjit_bias_type: 0 none, 1 fp32, 2 bf16, 3 fp16, 4 bool), the last fields of both structs.
_BIAS_FIELDS = [
    ("bias", ctypes.c_void_p),
    ("bias_type", ctypes.c_int),
    ("bias_strides", BiasStrides),
]


class AttentionArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("batch", ctypes.c_int),
        ("seqlen_q", ctypes.c_int),
        ("seqlen_k", ctypes.c_int),
        ("heads_q", ctypes.c_int),
        ("heads_kv", ctypes.c_int),
        ("head_dim", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("q_strides", Strides),
        ("k_strides", Strides),
        ("v_strides", Strides),
        ("o_strides", Strides),
        ("mask", ctypes.c_int),
        ("window_left", ctypes.c_int),
        ("window_right", ctypes.c_int),
        ("chunk_size", ctypes.c_int),
        ("softmax_scale", ctypes.c_float),
        ("stream", ctypes.c_void_p),
        ("config_json", ctypes.c_char_p),
        ("cu_seqlens_q", ctypes.c_void_p),
        ("cu_seqlens_k", ctypes.c_void_p),
        ("total_q", ctypes.c_int),
        ("total_k", ctypes.c_int),
        ("head_dim_v", ctypes.c_int),
        ("check_seqlens", ctypes.c_int),
        ("softcap", ctypes.c_float),
        ("alibi_slopes", ctypes.c_void_p),
        ("alibi_slopes_batch_stride", ctypes.c_int64),
        ("sinks", ctypes.c_void_p),
    ] + _SNIPPET_FIELDS + [
        ("alignment", ctypes.c_int),
        # Paged keys and values (page_table NULL: contiguous k and v).
        ("page_table", ctypes.c_void_p),
        ("seqused_k", ctypes.c_void_p),
        ("page_size", ctypes.c_int),
        ("num_pages", ctypes.c_int),
        ("max_pages_per_seq", ctypes.c_int),
        ("check_pages", ctypes.c_int),
        # FlashInfer's CSR page table (page_indptr NULL: the dense table).
        ("page_indptr", ctypes.c_void_p),
        ("last_page_len", ctypes.c_void_p),
    ] + BLOCK_MASK_FIELDS + _BIAS_FIELDS + [
        # A relative-logits table fp32 [Hq, extent] (flashjit_attention_args only), after the bias.
        ("rel_bias", ctypes.c_void_p),
        ("rel_bias_head_stride", ctypes.c_int64),
        ("rel_bias_extent", ctypes.c_int),
        ("rel_bias_offset", ctypes.c_int),
    ]

    def __init__(self, **fields):
        defaults = {"struct_size": ctypes.sizeof(AttentionArgs), "window_left": -1, "window_right": -1}
        super().__init__(**{**defaults, **fields})


class DecodeArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("q", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("k_cache", ctypes.c_void_p),
        ("v_cache", ctypes.c_void_p),
        ("seqlens_k", ctypes.c_void_p),
        ("page_table", ctypes.c_void_p),
        ("batch", ctypes.c_int),
        ("q_len", ctypes.c_int),
        ("heads_q", ctypes.c_int),
        ("heads_kv", ctypes.c_int),
        ("head_dim", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("max_seqlen_k", ctypes.c_int),
        ("layout", ctypes.c_int),
        ("cache_seqlen", ctypes.c_int),
        ("num_pages", ctypes.c_int),
        ("page_size", ctypes.c_int),
        ("max_pages_per_seq", ctypes.c_int),
        ("q_strides", Strides),
        ("o_strides", Strides),
        ("k_strides", Strides),
        ("v_strides", Strides),
        ("window_left", ctypes.c_int),
        ("softmax_scale", ctypes.c_float),
        ("num_splits", ctypes.c_int),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("check_pages", ctypes.c_int),
        ("stream", ctypes.c_void_p),
        ("split_merge", ctypes.c_int),
        ("chunk_size", ctypes.c_int),
        ("softcap", ctypes.c_float),
        ("alibi_slopes", ctypes.c_void_p),
        ("alibi_slopes_batch_stride", ctypes.c_int64),
        ("sinks", ctypes.c_void_p),
    ] + _SNIPPET_FIELDS + [
        ("k_new", ctypes.c_void_p),
        ("v_new", ctypes.c_void_p),
        ("k_new_strides", Strides),
        ("v_new_strides", Strides),
        ("new_len", ctypes.c_int),
        ("seqlens_out", ctypes.c_void_p),
        # FlashInfer's CSR page table (page_indptr NULL: the dense table).
        ("page_indptr", ctypes.c_void_p),
        ("last_page_len", ctypes.c_void_p),
    ] + _BIAS_FIELDS

    def __init__(self, **fields):
        defaults = {"struct_size": ctypes.sizeof(DecodeArgs), "window_left": -1}
        super().__init__(**{**defaults, **fields})


class AppendArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("k_cache", ctypes.c_void_p),
        ("v_cache", ctypes.c_void_p),
        ("cache_seqlens", ctypes.c_void_p),
        ("batch", ctypes.c_int),
        ("new_len", ctypes.c_int),
        ("heads_kv", ctypes.c_int),
        ("head_dim", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("layout", ctypes.c_int),
        ("cache_seqlen", ctypes.c_int),
        ("num_pages", ctypes.c_int),
        ("page_size", ctypes.c_int),
        ("max_pages_per_seq", ctypes.c_int),
        ("page_table", ctypes.c_void_p),
        ("cu_seqlens", ctypes.c_void_p),
        ("total_new", ctypes.c_int),
        ("seqlens_out", ctypes.c_void_p),
        ("k_strides", Strides),
        ("v_strides", Strides),
        ("k_cache_strides", Strides),
        ("v_cache_strides", Strides),
        ("check_pages", ctypes.c_int),
        ("stream", ctypes.c_void_p),
        ("page_indptr", ctypes.c_void_p),
        ("last_page_len", ctypes.c_void_p),
    ]

    def __init__(self, **fields):
        super().__init__(**{"struct_size": ctypes.sizeof(AppendArgs), **fields})


class MergeArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("dtype", ctypes.c_int),
        ("batch", ctypes.c_int),
        ("seqlen", ctypes.c_int),
        ("heads", ctypes.c_int),
        ("head_dim", ctypes.c_int),
        ("num_states", ctypes.c_int),
        ("o_in", ctypes.POINTER(ctypes.c_void_p)),
        ("lse_in", ctypes.POINTER(ctypes.c_void_p)),
        ("o", ctypes.c_void_p),
        ("in_strides", Strides),
        ("o_strides", Strides),
        ("lse", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
    ]

    def __init__(self, **fields):
        super().__init__(**{"struct_size": ctypes.sizeof(MergeArgs), **fields})


class Target(ctypes.Structure):
    """flashjit_target: a GPU that flashjit_select_target / flashjit_select_decode answer for without one."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("arch", ctypes.c_char_p),
        ("sms", ctypes.c_int),
        ("gpu_name", ctypes.c_char_p),
    ]

    def __init__(self, **fields):
        super().__init__(**{"struct_size": ctypes.sizeof(Target), **fields})


class BlockMaskArgs(ctypes.Structure):
    """flashjit_block_mask_args: the inputs and outputs of flashjit_make_block_mask."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("batch", ctypes.c_int),
        ("heads", ctypes.c_int),
        ("seqlen_q", ctypes.c_int),
        ("seqlen_k", ctypes.c_int),
        ("q_block", ctypes.c_int),
        ("kv_block", ctypes.c_int),
        ("mask", ctypes.c_int),
        ("window_left", ctypes.c_int),
        ("window_right", ctypes.c_int),
        ("chunk_size", ctypes.c_int),
        ("alignment", ctypes.c_int),
        ("mask_mod", ctypes.c_char_p),
        ("aux_pointers", ctypes.c_void_p * AUX_POINTERS),
        ("aux_scalars", ctypes.c_float * AUX_SCALARS),
        ("aux_integers", ctypes.c_int64 * AUX_INTEGERS),
        ("kv_num_blocks", ctypes.c_void_p),
        ("kv_indices", ctypes.c_void_p),
        ("full_kv_num_blocks", ctypes.c_void_p),
        ("full_kv_indices", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
    ]

    def __init__(self, **fields):
        defaults = {"struct_size": ctypes.sizeof(BlockMaskArgs), "window_left": -1, "window_right": -1}
        super().__init__(**{**defaults, **fields})
