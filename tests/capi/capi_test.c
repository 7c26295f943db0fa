/* The C ABI from C99, against libflashjit.so: runtime life cycle, versioned structs, text outputs, compile into
 * a temporary cache, error codes and the thread-local last error; decode and merge arguments. Needs no GPU (where one is present, fake
 * device pointers are rejected as such instead of reporting no device). */
#define _XOPEN_SOURCE 700

#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashjit/flashjit.h"
#include "check.h"


static const char* kFa2 = "{\"algorithm\":\"fa2\",\"arch\":\"sm_80\",\"head_dim\":64}";

static int remove_entry(const char* path, const struct stat* st, int flag, struct FTW* ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* A well-formed problem on fake (aligned, non-null) pointers. */
static flashjit_attention_args fake_problem(void) {
  flashjit_attention_args a = flashjit_attention_args_default();
  a.q = (const void*)0x10000;
  a.k = (const void*)0x20000;
  a.v = (const void*)0x30000;
  a.o = (void*)0x40000;
  a.batch = 1, a.seqlen_q = 128, a.seqlen_k = 128, a.heads_q = 8, a.heads_kv = 2, a.head_dim = 64;
  a.dtype = FLASHJIT_DTYPE_BF16;
  return a;
}

/* Fake pointers get past every check that needs no device: then the device lookup fails, either for lack of a
 * GPU or because they are not device pointers. */
static int failed_at_device(int status) {
  return status == FLASHJIT_ERROR_NO_DEVICE ||
         (status == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "not a CUDA device pointer"));
}

static void test_version_and_status(void) {
  expect(strcmp(flashjit_version(), "") != 0 && flashjit_version()[0] >= '0' && flashjit_version()[0] <= '9',
         "version is a version number");
  expect(strcmp(flashjit_status_string(FLASHJIT_OK), "ok") == 0, "status string of OK");
  expect(strcmp(flashjit_status_string(FLASHJIT_ERROR_NO_DEVICE), "no device") == 0, "status string of NO_DEVICE");
  expect(strcmp(flashjit_status_string(FLASHJIT_ERROR_INTERNAL), "internal error") == 0, "status string of INTERNAL");
  expect(strcmp(flashjit_status_string(99), "unknown status") == 0, "status string of an unknown code");
}

static void test_create(const char* root) {
  char dir[512];
  flashjit_runtime* rt = (flashjit_runtime*)0x1;
  flashjit_runtime_options o;

  expect(flashjit_runtime_create(NULL, NULL) == FLASHJIT_ERROR_INVALID_ARGUMENT, "create with out NULL");
  expect(contains(flashjit_last_error(), "out is NULL"), "create with out NULL: message");

  /* NULL options: the defaults, here FLASHJIT_CACHE_DIR. */
  snprintf(dir, sizeof dir, "%s/default", root);
  setenv("FLASHJIT_CACHE_DIR", dir, 1);
  expect(flashjit_runtime_create(NULL, &rt) == FLASHJIT_OK && rt != NULL, "create with NULL options");
  {
    char info[1024];
    const int64_t n = flashjit_cache_info(rt, info, sizeof info);
    expect(n > 0 && contains(info, dir) && contains(info, "\"entries\":0"), "cache_info of the default cache");
  }
  /* No decode ran on this stream: nothing to free, and no GPU needed to say so. */
  expect(flashjit_release_decode_workspace(rt, NULL) == FLASHJIT_OK, "release of a stream without a workspace");
  expect(flashjit_release_decode_workspace(NULL, NULL) == FLASHJIT_ERROR_INVALID_ARGUMENT,
         "release on a NULL runtime");
  flashjit_runtime_destroy(rt);
  flashjit_runtime_destroy(NULL);

  memset(&o, 0, sizeof o);
  o.struct_size = 4; /* below even the size field */
  rt = (flashjit_runtime*)0x1;
  expect(flashjit_runtime_create(&o, &rt) == FLASHJIT_ERROR_INVALID_ARGUMENT && rt == NULL,
         "options with a too small struct_size are rejected and *out is NULL");
  expect(contains(flashjit_last_error(), "struct_size"), "too small struct_size: message names struct_size");

  o.struct_size = sizeof o;
  o.log_level = 9;
  expect(flashjit_runtime_create(&o, &rt) == FLASHJIT_ERROR_INVALID_ARGUMENT, "options with a bad log level");
  expect(contains(flashjit_last_error(), "log_level"), "bad log level: message names log_level");

  o.log_level = FLASHJIT_LOG_DEFAULT;
  o.cache_dir = "";
  expect(flashjit_runtime_create(&o, &rt) == FLASHJIT_ERROR_INVALID_ARGUMENT, "options with an empty cache_dir");

  /* A struct from a newer header: accepted when its extra fields are zero, rejected otherwise. */
  {
    struct {
      flashjit_runtime_options o;
      uint64_t newer_field;
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.o.struct_size = sizeof newer;
    snprintf(dir, sizeof dir, "%s/newer", root);
    newer.o.cache_dir = dir;
    expect(flashjit_runtime_create(&newer.o, &rt) == FLASHJIT_OK, "newer options struct with zero extra fields");
    flashjit_runtime_destroy(rt);
    newer.newer_field = 1;
    expect(flashjit_runtime_create(&newer.o, &rt) == FLASHJIT_ERROR_INVALID_ARGUMENT,
           "newer options struct with a set extra field");
    expect(contains(flashjit_last_error(), "newer flashjit.h"), "newer struct: message says so");
  }
}

/* What a log callback received: the last message of each level (1 error .. 4 debug) and the count. */
typedef struct {
  int count;
  char last[5][512];
  void* user;
} log_record;

static void record_log(int level, const char* message, void* user) {
  log_record* r = (log_record*)user;
  ++r->count;
  r->user = user;
  if (level >= FLASHJIT_LOG_ERROR && level <= FLASHJIT_LOG_DEBUG)
    snprintf(r->last[level], sizeof r->last[level], "%s", message);
}

/* The fields past cache_max_mb: tuned tables, pdl, check_pages and the log callback; a struct from the header
 * before them still works. */
static void test_options(const char* root) {
  char dir[512], missing[512];
  flashjit_runtime* rt = NULL;
  flashjit_runtime_options o;
  log_record record;
  memset(&o, 0, sizeof o);
  memset(&record, 0, sizeof record);
  o.struct_size = sizeof o;
  snprintf(dir, sizeof dir, "%s/options", root);
  snprintf(missing, sizeof missing, "%s/missing.json", root);
  o.cache_dir = dir;
  o.tuned_tables = missing;
  o.pdl = -1;
  o.check_pages = 1;
  o.log_level = FLASHJIT_LOG_WARN;
  o.log_callback = record_log;
  o.log_user = &record;
  expect(flashjit_runtime_create(&o, &rt) == FLASHJIT_OK, "create with tuned tables, pdl, check_pages and a callback");
  flashjit_runtime_destroy(rt);
  expect(record.count >= 1 && record.user == &record, "the callback got a message and log_user");
  expect(contains(record.last[FLASHJIT_LOG_WARN], "ignoring tuned table") &&
             contains(record.last[FLASHJIT_LOG_WARN], missing),
         "the missing tuned table is a warning naming it");

  /* Warnings only: the callback sees nothing at level ERROR. */
  memset(&record, 0, sizeof record);
  o.log_level = FLASHJIT_LOG_ERROR;
  expect(flashjit_runtime_create(&o, &rt) == FLASHJIT_OK, "create at level error");
  flashjit_runtime_destroy(rt);
  expect(record.count == 0, "level error: the warning is not reported");
  o.log_level = FLASHJIT_LOG_DEFAULT;

  o.pdl = 2;
  expect(flashjit_runtime_create(&o, &rt) == FLASHJIT_ERROR_INVALID_ARGUMENT, "pdl 2 is rejected");
  expect(contains(flashjit_last_error(), "pdl is 2"), "bad pdl: message names pdl");
  o.pdl = 0;
  o.check_pages = -2;
  expect(flashjit_runtime_create(&o, &rt) == FLASHJIT_ERROR_INVALID_ARGUMENT, "check_pages -2 is rejected");
  expect(contains(flashjit_last_error(), "check_pages is -2"), "bad check_pages: message names check_pages");

  /* A caller of the header before tuned_tables: what lies past its struct_size is not read. */
  o.struct_size = offsetof(flashjit_runtime_options, tuned_tables);
  memset(&record, 0, sizeof record);
  expect(flashjit_runtime_create(&o, &rt) == FLASHJIT_OK, "an older, shorter options struct");
  flashjit_runtime_destroy(rt);
  expect(record.count == 0, "older struct: the callback past its size is not used");
}

static void test_emit(void) {
  char small[8];
  char decode_source[8192];
  char* text;
  int64_t n = flashjit_emit(kFa2, NULL, 0);
  expect(n > 100, "emit with no buffer returns the source length");
  if (n <= 0) return;
  text = (char*)malloc((size_t)n + 1);
  expect(flashjit_emit(kFa2, text, (size_t)n + 1) == n && strlen(text) == (size_t)n, "emit fills a large buffer");
  expect(contains(text, "extern \"C\""), "emitted source has its extern \"C\" entry");
  free(text);
  memset(small, 'x', sizeof small);
  expect(flashjit_emit(kFa2, small, sizeof small) == n && small[0] == '\0',
         "emit into a small buffer returns the needed length and an empty string");
  expect(flashjit_emit(kFa2, NULL, 5) == -FLASHJIT_ERROR_INVALID_ARGUMENT, "emit with out NULL and cap 5");
  expect(flashjit_emit(NULL, NULL, 0) == -FLASHJIT_ERROR_INVALID_ARGUMENT, "emit of a NULL config");
  expect(flashjit_emit("{\"kernel\":\"decode\",\"mask\":\"chunked_causal\"}", decode_source,
                       sizeof decode_source) > 0 &&
             contains(decode_source, "flashjit::MaskKind::chunked_causal"),
         "emit of a decode config (every kernel kind)");
  expect(flashjit_emit("{not json", NULL, 0) == -FLASHJIT_ERROR_INVALID_CONFIG, "emit of malformed JSON");
  expect(flashjit_emit("{\"algorithm\":\"fa2\",\"head_dim\":60}", NULL, 0) == -FLASHJIT_ERROR_INVALID_CONFIG,
         "emit of an invalid config");
  expect(contains(flashjit_last_error(), "head_dim"), "invalid config: message names the field");
}

static void test_compile(const char* root) {
  char dir[512], info[2048];
  flashjit_runtime* rt = NULL;
  flashjit_runtime_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  snprintf(dir, sizeof dir, "%s/cache", root);
  o.cache_dir = dir;
  expect(flashjit_runtime_create(&o, &rt) == FLASHJIT_OK, "create with a cache dir");
  if (rt == NULL) return;
  expect(flashjit_compile(rt, kFa2, info, sizeof info) > 0, "compile an fa2 config");
  expect(contains(info, "\"name\":\"fa2_bf16_d64_") && contains(info, "\"cache_hit\":false") &&
             contains(info, "\"registers\":") && contains(info, "\"compile_ms\":"),
         "compile info names the kernel, a miss, registers and compile time");
  expect(flashjit_cache_info(rt, info, sizeof info) > 0 && contains(info, "\"entries\":1") &&
             contains(info, "\"writable\":true"),
         "cache_info counts the entry");
  expect(flashjit_compile(rt, "{\"algorithm\":\"fa3\",\"head_dim\":100}", info, sizeof info) ==
             -FLASHJIT_ERROR_INVALID_CONFIG,
         "compile of an fa3 head dim it lacks is an invalid config");
  expect(flashjit_compile(rt, "{\"algorithm\":\"auto\",\"head_dim\":64,\"arch\":\"sm_80\"}", info, sizeof info) > 0 &&
             contains(info, "\"name\":\"fa2_bf16_d64_"),
         "algorithm auto is resolved by the dispatcher for the arch (fa2 on sm_80)");
  expect(flashjit_compile(NULL, kFa2, info, sizeof info) == -FLASHJIT_ERROR_INVALID_ARGUMENT, "compile without runtime");
  expect(flashjit_cache_info(NULL, info, sizeof info) == -FLASHJIT_ERROR_INVALID_ARGUMENT, "cache_info without runtime");
  flashjit_runtime_destroy(rt);

  /* At level debug with a callback: the cache hit is reported there. */
  {
    log_record record;
    memset(&record, 0, sizeof record);
    o.log_level = FLASHJIT_LOG_DEBUG;
    o.log_callback = record_log;
    o.log_user = &record;
    expect(flashjit_runtime_create(&o, &rt) == FLASHJIT_OK, "create at level debug with a callback");
    if (rt == NULL) return;
    expect(flashjit_compile(rt, kFa2, info, sizeof info) > 0 && contains(info, "\"cache_hit\":true"),
           "compile with a callback: a cache hit");
    expect(contains(record.last[FLASHJIT_LOG_DEBUG], "cache hit fa2_bf16_d64_"), "the callback saw the cache hit");
    flashjit_runtime_destroy(rt);
    o.log_level = FLASHJIT_LOG_DEFAULT;
    o.log_callback = NULL;
    o.log_user = NULL;
  }

  /* Precompiled-only: the cached kernel loads from disk, any other is not found. */
  o.precompiled_only = 1;
  expect(flashjit_runtime_create(&o, &rt) == FLASHJIT_OK, "create precompiled-only");
  if (rt == NULL) return;
  expect(flashjit_compile(rt, kFa2, info, sizeof info) > 0 && contains(info, "\"cache_hit\":true"),
         "precompiled-only finds the cached kernel");
  expect(flashjit_compile(rt, "{\"algorithm\":\"fa2\",\"arch\":\"sm_80\",\"head_dim\":128}", info, sizeof info) ==
             -FLASHJIT_ERROR_NOT_FOUND,
         "precompiled-only: another kernel is not found");
  flashjit_runtime_destroy(rt);
}

static void* read_last_error(void* out) {
  *(const char**)out = flashjit_last_error();
  return NULL;
}

/* A runtime over ROOT/cache, or NULL after a failed expect naming `what`. */
static flashjit_runtime* runtime_in(const char* root, const char* what) {
  char dir[512];
  flashjit_runtime* rt = NULL;
  flashjit_runtime_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  snprintf(dir, sizeof dir, "%s/cache", root);
  o.cache_dir = dir;
  if (flashjit_runtime_create(&o, &rt) != FLASHJIT_OK) {
    expect(0, what);
    return NULL;
  }
  return rt;
}

static void test_forward(const char* root) {
  char text[1024];
  flashjit_runtime* rt = NULL;
  flashjit_attention_args a;
  rt = runtime_in(root, "create for the forward tests");
  if (rt == NULL) return;

  a = fake_problem();
  expect(flashjit_forward(NULL, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "forward without runtime");
  expect(flashjit_forward(rt, NULL) == FLASHJIT_ERROR_INVALID_ARGUMENT, "forward without args");
  expect(contains(flashjit_last_error(), "args is NULL"), "forward without args: message");

  a.head_dim = 60;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "forward with head_dim 60");
  expect(contains(flashjit_last_error(), "head_dim"), "head_dim 60: message names head_dim");
  a = fake_problem();
  a.heads_kv = 3;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "multiple of heads_kv"),
         "forward with Hq not a multiple of Hkv");
  a = fake_problem();
  a.q = NULL;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "q is a null"),
         "forward with q NULL");
  a = fake_problem();
  a.dtype = 7;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "dtype"),
         "forward with an unknown dtype");

  a = fake_problem();
  expect(failed_at_device(flashjit_forward(rt, &a)), "forward of a valid problem on fake pointers");
  expect(strlen(flashjit_last_error()) > 0, "the last error is set");
  {
    pthread_t t;
    const char* other = NULL;
    pthread_create(&t, NULL, read_last_error, (void*)&other);
    pthread_join(t, NULL);
    expect(other != NULL && other[0] == '\0', "the last error is per thread");
  }
  expect(failed_at_device((int)-flashjit_select(rt, &a, text, sizeof text)), "select on fake pointers");
  expect(failed_at_device((int)-flashjit_prepare(rt, &a, text, sizeof text)), "prepare on fake pointers");
  a.config_json = "{not json";
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_CONFIG && contains(flashjit_last_error(), "config_json"),
         "forward with a malformed config");
  a.config_json = "{\"algorithm\":\"fa2\"}";
  expect(failed_at_device(flashjit_forward(rt, &a)), "forward with a partial config reaches the device lookup");

  /* struct_size: too small is rejected; the minimum (an older header) leaves the rest at defaults, so the
   * garbage past it is never read; the full size reads it. */
  a = fake_problem();
  a.struct_size = FLASHJIT_ATTENTION_ARGS_MIN_SIZE - 1;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "struct_size"),
         "args with a too small struct_size");
  a.struct_size = 0;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "args with struct_size 0");
  a = fake_problem();
  a.mask = 99;
  a.softmax_scale = -1.f;
  a.config_json = (const char*)0x1;
  a.struct_size = FLASHJIT_ATTENTION_ARGS_MIN_SIZE;
  expect(failed_at_device(flashjit_forward(rt, &a)), "older args: fields past struct_size take their defaults");
  a.struct_size = sizeof a;
  a.config_json = NULL;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "mask 99"),
         "full args: the mask is read and rejected");
  flashjit_runtime_destroy(rt);
}

/* Ragged (varlen) batches: the four fields appended to flashjit_attention_args. */
static void test_forward_varlen(const char* root) {
  char text[1024];
  flashjit_runtime* rt = NULL;
  flashjit_attention_args a;
  rt = runtime_in(root, "create for the varlen tests");
  if (rt == NULL) return;
  a = fake_problem();
  a.cu_seqlens_q = (const int*)0x70000;
  a.cu_seqlens_k = (const int*)0x70100;
  a.total_q = 300, a.total_k = 500;
  expect(failed_at_device(flashjit_forward(rt, &a)), "varlen forward of a valid problem on fake pointers");
  expect(failed_at_device((int)-flashjit_select(rt, &a, text, sizeof text)), "varlen select on fake pointers");
  a.config_json = "{\"algorithm\":\"fa2\"}";
  expect(failed_at_device(flashjit_forward(rt, &a)), "varlen forward with a partial config reaches the device lookup");

  a = fake_problem();
  a.cu_seqlens_q = (const int*)0x70000;
  a.total_q = 300, a.total_k = 500;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "cu_seqlens_k is a null pointer"),
         "varlen with cu_seqlens_q only: names cu_seqlens_k");
  a.cu_seqlens_k = (const int*)0x70102;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "cu_seqlens_k (0x70102) must be 4-byte aligned"),
         "varlen with a misaligned cu_seqlens_k");
  a.cu_seqlens_k = (const int*)0x70100;
  a.total_q = 0;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "total_q"),
         "varlen without total_q: names total_q");
  a.total_q = 300;
  a.q_strides.batch = 1024;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "q_strides.batch must be 0"),
         "varlen with a batch stride: names q_strides.batch");
  a = fake_problem();
  a.total_k = 9;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "are for varlen problems"),
         "total_k without offsets is rejected");

  /* A caller built before the varlen fields: struct_size ends at config_json, the (garbage) fields after it
   * are not read. */
  a = fake_problem();
  a.cu_seqlens_q = (const int*)0x3;
  a.total_q = -7;
  a.struct_size = offsetof(flashjit_attention_args, cu_seqlens_q);
  expect(failed_at_device(flashjit_forward(rt, &a)), "args without the varlen fields: fixed lengths");
  a.struct_size = sizeof a;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "full args: the varlen fields are read");
  flashjit_runtime_destroy(rt);
}

/* A well-formed paged prefill on fake pointers: dense queries [1, 128, 8, 64] over pools of 64 pages of 16 tokens,
 * 8 pages per sequence (128 keys). */
static flashjit_attention_args fake_paged_problem(void) {
  flashjit_attention_args a = fake_problem();
  a.page_table = (const int*)0x71000;
  a.seqused_k = (const int*)0x72000;
  a.page_size = 16, a.num_pages = 64, a.max_pages_per_seq = 8;
  return a;
}

/* Paged prefill: the fields appended after alignment reach the problem (its checks name them, no GPU needed), a
 * caller built before them (struct_size ending at alignment) gets contiguous keys whatever the bytes past its
 * struct hold, and select's config carries the page size. */
static void test_forward_paged(const char* root) {
  char text[4096];
  flashjit_runtime* rt = runtime_in(root, "create for the paged tests");
  flashjit_attention_args a;
  flashjit_target t = flashjit_target_default();
  if (rt == NULL) return;
  a = flashjit_attention_args_default();
  expect(a.page_table == NULL && a.seqused_k == NULL && a.page_size == 0 && a.num_pages == 0 &&
             a.max_pages_per_seq == 0 && a.check_pages == 0,
         "flashjit_attention_args_default: contiguous keys, no page check");
  expect(offsetof(flashjit_attention_args, page_table) >= offsetof(flashjit_attention_args, alignment) + sizeof(int),
         "attention args: the paged fields come after alignment");
  expect(offsetof(flashjit_attention_args, check_pages) + sizeof(int) <= sizeof(flashjit_attention_args),
         "attention args: check_pages is inside the struct");

  /* Valid problems get to the device lookup: dense and ragged queries, a page check, a partial config. */
  a = fake_paged_problem();
  expect(failed_at_device(flashjit_forward(rt, &a)), "paged forward of a valid problem on fake pointers");
  expect(failed_at_device((int)-flashjit_select(rt, &a, text, sizeof text)), "paged select on fake pointers");
  a.check_pages = 1;
  expect(failed_at_device(flashjit_forward(rt, &a)), "paged forward with check_pages on fake pointers");
  a.check_pages = 0;
  a.config_json = "{\"algorithm\":\"fa2\"}";
  expect(failed_at_device(flashjit_forward(rt, &a)), "paged forward with a partial config reaches the device lookup");
  a.config_json = NULL;
  a.k_strides.batch = 16 * 2 * 64 * 2, a.v_strides.batch = 16 * 2 * 64 * 2; /* pages with room between them */
  expect(failed_at_device(flashjit_forward(rt, &a)), "paged forward with a page stride");
  a = fake_paged_problem();
  a.cu_seqlens_q = (const int*)0x70000;
  a.batch = 3, a.total_q = 300;
  expect(failed_at_device(flashjit_forward(rt, &a)), "paged forward of ragged queries on fake pointers");

  /* Each field is read: its checks name it. */
  a = fake_paged_problem();
  a.seqused_k = NULL;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "seqused_k is a null pointer"),
         "paged without seqused_k: names seqused_k");
  a.seqused_k = (const int*)0x72002;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "seqused_k (0x72002) must be 4-byte aligned"),
         "paged with a misaligned seqused_k");
  a = fake_paged_problem();
  a.page_table = (const int*)0x71001;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "page_table (0x71001) must be 4-byte aligned"),
         "paged with a misaligned page_table");
  a = fake_paged_problem();
  a.page_size = 24;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "page_size must be a power of two in [1, 256], got 24"),
         "paged with page_size 24");
  a.page_size = 512;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "got 512"),
         "paged with page_size 512");
  a = fake_paged_problem();
  a.num_pages = 0;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "num_pages"),
         "paged without pages: names num_pages");
  a = fake_paged_problem();
  a.max_pages_per_seq = 4; /* 64 keys, below seqlen_k 128 */
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "seqlen_k (128) is more keys than max_pages_per_seq * page_size"),
         "paged with too few pages per sequence for seqlen_k");
  a.max_pages_per_seq = 0;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "max_pages_per_seq"),
         "paged with max_pages_per_seq 0");
  a = fake_paged_problem();
  a.cu_seqlens_q = (const int*)0x70000, a.cu_seqlens_k = (const int*)0x70100;
  a.total_q = 300, a.total_k = 500;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "cu_seqlens_k must be null for a paged problem") &&
             contains(flashjit_last_error(), "total_k must be 0 for a paged problem"),
         "paged with cu_seqlens_k and total_k: both named");
  a = fake_paged_problem();
  a.cu_seqlens_q = (const int*)0x70000;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "total_q"),
         "ragged queries over pages without total_q: names total_q");
  a.total_q = 300, a.q_strides.batch = 1024;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "q_strides.batch must be 0"),
         "ragged queries over pages with a batch stride: names q_strides.batch");
  a = fake_problem();
  a.seqused_k = (const int*)0x72000, a.page_size = 16;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "are for paged problems"),
         "seqused_k and page_size without a page table are rejected");
  a = fake_paged_problem();
  a.page_indptr = (const int*)0x73000, a.last_page_len = (const int*)0x74000;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "needs exactly one of seqused_k (key counts) and last_page_len"),
         "a CSR page table with both seqused_k and last_page_len is rejected");
  a.page_indptr = NULL;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "last_page_len is for CSR page tables"),
         "last_page_len without page_indptr is rejected");
  a.struct_size = offsetof(flashjit_attention_args, page_indptr);
  a.page_indptr = (const int*)0x3, a.last_page_len = (const int*)0x3;
  expect(flashjit_forward(rt, &a) != FLASHJIT_ERROR_INVALID_ARGUMENT ||
             !contains(flashjit_last_error(), "last_page_len"),
         "a caller built before the CSR fields: they are not read");

  /* A caller built before the paged fields: struct_size ends at alignment, the (garbage) fields after it are not
   * read; the full size reads them. */
  a = fake_problem();
  a.page_table = (const int*)0x3;
  a.seqused_k = NULL;
  a.page_size = 7, a.num_pages = -1, a.max_pages_per_seq = -1, a.check_pages = 5;
  a.struct_size = offsetof(flashjit_attention_args, page_table);
  expect(failed_at_device(flashjit_forward(rt, &a)), "args without the paged fields: contiguous keys");
  {
    const int64_t n = flashjit_select_target(rt, &a, &t, text, sizeof text);
    expect(n > 0 && !contains(text, "page_size"), "select_target of older args: a contiguous kernel");
  }
  a.struct_size = sizeof a;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "page_size"),
         "full args: the paged fields are read");

  /* select carries the page size into the config, on sm_90a and sm_80, dense and ragged queries; the tensors may
   * be NULL, page_table and seqused_k any aligned value. */
  a = flashjit_attention_args_default();
  a.batch = 4, a.seqlen_q = 1024, a.seqlen_k = 4096, a.heads_q = 32, a.heads_kv = 8, a.head_dim = 128;
  a.mask = FLASHJIT_MASK_CAUSAL;
  a.page_table = (const int*)0x100, a.seqused_k = (const int*)0x200;
  a.page_size = 16, a.num_pages = 1024, a.max_pages_per_seq = 256;
  {
    const int64_t n = flashjit_select_target(rt, &a, &t, text, sizeof text);
    expect(n > 0 && contains(text, "\"page_size\":16") && contains(text, "\"mask\":\"causal\""),
           "select_target: a paged problem on sm_90a has the page size");
  }
  t.arch = "sm_80";
  a.page_size = 256, a.max_pages_per_seq = 16;
  {
    const int64_t n = flashjit_select_target(rt, &a, &t, text, sizeof text);
    expect(n > 0 && contains(text, "\"algorithm\":\"fa2\"") && contains(text, "\"page_size\":256"),
           "select_target: a paged problem on sm_80 is fa2 with the page size");
  }
  a.cu_seqlens_q = (const int*)0x300, a.total_q = 2048;
  a.page_size = 1, a.max_pages_per_seq = 4096;
  {
    const int64_t n = flashjit_select_target(rt, &a, &t, text, sizeof text);
    expect(n > 0 && contains(text, "\"varlen\":true") && contains(text, "\"page_size\":1"),
           "select_target: ragged queries over pages of one token");
  }
  flashjit_runtime_destroy(rt);
}

/* A well-formed decode over a contiguous cache on fake (aligned, non-null) pointers. */
static flashjit_decode_args fake_decode(void) {
  flashjit_decode_args a = flashjit_decode_args_default();
  a.q = (const void*)0x10000;
  a.o = (void*)0x20000;
  a.k_cache = (const void*)0x30000;
  a.v_cache = (const void*)0x40000;
  a.seqlens_k = (const int32_t*)0x50000;
  a.batch = 2, a.q_len = 1, a.heads_q = 32, a.heads_kv = 8, a.head_dim = 128, a.max_seqlen_k = 1024;
  a.dtype = FLASHJIT_DTYPE_BF16;
  return a;
}

static flashjit_decode_args fake_paged_decode(void) {
  flashjit_decode_args a = fake_decode();
  a.layout = FLASHJIT_KV_PAGED;
  a.page_table = (const int32_t*)0x60000;
  a.num_pages = 128, a.page_size = 16, a.max_pages_per_seq = 64;
  return a;
}

/* A decode call that must fail with INVALID_ARGUMENT and a message containing `field`. */
static void expect_decode_rejected(flashjit_runtime* rt, const flashjit_decode_args* a, const char* field,
                                   const char* what) {
  char text[256];
  const int status = flashjit_decode(rt, a);
  snprintf(text, sizeof text, "decode with %s: invalid argument naming %s", what, field);
  expect(status == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), field), text);
  snprintf(text, sizeof text, "decode_workspace_bytes with %s: invalid argument naming %s", what, field);
  expect(flashjit_decode_workspace_bytes(rt, a) == -FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), field),
         text);
  snprintf(text, sizeof text, "prepare_decode with %s: invalid argument", what);
  expect(flashjit_prepare_decode(rt, a) == FLASHJIT_ERROR_INVALID_ARGUMENT, text);
}

static void test_decode(const char* root) {
  flashjit_runtime* rt = NULL;
  flashjit_decode_args a;
  rt = runtime_in(root, "create for the decode tests");
  if (rt == NULL) return;
  expect(FLASHJIT_DECODE_ARGS_MIN_SIZE == offsetof(flashjit_decode_args, layout) &&
             FLASHJIT_DECODE_ARGS_MIN_SIZE < sizeof(flashjit_decode_args),
         "decode args: the required fields end where layout begins");
  a = flashjit_decode_args_default();
  expect(a.struct_size == sizeof a && a.window_left == -1 && a.layout == FLASHJIT_KV_CONTIGUOUS &&
             a.workspace == NULL && a.num_splits == 0 && a.softmax_scale == 0.f && a.chunk_size == 0,
         "flashjit_decode_args_default");

  a = fake_decode();
  expect(flashjit_decode(NULL, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "runtime"),
         "decode without runtime");
  expect(flashjit_decode(rt, NULL) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "args is NULL"),
         "decode without args");
  expect(flashjit_prepare_decode(NULL, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "prepare_decode without runtime");
  expect(flashjit_prepare_decode(rt, NULL) == FLASHJIT_ERROR_INVALID_ARGUMENT, "prepare_decode without args");
  expect(flashjit_decode_workspace_bytes(NULL, &a) == -FLASHJIT_ERROR_INVALID_ARGUMENT,
         "decode_workspace_bytes without runtime");
  expect(flashjit_decode_workspace_bytes(rt, NULL) == -FLASHJIT_ERROR_INVALID_ARGUMENT,
         "decode_workspace_bytes without args");

  /* Well-formed problems on fake pointers get past every check that needs no device. */
  expect(failed_at_device(flashjit_decode(rt, &a)), "decode of a valid contiguous problem on fake pointers");
  expect(failed_at_device(flashjit_prepare_decode(rt, &a)), "prepare_decode on fake pointers");
  expect(failed_at_device((int)-flashjit_decode_workspace_bytes(rt, &a)), "decode_workspace_bytes on fake pointers");
  a = fake_paged_decode();
  expect(failed_at_device(flashjit_decode(rt, &a)), "decode of a valid paged problem on fake pointers");

  /* struct_size rules. */
  a = fake_decode();
  a.struct_size = FLASHJIT_DECODE_ARGS_MIN_SIZE - 1;
  expect_decode_rejected(rt, &a, "flashjit_decode_args.struct_size", "a too small struct_size");
  a.struct_size = 0;
  expect_decode_rejected(rt, &a, "struct_size", "struct_size 0");
  a = fake_decode();
  a.layout = 99;
  a.window_left = -7;
  a.num_splits = 1000;
  a.workspace_bytes = 12;
  a.stream = (void*)0x1;
  a.struct_size = FLASHJIT_DECODE_ARGS_MIN_SIZE;
  expect(failed_at_device(flashjit_decode(rt, &a)), "older decode args: fields past struct_size take their defaults");
  a.struct_size = sizeof a;
  expect_decode_rejected(rt, &a, "layout 99", "the full struct: an unknown layout");
  /* split_merge: an unknown value is named; a header from before it leaves the default. */
  a = fake_decode();
  a.split_merge = 7;
  expect_decode_rejected(rt, &a, "split_merge", "an unknown split_merge");
  a.struct_size = offsetof(flashjit_decode_args, split_merge);
  expect(failed_at_device(flashjit_decode(rt, &a)), "decode args from before split_merge: the planner's merge");
  /* chunk_size (the last field): read through to the problem's checks; a header from before it: no chunks. */
  a = fake_decode();
  a.chunk_size = -1;
  expect_decode_rejected(rt, &a, "chunk_size", "chunk_size -1");
  a.struct_size = offsetof(flashjit_decode_args, chunk_size);
  expect(failed_at_device(flashjit_decode(rt, &a)), "decode args from before chunk_size: no chunks");
  a = fake_decode();
  a.chunk_size = 64;
  a.window_left = 100;
  expect_decode_rejected(rt, &a, "chunk_size 64 and window_left 100", "chunk_size with a sliding window");
  a.struct_size = offsetof(flashjit_decode_args, chunk_size);
  expect(failed_at_device(flashjit_decode(rt, &a)), "a window from a header before chunk_size: no chunks");
  a = fake_decode();
  a.chunk_size = 64;
  expect(failed_at_device(flashjit_decode(rt, &a)), "decode with chunk_size 64 on fake pointers");
  expect(failed_at_device((int)-flashjit_decode_workspace_bytes(rt, &a)),
         "decode_workspace_bytes with chunk_size 64 on fake pointers");
  a = fake_paged_decode();
  a.chunk_size = 1;
  expect(failed_at_device(flashjit_decode(rt, &a)), "paged decode with chunk_size 1 on fake pointers");
  a = fake_decode();
  a.split_merge = FLASHJIT_SPLIT_MERGE_CLUSTER;
  a.num_splits = 17;
  expect_decode_rejected(rt, &a, "at most 16 splits", "a forced cluster merge of 17 splits");
  {
    struct {
      flashjit_decode_args a;
      uint64_t newer_field;
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.a = fake_decode();
    newer.a.struct_size = sizeof newer;
    expect(failed_at_device(flashjit_decode(rt, &newer.a)), "newer decode args with zero extra fields");
    newer.newer_field = 3;
    expect_decode_rejected(rt, &newer.a, "newer flashjit.h", "a newer struct with a set extra field");
  }

  /* Bad fields, each named in the message. */
  a = fake_decode();
  a.dtype = 5;
  expect_decode_rejected(rt, &a, "dtype 5", "an unknown dtype");
  a = fake_decode();
  a.workspace_bytes = 4096;
  expect_decode_rejected(rt, &a, "workspace", "workspace NULL with workspace_bytes");
  a = fake_decode();
  a.q_len = 0;
  expect_decode_rejected(rt, &a, "q_len", "q_len 0");
  a = fake_decode();
  a.q_len = 17;
  expect_decode_rejected(rt, &a, "q_len", "q_len 17");
  a = fake_decode();
  a.heads_kv = 3;
  expect_decode_rejected(rt, &a, "heads_kv", "heads_q not a multiple of heads_kv");
  a = fake_decode();
  a.head_dim = 72;
  expect_decode_rejected(rt, &a, "head_dim", "head_dim 72");
  a = fake_decode();
  a.max_seqlen_k = 0;
  expect_decode_rejected(rt, &a, "max_seqlen_k", "max_seqlen_k 0");
  a = fake_decode();
  a.cache_seqlen = 512;
  expect_decode_rejected(rt, &a, "cache_seqlen", "max_seqlen_k beyond cache_seqlen");
  a = fake_decode();
  a.seqlens_k = NULL;
  expect_decode_rejected(rt, &a, "seqlens_k", "seqlens_k NULL");
  a = fake_decode();
  a.q = (const void*)0x10008;
  expect_decode_rejected(rt, &a, "q (", "a misaligned q");
  a = fake_decode();
  a.v_cache = NULL;
  expect_decode_rejected(rt, &a, "v_cache", "v_cache NULL");
  a = fake_decode();
  a.k_strides.head = 12;
  expect_decode_rejected(rt, &a, "k_cache head stride", "a k_cache head stride of 12");
  a = fake_decode();
  a.page_table = (const int32_t*)0x60000;
  expect_decode_rejected(rt, &a, "page_table", "a page table with a contiguous cache");
  a = fake_paged_decode();
  a.page_size = 24;
  expect_decode_rejected(rt, &a, "page_size", "page_size 24");
  a = fake_paged_decode();
  a.page_table = NULL;
  expect_decode_rejected(rt, &a, "page_table", "a paged cache without page table");
  a = fake_paged_decode();
  a.num_pages = 0;
  expect_decode_rejected(rt, &a, "num_pages", "num_pages 0");
  a = fake_paged_decode();
  a.max_pages_per_seq = 8; /* 8 x 16 < 1024 */
  expect_decode_rejected(rt, &a, "max_pages_per_seq", "a page table shorter than max_seqlen_k");
  a = fake_decode();
  a.window_left = -2;
  expect_decode_rejected(rt, &a, "window_left", "window_left -2");
  a = fake_decode();
  a.softmax_scale = -1.f;
  expect_decode_rejected(rt, &a, "softmax_scale", "a negative softmax_scale");
  a = fake_decode();
  a.num_splits = 33;
  expect_decode_rejected(rt, &a, "num_splits", "num_splits 33");

  /* FlashInfer's CSR page table (the fields at the end): key counts from seqlens_k or last_page_len. */
  a = fake_paged_decode();
  a.page_indptr = (const int32_t*)0x70000;
  expect(failed_at_device(flashjit_decode(rt, &a)), "a CSR decode with seqlens_k on fake pointers");
  a.seqlens_k = NULL, a.last_page_len = (const int32_t*)0x71000;
  expect(failed_at_device(flashjit_decode(rt, &a)), "a CSR decode with last_page_len on fake pointers");
  a.seqlens_k = (const int32_t*)0x50000;
  expect_decode_rejected(rt, &a, "needs exactly one of seqlens_k (key counts) and last_page_len",
                         "a CSR table with both seqlens_k and last_page_len");
  a.page_indptr = NULL;
  expect_decode_rejected(rt, &a, "last_page_len is for CSR page tables", "last_page_len without page_indptr");
  a = fake_decode();
  a.page_indptr = (const int32_t*)0x70000;
  expect_decode_rejected(rt, &a, "are for a paged cache's CSR page table", "page_indptr with a contiguous cache");
  /* A caller built before the CSR fields: struct_size ends at seqlens_out, the (garbage) fields are not read. */
  a = fake_paged_decode();
  a.page_indptr = (const int32_t*)0x3, a.last_page_len = (const int32_t*)0x3;
  a.struct_size = offsetof(flashjit_decode_args, page_indptr);
  expect(failed_at_device(flashjit_decode(rt, &a)), "decode args from before the CSR fields: a dense table");
  a.struct_size = sizeof a;
  expect_decode_rejected(rt, &a, "page_indptr must be 4-byte aligned", "the full struct reads the CSR fields");
  flashjit_runtime_destroy(rt);
}

static flashjit_merge_args fake_merge(const void* const* o_in, const float* const* lse_in) {
  flashjit_merge_args a = flashjit_merge_args_default();
  a.dtype = FLASHJIT_DTYPE_FP16;
  a.batch = 2, a.seqlen = 4, a.heads = 8, a.head_dim = 128, a.num_states = 3;
  a.o_in = o_in;
  a.lse_in = lse_in;
  a.o = (void*)0x90000;
  return a;
}

static void expect_merge_rejected(flashjit_runtime* rt, const flashjit_merge_args* a, const char* field,
                                  const char* what) {
  char text[256];
  snprintf(text, sizeof text, "merge with %s: invalid argument naming %s", what, field);
  expect(flashjit_merge(rt, a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), field), text);
}

static void test_merge(const char* root) {
  flashjit_runtime* rt = NULL;
  flashjit_merge_args a;
  const void* o_in[3] = {(const void*)0x10000, (const void*)0x20000, (const void*)0x30000};
  const float* lse_in[3] = {(const float*)0x40000, (const float*)0x50000, (const float*)0x60000};
  rt = runtime_in(root, "create for the merge tests");
  if (rt == NULL) return;
  expect(FLASHJIT_MERGE_ARGS_MIN_SIZE == offsetof(flashjit_merge_args, in_strides), "merge args: required fields");
  a = fake_merge(o_in, lse_in);
  expect(flashjit_merge(NULL, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "merge without runtime");
  expect(flashjit_merge(rt, NULL) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "args is NULL"),
         "merge without args");
  expect(failed_at_device(flashjit_merge(rt, &a)), "merge of a valid problem on fake pointers");
  a.num_states = 1;
  expect(failed_at_device(flashjit_merge(rt, &a)), "merge of one state on fake pointers");

  a = fake_merge(o_in, lse_in);
  a.struct_size = FLASHJIT_MERGE_ARGS_MIN_SIZE - 1;
  expect_merge_rejected(rt, &a, "flashjit_merge_args.struct_size", "a too small struct_size");
  a = fake_merge(o_in, lse_in);
  a.lse = (float*)0x3;
  a.in_strides.seq = 5;
  a.struct_size = FLASHJIT_MERGE_ARGS_MIN_SIZE;
  expect(failed_at_device(flashjit_merge(rt, &a)), "older merge args: fields past struct_size take their defaults");

  a = fake_merge(o_in, lse_in);
  a.dtype = 3;
  expect_merge_rejected(rt, &a, "dtype 3", "an unknown dtype");
  a = fake_merge(o_in, lse_in);
  a.num_states = 0;
  expect_merge_rejected(rt, &a, "num_states", "num_states 0");
  a = fake_merge(o_in, lse_in);
  a.num_states = FLASHJIT_MAX_MERGE_STATES + 1; /* rejected before the 3-entry arrays are read past their end */
  expect_merge_rejected(rt, &a, "num_states", "num_states 33");
  a = fake_merge(NULL, lse_in);
  expect_merge_rejected(rt, &a, "o_in", "o_in NULL");
  a = fake_merge(o_in, NULL);
  expect_merge_rejected(rt, &a, "lse_in", "lse_in NULL");
  a = fake_merge(o_in, lse_in);
  a.heads = 0;
  expect_merge_rejected(rt, &a, "heads", "heads 0");
  a = fake_merge(o_in, lse_in);
  a.o = NULL;
  expect_merge_rejected(rt, &a, "o is a null", "o NULL");
  a = fake_merge(o_in, lse_in);
  a.o = (void*)o_in[1];
  expect_merge_rejected(rt, &a, "o aliases o_in[1]", "o aliasing an input");
  flashjit_runtime_destroy(rt);
}

/* Selection for a GPU that is not there: the dispatcher's choice per arch, the decode plan per SM count, no
 * device touched (the pointers may be NULL), errors naming the target's fields. */
/* Append: the args struct's rules and the problem's checks, reached without a device; the fused append's fields
 * of flashjit_decode_args (a header from before them: no append), and "append" in select_decode's JSON. */
static flashjit_append_args fake_append(void) {
  flashjit_append_args a = flashjit_append_args_default();
  a.k = (const void*)0x10000, a.v = (const void*)0x20000;
  a.k_cache = (void*)0x30000, a.v_cache = (void*)0x40000;
  a.cache_seqlens = (const int32_t*)0x50000;
  a.batch = 2, a.new_len = 3, a.heads_kv = 8, a.head_dim = 128, a.dtype = FLASHJIT_DTYPE_BF16;
  a.cache_seqlen = 1024;
  return a;
}

static void expect_append_rejected(flashjit_runtime* rt, const flashjit_append_args* a, const char* part,
                                   const char* what) {
  char text[256];
  snprintf(text, sizeof text, "append_kv with %s: invalid argument naming %s", what, part);
  expect(flashjit_append_kv(rt, a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), part), text);
  snprintf(text, sizeof text, "prepare_append_kv with %s: invalid argument", what);
  expect(flashjit_prepare_append_kv(rt, a) == FLASHJIT_ERROR_INVALID_ARGUMENT, text);
}

static void test_append(const char* root) {
  char text[4096];
  flashjit_runtime* rt = runtime_in(root, "create for the append tests");
  flashjit_append_args a;
  flashjit_decode_args d;
  flashjit_target t = flashjit_target_default();
  if (rt == NULL) return;
  expect(FLASHJIT_APPEND_ARGS_MIN_SIZE == offsetof(flashjit_append_args, layout), "append args: required up to layout");
  a = flashjit_append_args_default();
  expect(a.struct_size == sizeof a && a.layout == FLASHJIT_KV_CONTIGUOUS && a.cu_seqlens == NULL &&
             a.seqlens_out == NULL && a.check_pages == 0,
         "flashjit_append_args_default");
  a = fake_append();
  expect(flashjit_append_kv(NULL, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "append_kv without runtime");
  expect(flashjit_append_kv(rt, NULL) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "args is NULL"),
         "append_kv without args");
  expect(failed_at_device(flashjit_append_kv(rt, &a)), "append_kv of a valid contiguous problem on fake pointers");
  expect(failed_at_device(flashjit_prepare_append_kv(rt, &a)), "prepare_append_kv on fake pointers");
  a.layout = FLASHJIT_KV_PAGED, a.cache_seqlen = 0;
  a.page_table = (const int32_t*)0x60000, a.num_pages = 64, a.page_size = 16, a.max_pages_per_seq = 32;
  a.cu_seqlens = (const int32_t*)0x70000, a.total_new = 5;
  a.k_cache_strides.batch = 8 * 16 * 128, a.k_cache_strides.seq = 128, a.k_cache_strides.head = 16 * 128;  /* HND */
  expect(failed_at_device(flashjit_append_kv(rt, &a)), "append_kv of a valid ragged HND paged problem on fake pointers");

  a = fake_append();
  a.struct_size = FLASHJIT_APPEND_ARGS_MIN_SIZE - 1;
  expect_append_rejected(rt, &a, "flashjit_append_args.struct_size", "a too small struct_size");
  a = fake_append();
  a.layout = 7;
  expect_append_rejected(rt, &a, "layout 7", "an unknown layout");
  a.struct_size = FLASHJIT_APPEND_ARGS_MIN_SIZE;  /* an older header: contiguous, but no capacity given */
  expect_append_rejected(rt, &a, "cache_seqlen", "the minimum struct_size");
  a = fake_append();
  a.dtype = 5;
  expect_append_rejected(rt, &a, "dtype 5", "an unknown dtype");
  a = fake_append();
  a.head_dim = 12;
  expect_append_rejected(rt, &a, "head_dim", "head_dim 12");
  a = fake_append();
  a.seqlens_out = (int32_t*)0x50000;
  expect_append_rejected(rt, &a, "seqlens_out is cache_seqlens", "seqlens_out aliasing cache_seqlens");
  a = fake_append();
  a.k_strides.seq = 1028;
  expect_append_rejected(rt, &a, "k token stride", "a token stride of 1028 elements");

  /* FlashInfer's CSR page table (the fields at the end): lengths from cache_seqlens or last_page_len. */
  a = fake_append();
  a.layout = FLASHJIT_KV_PAGED, a.cache_seqlen = 0;
  a.page_table = (const int32_t*)0x60000, a.num_pages = 64, a.page_size = 16, a.max_pages_per_seq = 32;
  a.page_indptr = (const int32_t*)0x90000;
  expect(failed_at_device(flashjit_append_kv(rt, &a)), "a CSR append with cache_seqlens on fake pointers");
  a.cache_seqlens = NULL, a.last_page_len = (const int32_t*)0x91000;
  expect(failed_at_device(flashjit_append_kv(rt, &a)), "a CSR append with last_page_len on fake pointers");
  a.seqlens_out = (int32_t*)0x91000;
  expect_append_rejected(rt, &a, "seqlens_out is last_page_len", "seqlens_out aliasing last_page_len");
  a.seqlens_out = NULL, a.cache_seqlens = (const int32_t*)0x50000;
  expect_append_rejected(rt, &a, "needs exactly one of cache_seqlens (the lengths before the append) and last_page_len",
                         "a CSR table with both cache_seqlens and last_page_len");
  a.page_indptr = NULL;
  expect_append_rejected(rt, &a, "last_page_len is for CSR page tables", "last_page_len without page_indptr");
  /* A caller built before the CSR fields: struct_size ends at stream, the (garbage) fields are not read. */
  a.page_indptr = (const int32_t*)0x3, a.last_page_len = (const int32_t*)0x3;
  a.struct_size = offsetof(flashjit_append_args, page_indptr);
  expect(failed_at_device(flashjit_append_kv(rt, &a)), "append args from before the CSR fields: a dense table");
  a.struct_size = sizeof a;
  expect_append_rejected(rt, &a, "page_indptr must be 4-byte aligned", "the full struct reads the CSR fields");

  /* The fused append's fields of flashjit_decode_args. */
  d = fake_decode();
  d.k_new = (const void*)0x70000, d.v_new = (const void*)0x80000, d.new_len = 1;
  expect(failed_at_device(flashjit_decode(rt, &d)), "decode with a fused append on fake pointers");
  d.v_new = (const void*)0x80008;
  expect_decode_rejected(rt, &d, "v (0x80008) must be 16-byte aligned", "a misaligned v_new");
  d.struct_size = offsetof(flashjit_decode_args, k_new);  /* a header from before them: no append, no check */
  expect(failed_at_device(flashjit_decode(rt, &d)), "decode args from before the fused append");
  d = fake_decode();
  d.new_len = 1;
  expect_decode_rejected(rt, &d, "k is a null pointer", "new_len without k_new");
  d = fake_decode();
  d.k_new = (const void*)0x70000;
  expect_decode_rejected(rt, &d, "new_len is 0", "k_new without new_len");
  /* Over a CSR table: the lengths before the new rows (seqlens_k), or after them (last_page_len). */
  d = fake_paged_decode();
  d.k_new = (const void*)0x70000, d.v_new = (const void*)0x80000, d.new_len = 1;
  d.page_indptr = (const int32_t*)0x90000;
  expect(failed_at_device(flashjit_decode(rt, &d)), "a fused append over a CSR table with seqlens_k on fake pointers");
  d.seqlens_k = NULL, d.last_page_len = (const int32_t*)0x91000;
  expect(failed_at_device(flashjit_decode(rt, &d)), "a fused append over a CSR table with last_page_len");
  d.seqlens_out = (int32_t*)0x91000;
  expect_decode_rejected(rt, &d, "seqlens_out is last_page_len", "a fused append's seqlens_out aliasing last_page_len");

  d = flashjit_decode_args_default();
  d.batch = 64, d.q_len = 1, d.heads_q = 32, d.heads_kv = 8, d.head_dim = 128, d.max_seqlen_k = 8192;
  d.dtype = FLASHJIT_DTYPE_BF16, d.layout = FLASHJIT_KV_PAGED, d.page_size = 16, d.num_pages = 64 * 512;
  d.max_pages_per_seq = 512;
  expect(flashjit_select_decode(rt, &d, &t, text, sizeof text) > 0 && contains(text, "\"append\":null"),
         "select_decode without new rows: no append kernel");
  d.new_len = 1;
  expect(flashjit_select_decode(rt, &d, &t, text, sizeof text) > 0 &&
             contains(text, "\"append\":{\"kernel\":\"append\"") && contains(text, "\"page_size\":16,\"warps\":4"),
         "select_decode with a fused append: its kernel");
  d.num_splits = 1;  /* no partials: the workspace holds the new lengths alone */
  expect(flashjit_select_decode(rt, &d, &t, text, sizeof text) > 0 && contains(text, "\"workspace_bytes\":256"),
         "select_decode with a fused append: the new lengths in the workspace");
  d.page_indptr = (const int32_t*)0x90000, d.last_page_len = (const int32_t*)0x91000;
  expect(flashjit_select_decode(rt, &d, &t, text, sizeof text) > 0 &&
             contains(text, "\"append\":{\"kernel\":\"append\"") && contains(text, "\"workspace_bytes\":0"),
         "select_decode with a fused append over a CSR table's last_page_len: the decode reads it, no lengths");
  flashjit_runtime_destroy(rt);
}

static void test_select_target(const char* root) {
  char text[4096];
  flashjit_runtime* rt = NULL;
  flashjit_attention_args a;
  flashjit_decode_args d;
  flashjit_target t = flashjit_target_default();
  int64_t n;
  rt = runtime_in(root, "create for the select tests");
  if (rt == NULL) return;
  expect(t.struct_size == sizeof t && strcmp(t.arch, "sm_90a") == 0 && t.sms == 0 && t.gpu_name == NULL,
         "flashjit_target_default");
  expect(FLASHJIT_TARGET_MIN_SIZE == offsetof(flashjit_target, sms), "target: the required fields end at sms");

  /* Prefill: no pointers at all. llama3-shaped d128 on sm_90a: the persistent fa3 kernel; a small grid: the
   * 64-row one; sm_80: fa2; the mask and dtype come from the problem. */
  a = flashjit_attention_args_default();
  a.batch = 1, a.seqlen_q = 4096, a.seqlen_k = 4096, a.heads_q = 32, a.heads_kv = 8, a.head_dim = 128;
  a.dtype = FLASHJIT_DTYPE_BF16;
  a.mask = FLASHJIT_MASK_CAUSAL;
  n = flashjit_select_target(rt, &a, &t, text, sizeof text);
  expect(n > 0 && contains(text, "\"algorithm\":\"fa3\"") && contains(text, "\"arch\":\"sm_90a\"") &&
             contains(text, "\"block_m\":128") && contains(text, "\"scheduler\":\"persistent\"") &&
             contains(text, "\"mask\":\"causal\""),
         "select_target: llama3 d128 on sm_90a is the persistent fa3 kernel");
  a.seqlen_q = a.seqlen_k = 128, a.heads_q = 8, a.heads_kv = 2;
  n = flashjit_select_target(rt, &a, &t, text, sizeof text);
  expect(n > 0 && contains(text, "\"algorithm\":\"fa3\"") && contains(text, "\"block_m\":64"),
         "select_target: a grid of 8 CTAs gets the 64-row fa3 kernel");
  t.arch = "sm_80";
  n = flashjit_select_target(rt, &a, &t, text, sizeof text);
  expect(n > 0 && contains(text, "\"algorithm\":\"fa2\"") && contains(text, "\"arch\":\"sm_80\""),
         "select_target: sm_80 gets fa2");
  a.cu_seqlens_q = (const int*)0x100, a.cu_seqlens_k = (const int*)0x200, a.total_q = 300, a.total_k = 300;
  n = flashjit_select_target(rt, &a, &t, text, sizeof text);
  expect(n > 0 && contains(text, "\"varlen\":true"), "select_target: varlen marked by the offsets alone");
  a.cu_seqlens_q = NULL, a.cu_seqlens_k = NULL, a.total_q = 0, a.total_k = 0;
  t.gpu_name = "NVIDIA H200";
  n = flashjit_select_target(rt, &a, &t, text, sizeof text);
  expect(n > 0 && contains(text, "\"algorithm\":\"fa2\""), "select_target: a GPU name without tuned tables");
  t.gpu_name = NULL;
  t.arch = "sm_9x";
  expect(flashjit_select_target(rt, &a, &t, text, sizeof text) == -FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "sm_9x"),
         "select_target: an unknown arch is named");
  t.arch = NULL;
  expect(flashjit_select_target(rt, &a, &t, text, sizeof text) == -FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "arch is NULL"),
         "select_target: a NULL arch");
  t = flashjit_target_default();
  t.sms = -1;
  expect(flashjit_select_target(rt, &a, &t, text, sizeof text) == -FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "sms"),
         "select_target: negative sms");
  t = flashjit_target_default();
  t.struct_size = FLASHJIT_TARGET_MIN_SIZE - 1;
  expect(flashjit_select_target(rt, &a, &t, text, sizeof text) == -FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "flashjit_target.struct_size"),
         "select_target: a too small struct_size");
  t.struct_size = FLASHJIT_TARGET_MIN_SIZE;  /* an older header: sms and gpu_name take their defaults */
  t.sms = -5;
  expect(flashjit_select_target(rt, &a, &t, text, sizeof text) > 0, "select_target: the minimum struct_size");
  t = flashjit_target_default();
  a.head_dim = 12;
  expect(flashjit_select_target(rt, &a, &t, text, sizeof text) == -FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "head_dim"),
         "select_target: the problem is checked");
  a = fake_problem();
  expect(failed_at_device((int)-flashjit_select_target(rt, &a, NULL, text, sizeof text)),
         "select_target without a target: the pointers' device");

  /* Decode: one sequence over 32k keys splits across 132 SMs, not across 8 (8 KV heads fill them). */
  d = flashjit_decode_args_default();
  d.batch = 1, d.q_len = 1, d.heads_q = 32, d.heads_kv = 8, d.head_dim = 128, d.max_seqlen_k = 32768;
  d.dtype = FLASHJIT_DTYPE_BF16;
  n = flashjit_select_decode(rt, &d, &t, text, sizeof text);
  expect(n > 0 && contains(text, "\"split\":{") && contains(text, "\"kernel\":\"decode\"") &&
             !contains(text, "\"num_splits\":1,") && contains(text, "\"combine\":{") &&
             !contains(text, "\"workspace_bytes\":0}"),
         "select_decode: B1 over 32k keys on 132 SMs splits and combines");
  t.sms = 8;
  n = flashjit_select_decode(rt, &d, &t, text, sizeof text);
  expect(n > 0 && contains(text, "\"num_splits\":1,") && contains(text, "\"combine\":null") &&
             contains(text, "\"workspace_bytes\":0}"),
         "select_decode: on 8 SMs the 8 KV heads are enough, no split");
  d.num_splits = 3;
  n = flashjit_select_decode(rt, &d, &t, text, sizeof text);
  expect(n > 0 && contains(text, "\"num_splits\":3,"), "select_decode: forced splits");
  d.layout = FLASHJIT_KV_PAGED, d.page_size = 16, d.num_pages = 4096, d.max_pages_per_seq = 2048;
  n = flashjit_select_decode(rt, &d, &t, text, sizeof text);
  expect(n > 0 && contains(text, "\"layout\":\"paged\"") && contains(text, "\"page_size\":16"),
         "select_decode: a paged cache without a page table pointer");
  d.num_splits = 0, d.split_merge = FLASHJIT_SPLIT_MERGE_CLUSTER;
  t.arch = "sm_80", t.sms = 108;
  expect(flashjit_select_decode(rt, &d, &t, text, sizeof text) == -FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "a sm_80 target with 108 SMs"),
         "select_decode: a cluster merge refused on sm_80 names the target");
  d = fake_decode();
  d.q_len = 0;
  expect(flashjit_select_decode(rt, &d, &t, text, sizeof text) == -FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "q_len"),
         "select_decode: the problem is checked");
  d = fake_decode();
  expect(failed_at_device((int)-flashjit_select_decode(rt, &d, NULL, text, sizeof text)),
         "select_decode without a target: the pointers' device");
  flashjit_runtime_destroy(rt);
}

/* Variants (softcap, ALiBi, sinks): the fields appended to flashjit_attention_args and flashjit_decode_args reach
 * the problem (its checks name them), a caller built before them (struct_size ending at check_seqlens /
 * chunk_size) gets them off whatever the bytes past its struct hold, and select names the variant. */
static void test_variants(const char* root) {
  char text[4096];
  flashjit_runtime* rt = runtime_in(root, "create for the variant tests");
  flashjit_attention_args a;
  flashjit_decode_args d;
  flashjit_target t = flashjit_target_default();
  if (rt == NULL) return;
  a = flashjit_attention_args_default();
  expect(a.softcap == 0.f && a.alibi_slopes == NULL && a.alibi_slopes_batch_stride == 0 && a.sinks == NULL,
         "flashjit_attention_args_default: every variant off");
  expect(offsetof(flashjit_attention_args, softcap) >= offsetof(flashjit_attention_args, check_seqlens) + sizeof(int),
         "attention args: the variants come after check_seqlens");
  d = flashjit_decode_args_default();
  expect(d.softcap == 0.f && d.alibi_slopes == NULL && d.alibi_slopes_batch_stride == 0 && d.sinks == NULL,
         "flashjit_decode_args_default: every variant off");

  /* The fields reach the problem: a valid variant problem gets to the device lookup, bad values are named. */
  a = fake_problem();
  a.softcap = 30.f;
  a.alibi_slopes = (const float*)0x50000;
  a.alibi_slopes_batch_stride = 8;
  a.sinks = (const float*)0x60000;
  expect(failed_at_device(flashjit_forward(rt, &a)), "forward with every variant on fake pointers");
  a.config_json = "{\"algorithm\":\"fa2\"}";
  expect(failed_at_device(flashjit_forward(rt, &a)),
         "forward with variants and a partial config: the variants come from the problem");
  a.config_json = NULL;
  a.softcap = -1.f;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "softcap"),
         "forward with a negative softcap names softcap");
  a.softcap = 30.f;
  a.alibi_slopes = (const float*)0x50002;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "alibi_slopes must be 4-byte aligned"),
         "forward with misaligned alibi_slopes");
  a.alibi_slopes = NULL;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "alibi_slopes_batch_stride"),
         "forward with a slope stride but no slopes");
  a.alibi_slopes_batch_stride = 0;
  a.sinks = (const float*)0x60001;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "sinks must be 4-byte aligned"),
         "forward with misaligned sinks");

  /* An older caller: struct_size ends at check_seqlens; the garbage past it is never read. */
  a = fake_problem();
  a.softcap = -5.f;
  a.alibi_slopes = (const float*)0x3;
  a.alibi_slopes_batch_stride = -1;
  a.sinks = (const float*)0x1;
  a.struct_size = offsetof(flashjit_attention_args, softcap);
  expect(failed_at_device(flashjit_forward(rt, &a)), "args without the variant fields: no variant");
  {
    const int64_t n = flashjit_select_target(rt, &a, &t, text, sizeof text);
    expect(n > 0 && !contains(text, "softcap") && !contains(text, "alibi") && !contains(text, "sinks"),
           "select_target of older args: a kernel without variants");
  }
  a.struct_size = sizeof a;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "softcap"),
         "full args: the variant fields are read");

  /* select names the variants the problem asks for, on sm_90a (fa3) and sm_80 (fa2), fixed-length and varlen. */
  a = flashjit_attention_args_default();
  a.batch = 1, a.seqlen_q = 4096, a.seqlen_k = 4096, a.heads_q = 32, a.heads_kv = 8, a.head_dim = 128;
  a.mask = FLASHJIT_MASK_CAUSAL;
  a.softcap = 50.f;
  expect(flashjit_select_target(rt, &a, &t, text, sizeof text) > 0 && contains(text, "\"algorithm\":\"fa3\"") &&
             contains(text, "\"softcap\":true") && !contains(text, "\"alibi\"") && !contains(text, "\"sinks\""),
         "select_target: softcap on sm_90a");
  a.softcap = 0.f;
  a.alibi_slopes = (const float*)0x100;
  a.sinks = (const float*)0x200;
  t.arch = "sm_80";
  expect(flashjit_select_target(rt, &a, &t, text, sizeof text) > 0 && contains(text, "\"algorithm\":\"fa2\"") &&
             !contains(text, "softcap") && contains(text, "\"alibi\":true") && contains(text, "\"sinks\":true"),
         "select_target: ALiBi and sinks on sm_80");
  a.cu_seqlens_q = (const int*)0x300, a.cu_seqlens_k = (const int*)0x400, a.total_q = 4096, a.total_k = 4096;
  a.softcap = 30.f;
  expect(flashjit_select_target(rt, &a, &t, text, sizeof text) > 0 && contains(text, "\"varlen\":true") &&
             contains(text, "\"softcap\":true") && contains(text, "\"alibi\":true") && contains(text, "\"sinks\":true"),
         "select_target: every variant on a varlen problem");
  t = flashjit_target_default();

  /* Variant configs: emitted with the Variant policy, compiled under a name with the suffix. */
  expect(flashjit_emit("{\"algorithm\":\"fa2\",\"arch\":\"sm_80\",\"head_dim\":64,\"softcap\":true,\"sinks\":true}",
                       text, sizeof text) > 0 &&
             contains(text, "flashjit::Variant</*softcap=*/true, /*alibi=*/false, /*sinks=*/true>"),
         "emit of a variant config");
  {
    char info[2048];
    expect(flashjit_compile(rt, "{\"algorithm\":\"fa2\",\"arch\":\"sm_80\",\"head_dim\":64,\"alibi\":true}", info,
                            sizeof info) > 0 &&
               contains(info, "_none_alibi_sm80\"") && contains(info, "\"alibi\":true"),
           "compile of a variant config: the name has _alibi");
  }

  /* Decode: the fields are read (bad values named) and reach the plan: the split kernel has the variants, the
   * combine kernel the sinks; an older caller's struct_size ends at chunk_size. */
  d = fake_decode();
  d.sinks = (const float*)0x70000;
  d.alibi_slopes = (const float*)0x70100;
  d.softcap = 30.f;
  expect(failed_at_device(flashjit_decode(rt, &d)), "decode with every variant on fake pointers");
  d.sinks = (const float*)0x70002;
  expect(flashjit_decode(rt, &d) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "sinks must be 4-byte aligned"),
         "decode with misaligned sinks");
  d.sinks = NULL;
  d.softcap = -2.f;
  expect(flashjit_decode(rt, &d) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "softcap"),
         "decode with a negative softcap names softcap");
  d = fake_decode();
  d.softcap = -1.f;
  d.alibi_slopes = (const float*)0x1;
  d.sinks = (const float*)0x1;
  d.struct_size = offsetof(flashjit_decode_args, softcap);
  expect(failed_at_device(flashjit_decode(rt, &d)), "decode args without the variant fields: no variant");
  d = flashjit_decode_args_default();
  d.batch = 1, d.q_len = 1, d.heads_q = 64, d.heads_kv = 8, d.head_dim = 64, d.max_seqlen_k = 8192;
  d.sinks = (const float*)0x100;
  d.alibi_slopes = (const float*)0x200;
  expect(flashjit_select_decode(rt, &d, &t, text, sizeof text) > 0 && contains(text, "\"alibi\":true") &&
             contains(text, "\"sinks\":true") && !contains(text, "softcap") && contains(text, "\"combine\":{") &&
             !contains(text, "\"num_splits\":1,"),
         "select_decode: B1 over 8k keys splits, the split kernel with ALiBi and sinks, the combine kernel with sinks");
  d.sinks = NULL;
  expect(flashjit_select_decode(rt, &d, &t, text, sizeof text) > 0 && contains(text, "\"alibi\":true") &&
             !contains(text, "sinks"),
         "select_decode: ALiBi alone, no sinks in either kernel");
  flashjit_runtime_destroy(rt);
}

/* Snippets (score_mod, mask_mod, aux) and the alignment: the fields appended after the variants reach the problem
 * (its checks name them) and the kernel (select's config carries the text, which compiles), a compile error
 * names the snippet's line, an older caller (struct_size ending at sinks) gets none of them. */
static void test_snippets(const char* root) {
  char text[8192];
  flashjit_runtime* rt = runtime_in(root, "create for the snippet tests");
  flashjit_attention_args a;
  flashjit_decode_args d;
  flashjit_target t = flashjit_target_default();
  static const char kScore[] = "__device__ float score_mod(float s, int b, int h, int q, int k,\n"
                               "                           const flashjit::ModContext& ctx) {\n"
                               "  return s - ctx.scalar(0) * (q > k ? q - k : k - q);\n}\n";
  static const char kBroken[] = "__device__ float score_mod(float s, int b, int h, int q, int k,\n"
                                "                           const flashjit::ModContext& ctx) {\n"
                                "  return s + undefined_name;\n}\n";
  if (rt == NULL) return;
  a = flashjit_attention_args_default();
  expect(a.score_mod == NULL && a.mask_mod == NULL && a.aux_pointers[7] == NULL && a.aux_scalars[0] == 0.f &&
             a.aux_integers[7] == 0 && a.alignment == FLASHJIT_ALIGN_BOTTOM_RIGHT,
         "flashjit_attention_args_default: no snippet, bottom-right");
  expect(offsetof(flashjit_attention_args, score_mod) >= offsetof(flashjit_attention_args, sinks) + sizeof(void*),
         "attention args: the snippets come after the variants");

  a = fake_problem();
  a.score_mod = kScore;
  a.aux_scalars[0] = 0.5f;
  a.aux_pointers[0] = (const void*)0x80000;
  expect(failed_at_device(flashjit_forward(rt, &a)), "forward with a score_mod on fake pointers");
  a.alignment = 7;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "alignment"),
         "forward with an unknown alignment names alignment");
  a.alignment = FLASHJIT_ALIGN_TOP_LEFT;
  expect(failed_at_device(flashjit_forward(rt, &a)), "forward with top-left alignment on fake pointers");
  a.config_json = "{\"algorithm\":\"fa2\"}";
  expect(failed_at_device(flashjit_forward(rt, &a)),
         "forward with a snippet and a partial config: the snippet comes from the problem");
  a.config_json = NULL;
  a.mask_mod = "";
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "mask_mod"),
         "forward with an empty mask_mod names mask_mod");
  a.mask_mod = NULL;

  /* An older caller: struct_size ends at sinks; the bytes past it are never read. */
  a.alignment = 9;
  a.mask_mod = "";
  a.struct_size = offsetof(flashjit_attention_args, score_mod);
  expect(failed_at_device(flashjit_forward(rt, &a)), "args without the snippet fields: none");
  {
    const int64_t n = flashjit_select_target(rt, &a, &t, text, sizeof text);
    expect(n > 0 && !contains(text, "score_mod"), "select_target of older args: a kernel without snippets");
  }
  a.struct_size = sizeof a;

  /* select carries the snippet's text into the config; the kernel compiles (NVRTC, no GPU). */
  a = flashjit_attention_args_default();
  a.batch = 1, a.seqlen_q = 1000, a.seqlen_k = 1000, a.heads_q = 8, a.heads_kv = 8, a.head_dim = 64;
  a.mask = FLASHJIT_MASK_CAUSAL;
  a.score_mod = kScore;
  t.arch = "sm_80";
  {
    const int64_t n = flashjit_select_target(rt, &a, &t, text, sizeof text);
    expect(n > 0 && contains(text, "\"score_mod\":\"__device__ float score_mod(") &&
               contains(text, "\"algorithm\":\"fa2\""),
           "select_target: the config carries score_mod's text");
    if (n > 0) {
      char info[4096];
      expect(flashjit_compile(rt, text, info, sizeof info) > 0 && contains(info, "_smod"),
             "compile of the selected score_mod config: the name has _smod<hash>");
    }
  }
  a.score_mod = kBroken;
  {
    const int64_t n = flashjit_select_target(rt, &a, &t, text, sizeof text);
    if (n > 0) {
      char info[4096];
      expect(flashjit_compile(rt, text, info, sizeof info) < 0 && contains(flashjit_last_error(), "score_mod(3)"),
             "a broken score_mod: the error names the snippet's line 3");
    } else {
      expect(0, "select_target with a broken score_mod (selecting does not compile)");
    }
  }
  t = flashjit_target_default();

  /* Decode: the fields are read and reach the split kernel's config. */
  d = flashjit_decode_args_default();
  expect(d.score_mod == NULL && d.mask_mod == NULL && d.aux_scalars[7] == 0.f, "flashjit_decode_args_default: none");
  d.batch = 4, d.q_len = 1, d.heads_q = 32, d.heads_kv = 8, d.head_dim = 128, d.max_seqlen_k = 4096;
  d.mask_mod = "__device__ bool mask_mod(int b, int h, int q, int k, const flashjit::ModContext& ctx) {\n"
               "  return k % 2 == 0;\n}\n";
  expect(flashjit_select_decode(rt, &d, &t, text, sizeof text) > 0 && contains(text, "\"mask_mod\":\"__device__ bool"),
         "select_decode: the split kernel carries mask_mod's text");
  d.struct_size = offsetof(flashjit_decode_args, score_mod);
  expect(flashjit_select_decode(rt, &d, &t, text, sizeof text) > 0 && !contains(text, "mask_mod"),
         "select_decode of older args: no snippet");
  flashjit_runtime_destroy(rt);
}

/* The bias fields appended to flashjit_attention_args and flashjit_decode_args reach the problem (its checks name
 * them), a caller built before them gets no bias whatever the bytes past its struct hold, select names the bias's
 * type and emit shows it in the Variant policy. */
static void test_bias(const char* root) {
  char text[8192];
  flashjit_runtime* rt = runtime_in(root, "create for the bias tests");
  flashjit_attention_args a;
  flashjit_decode_args d;
  flashjit_target t = flashjit_target_default();
  if (rt == NULL) return;
  a = flashjit_attention_args_default();
  d = flashjit_decode_args_default();
  expect(a.bias == NULL && a.bias_type == FLASHJIT_BIAS_NONE && d.bias == NULL && d.bias_type == FLASHJIT_BIAS_NONE,
         "args defaults: no bias");
  a = fake_problem();
  a.bias = (const void*)0x70000;
  a.bias_type = FLASHJIT_BIAS_BF16;
  a.bias_strides.head = 128 * 128, a.bias_strides.q = 128, a.bias_strides.k = 1;
  expect(failed_at_device(flashjit_forward(rt, &a)), "forward with a bf16 bias on fake pointers");
  a.bias = (const void*)0x70001;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "bias (0x70001) must be aligned to its 2-byte entries"),
         "forward with a misaligned bias");
  a.bias = (const void*)0x70000;
  a.bias_type = 9;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "bias_type 9 is not a flashjit_bias_type"),
         "forward with an unknown bias type");
  a.bias_type = FLASHJIT_BIAS_BOOL;
  a.bias_strides.q = -1;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "bias_strides.q must be >= 0"),
         "forward with a negative bias stride");
  a.struct_size = offsetof(flashjit_attention_args, bias);  /* an older caller: the bytes past it are not read */
  expect(failed_at_device(flashjit_forward(rt, &a)), "args without the bias fields: no bias");
  a.struct_size = sizeof a;
  a.bias_strides.q = 128;
  a.batch = 1, a.seqlen_q = 4096, a.seqlen_k = 4096, a.heads_q = 32, a.heads_kv = 8, a.head_dim = 128;
  a.mask = FLASHJIT_MASK_CAUSAL;
  expect(flashjit_select_target(rt, &a, &t, text, sizeof text) > 0 && contains(text, "\"bias\":\"bool\"") &&
             !contains(text, "\"pack_gqa\":true"),
         "select_target: the bias's type in the config");
  expect(flashjit_emit("{\"algorithm\":\"fa3\",\"head_dim\":128,\"bias\":\"fp16\"}", text, sizeof text) > 0 &&
             contains(text, "/*bias=*/flashjit::BiasType::fp16>") && contains(text, "_biasfp16_sm90a"),
         "emit of a bias config");

  d.q = (const void*)0x10000, d.o = (void*)0x20000, d.k_cache = (const void*)0x30000, d.v_cache = (const void*)0x40000;
  d.seqlens_k = (const int32_t*)0x50000;
  d.batch = 2, d.q_len = 1, d.heads_q = 8, d.heads_kv = 2, d.head_dim = 64, d.max_seqlen_k = 256;
  d.bias = (const void*)0x60000;
  d.bias_type = FLASHJIT_BIAS_FP32;
  d.bias_strides.batch = 256, d.bias_strides.k = 1;
  expect(failed_at_device(flashjit_decode(rt, &d)), "decode with an fp32 bias on fake pointers");
  d.bias = NULL;
  expect(flashjit_decode(rt, &d) == FLASHJIT_ERROR_INVALID_ARGUMENT &&
             contains(flashjit_last_error(), "bias_type is fp32 but bias is null"),
         "decode with a bias type but no bias");
  flashjit_runtime_destroy(rt);
}

int main(void) {
  char root[] = "/tmp/flashjit-capi-XXXXXX";
  if (mkdtemp(root) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  test_version_and_status();
  test_create(root);
  test_options(root);
  test_emit();
  test_compile(root);
  test_forward(root);
  test_forward_varlen(root);
  test_forward_paged(root);
  test_decode(root);
  test_merge(root);
  test_select_target(root);
  test_append(root);
  test_variants(root);
  test_snippets(root);
  test_bias(root);
  nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
