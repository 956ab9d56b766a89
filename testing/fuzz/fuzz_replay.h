/* testing/fuzz — what a fuzz target gives its replay test (fuzz_replay_main.c). Test code only. */
#ifndef T4A_TESTING_FUZZ_REPLAY_H_
#define T4A_TESTING_FUZZ_REPLAY_H_

#include <stddef.h>
#include <stdint.h>

/* The fuzz target (libFuzzer's entry point). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One regression input: a crash the fuzzer found, kept as a test (or a hand-written input). */
typedef struct t4a_fuzz_input {
  const char *name;
  const uint8_t *data;
  size_t size;
} t4a_fuzz_input;

/* Defined by each fuzz target: its regression inputs. */
const t4a_fuzz_input *t4a_fuzz_regressions(size_t *out_count);

#endif /* T4A_TESTING_FUZZ_REPLAY_H_ */
