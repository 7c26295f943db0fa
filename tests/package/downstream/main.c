/* Emits a kernel's source through the installed C ABI (no GPU needed). */
#include <flashjit/flashjit.h>

#include <stdio.h>
#include <stdlib.h>

int main(void) {
  const char* config = "{\"algorithm\": \"fa2\", \"head_dim\": 64}";
  int64_t n = flashjit_emit(config, NULL, 0);
  if (n < 0) {
    fprintf(stderr, "flashjit_emit: %s\n", flashjit_last_error());
    return 1;
  }
  char* text = malloc((size_t)n + 1);
  if (!text || flashjit_emit(config, text, (size_t)n + 1) != n) return 1;
  free(text);
  if (flashjit_abi_version() != FLASHJIT_ABI_VERSION) {
    fprintf(stderr, "ABI %d, header %d\n", flashjit_abi_version(), FLASHJIT_ABI_VERSION);
    return 1;
  }
  printf("flashjit %s (C, ABI %d): emitted %lld bytes\n", flashjit_version(), flashjit_abi_version(), (long long)n);
  return 0;
}
