/* The C ABI tests' checks: count passes and failures, print each failure with the library's last error. */
#ifndef FLASHJIT_TESTS_CAPI_CHECK_H
#define FLASHJIT_TESTS_CAPI_CHECK_H

#include <stdio.h>
#include <string.h>

#include "flashjit/flashjit.h"

static int passed = 0, failed = 0;

static void expect(int ok, const char* what) {
  if (ok) {
    ++passed;
  } else {
    ++failed;
    printf("FAIL: %s\n  last error: %s\n", what, flashjit_last_error());
  }
}

static int contains(const char* text, const char* part) { return text != NULL && strstr(text, part) != NULL; }

#endif
