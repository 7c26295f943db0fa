/* The C ABI under abuse (issue 29): what a careless or hostile caller can pass must give an error status, never
 * a crash. Versioned structs at the very end of a readable page with a struct_size past it (the library must not
 * read beyond readable memory), garbage struct sizes, NULL and dangling-looking pointers where they are allowed,
 * deeply nested JSON, bad enums and sizes. Needs no GPU; run under the sanitizer build too. */
#define _GNU_SOURCE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "flashjit/flashjit.h"
#include "check.h"


/* Two pages, the second inaccessible: a struct of `size` bytes placed to end exactly at the boundary. */
static unsigned char* g_pages = NULL;
static size_t g_page = 0;

static void* at_page_end(size_t size) {
  if (g_pages == NULL) {
    g_page = (size_t)sysconf(_SC_PAGESIZE);
    g_pages = mmap(NULL, 2 * g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g_pages == MAP_FAILED) {
      printf("mmap failed\n");
      exit(1);
    }
    if (mprotect(g_pages + g_page, g_page, PROT_NONE) != 0) {
      printf("mprotect failed\n");
      exit(1);
    }
  }
  memset(g_pages, 0, g_page);
  return g_pages + g_page - size;
}

static void test_struct_size_past_readable_memory(flashjit_runtime* rt) {
  const size_t extra[] = {1, 8, 64, 4000};
  size_t i;
  for (i = 0; i < sizeof extra / sizeof extra[0]; ++i) {
    flashjit_runtime* out = NULL;
    flashjit_runtime_options* o = at_page_end(sizeof *o);
    o->struct_size = sizeof *o + extra[i];
    expect(flashjit_runtime_create(o, &out) == FLASHJIT_ERROR_INVALID_ARGUMENT && out == NULL,
           "runtime options ending at an unreadable page, struct_size past it: refused");
    expect(contains(flashjit_last_error(), "not readable"), "runtime options past readable memory: message says so");
  }
  {
    flashjit_attention_args* a = at_page_end(sizeof *a);
    *a = flashjit_attention_args_default();
    a->struct_size = sizeof *a + 16;
    expect(flashjit_forward(rt, a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "attention args past readable memory: refused");
    expect(flashjit_select(rt, a, NULL, 0) == -FLASHJIT_ERROR_INVALID_ARGUMENT, "select args past readable memory");
  }
  {
    flashjit_decode_args* a = at_page_end(sizeof *a);
    *a = flashjit_decode_args_default();
    a->struct_size = sizeof *a + 16;
    expect(flashjit_decode(rt, a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "decode args past readable memory: refused");
    expect(flashjit_decode_workspace_bytes(rt, a) == -FLASHJIT_ERROR_INVALID_ARGUMENT,
           "decode workspace args past readable memory: refused");
  }
  {
    flashjit_merge_args* a = at_page_end(sizeof *a);
    *a = flashjit_merge_args_default();
    a->struct_size = sizeof *a + 16;
    expect(flashjit_merge(rt, a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "merge args past readable memory: refused");
  }
  {
    flashjit_attention_args args = flashjit_attention_args_default();
    flashjit_target* t = at_page_end(sizeof *t);
    args.batch = 1, args.seqlen_q = args.seqlen_k = 128, args.heads_q = 8, args.heads_kv = 2, args.head_dim = 64;
    *t = flashjit_target_default();
    t->arch = "sm_90a";
    t->struct_size = sizeof *t + 16;
    expect(flashjit_select_target(rt, &args, t, NULL, 0) == -FLASHJIT_ERROR_INVALID_ARGUMENT,
           "target past readable memory: refused");
    expect(contains(flashjit_last_error(), "not readable"), "target past readable memory: message says so");
  }
  /* Attention args of the header before the paged fields, ending at the page end: page_table and what follows it
   * lie in the unreadable page, and are not read. */
  {
    const size_t n = offsetof(flashjit_attention_args, page_table);
    flashjit_attention_args full = flashjit_attention_args_default();
    flashjit_attention_args* a = at_page_end(n);
    full.struct_size = n;
    full.q = (const void*)0x10000, full.k = (const void*)0x20000, full.v = (const void*)0x30000;
    full.o = (void*)0x40000;
    full.batch = 1, full.seqlen_q = full.seqlen_k = 128, full.heads_q = full.heads_kv = 1, full.head_dim = 64;
    memcpy(a, &full, n);
    {
      const int st = flashjit_forward(rt, a);
      expect(st == FLASHJIT_ERROR_NO_DEVICE || (st == FLASHJIT_ERROR_INVALID_ARGUMENT &&
                                                contains(flashjit_last_error(), "not a CUDA device pointer")),
             "attention args ending before page_table at the page end: read up to struct_size only");
    }
  }
  /* A struct exactly at the page end with its own size, and an older (shorter) one: fine, nothing past it read. */
  {
    flashjit_runtime* out = NULL;
    flashjit_runtime_options* o = at_page_end(sizeof *o);
    o->struct_size = sizeof *o;
    expect(flashjit_runtime_create(o, &out) == FLASHJIT_OK, "runtime options ending at the page end");
    flashjit_runtime_destroy(out);
    o = at_page_end(FLASHJIT_RUNTIME_OPTIONS_MIN_SIZE);
    o->struct_size = FLASHJIT_RUNTIME_OPTIONS_MIN_SIZE;
    expect(flashjit_runtime_create(o, &out) == FLASHJIT_OK, "the smallest options struct at the page end");
    flashjit_runtime_destroy(out);
  }
}

static void test_garbage_sizes_and_values(flashjit_runtime* rt) {
  flashjit_attention_args a = flashjit_attention_args_default();
  flashjit_runtime_options o;
  flashjit_runtime* out = NULL;
  char buf[64];
  a.struct_size = (size_t)-1;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "struct_size SIZE_MAX: refused");
  a.struct_size = 0;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "struct_size 0: refused");
  a = flashjit_attention_args_default();
  a.dtype = 77;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "unknown dtype: refused");
  a.dtype = FLASHJIT_DTYPE_BF16;
  a.mask = -5;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "unknown mask: refused");
  a = flashjit_attention_args_default();
  a.q = (const void*)0x10000, a.k = (const void*)0x20000, a.v = (const void*)0x30000, a.o = (void*)0x40000;
  a.batch = 1, a.seqlen_q = a.seqlen_k = 128, a.heads_q = a.heads_kv = 1, a.head_dim = 64;
  a.batch = 2;
  a.k_strides.batch = INT64_MAX - 7;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "a stride past the address space: refused");
  expect(contains(flashjit_last_error(), "2^48"), "huge stride: message says why");
  a.k_strides.batch = 0;
  a.batch = -1, a.heads_q = 0, a.head_dim = 1 << 30;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "negative and huge dimensions: refused");

  /* Paged fields at their extremes: errors, never an overflow (batch * max_pages_per_seq past int32, a page
   * stride past the address space, page_size INT_MAX, negative page counts). */
  a = flashjit_attention_args_default();
  a.q = (const void*)0x10000, a.k = (const void*)0x20000, a.v = (const void*)0x30000, a.o = (void*)0x40000;
  a.batch = 65535, a.seqlen_q = a.seqlen_k = 128, a.heads_q = a.heads_kv = 1, a.head_dim = 64;
  a.page_table = (const int*)0x50000, a.seqused_k = (const int*)0x60000;
  a.page_size = 16, a.num_pages = 1, a.max_pages_per_seq = 0x7fffffff;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "int32"),
         "batch * max_pages_per_seq past int32: refused");
  a.batch = 1, a.max_pages_per_seq = 8;
  a.num_pages = 0x7fffffff, a.k_strides.batch = INT64_MAX - 7;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "2^48"),
         "a page stride past the address space: refused");
  a.k_strides.batch = 0;
  a.page_size = 0x7fffffff, a.num_pages = -5, a.max_pages_per_seq = -5;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "page_size"),
         "page_size INT_MAX and negative page counts: refused");
  a.page_size = 16, a.num_pages = 1, a.max_pages_per_seq = 8, a.seqused_k = (const int*)0x1;
  expect(flashjit_forward(rt, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT && contains(flashjit_last_error(), "seqused_k"),
         "a seqused_k of odd address: refused");

  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.cache_dir = "/tmp";
  o.cache_max_mb = UINT64_MAX;
  o.compile_timeout_s = -1;
  expect(flashjit_runtime_create(&o, &out) == FLASHJIT_ERROR_INVALID_ARGUMENT && out == NULL,
         "a negative compile timeout: refused");
  o.compile_timeout_s = 0;
  o.check_seqlens = 7;
  expect(flashjit_runtime_create(&o, &out) == FLASHJIT_ERROR_INVALID_ARGUMENT, "check_seqlens 7: refused");

  expect(flashjit_cache_info(rt, NULL, 10) == -FLASHJIT_ERROR_INVALID_ARGUMENT, "cache_info with NULL out and cap 10");
  expect(flashjit_cache_info(NULL, buf, sizeof buf) == -FLASHJIT_ERROR_INVALID_ARGUMENT, "cache_info on NULL runtime");
  expect(flashjit_forward(NULL, &a) == FLASHJIT_ERROR_INVALID_ARGUMENT, "forward on a NULL runtime");
  expect(flashjit_forward(rt, NULL) == FLASHJIT_ERROR_INVALID_ARGUMENT, "forward with NULL args");
  expect(flashjit_decode(rt, NULL) == FLASHJIT_ERROR_INVALID_ARGUMENT, "decode with NULL args");
  expect(flashjit_merge(rt, NULL) == FLASHJIT_ERROR_INVALID_ARGUMENT, "merge with NULL args");
  expect(flashjit_compile(rt, NULL, NULL, 0) < 0, "compile of NULL JSON");
  expect(flashjit_emit(NULL, NULL, 0) < 0, "emit of NULL JSON");
  expect(strcmp(flashjit_status_string(-12345), "unknown status") == 0, "status string of a negative code");
}

/* 100000 levels of [ ... ]: parsing is iterative, and nothing may print such a value recursively. */
static void test_deep_json(flashjit_runtime* rt) {
  const size_t depth = 100000;
  const char* head = "{\"algorithm\":\"fa2\",\"arch\":\"sm_80\",\"head_dim\":";
  size_t n = strlen(head), i;
  char* text = malloc(n + 2 * depth + 2);
  char out[256];
  flashjit_attention_args a = flashjit_attention_args_default();
  memcpy(text, head, n);
  for (i = 0; i < depth; ++i) text[n + i] = '[';
  for (i = 0; i < depth; ++i) text[n + depth + i] = ']';
  text[n + 2 * depth] = '}';
  text[n + 2 * depth + 1] = '\0';
  expect(flashjit_emit(text, out, sizeof out) == -FLASHJIT_ERROR_INVALID_CONFIG, "emit of deeply nested JSON: refused");
  expect(contains(flashjit_last_error(), "'head_dim'") && strlen(flashjit_last_error()) < 400,
         "deep JSON: the message names the field and does not print the value");
  expect(flashjit_compile(rt, text, out, sizeof out) == -FLASHJIT_ERROR_INVALID_CONFIG,
         "compile of deeply nested JSON: refused");
  a.q = (const void*)0x10000, a.k = (const void*)0x20000, a.v = (const void*)0x30000, a.o = (void*)0x40000;
  a.batch = 1, a.seqlen_q = a.seqlen_k = 128, a.heads_q = a.heads_kv = 1, a.head_dim = 64;
  a.config_json = text;
  {
    const int st = flashjit_forward(rt, &a);
    expect(st != FLASHJIT_OK, "forward with a deeply nested config_json: an error, not a crash");
  }
  /* As deep, unbalanced: only opening brackets. */
  text[n + depth] = '\0';
  expect(flashjit_emit(text, out, sizeof out) < 0, "emit of unterminated deep JSON: refused");
  free(text);
  expect(flashjit_emit("{\"algorithm\":\"fa2\",\"arch\":\"sm_80\",\"head_dim\":18446744073709551615}", out, sizeof out) ==
             -FLASHJIT_ERROR_INVALID_CONFIG,
         "head_dim 2^64 - 1: refused");
  expect(contains(flashjit_last_error(), "18446744073709551615"), "head_dim 2^64 - 1: reported as written, not as -1");
  /* A number too large for a double: nlohmann throws out_of_range, not parse_error (found by the fuzz run). */
  expect(flashjit_emit("{\"algorithm\":\"fa2\",\"head_dim\":1e9999}", out, sizeof out) == -FLASHJIT_ERROR_INVALID_CONFIG,
         "head_dim 1e9999: refused");
}

int main(void) {
  char root[] = "/tmp/flashjit-capi-abuse-XXXXXX";
  flashjit_runtime_options o;
  flashjit_runtime* rt = NULL;
  if (mkdtemp(root) == NULL) return 1;
  setenv("FLASHJIT_CACHE_DIR", root, 1); /* the runtimes made from structs without cache_dir */
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.cache_dir = root;
  o.log_level = FLASHJIT_LOG_ERROR;
  if (flashjit_runtime_create(&o, &rt) != FLASHJIT_OK) {
    printf("cannot create a runtime: %s\n", flashjit_last_error());
    return 1;
  }
  test_struct_size_past_readable_memory(rt);
  test_garbage_sizes_and_values(rt);
  test_deep_json(rt);
  flashjit_runtime_destroy(rt);
  {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0) printf("could not remove %s\n", root);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
