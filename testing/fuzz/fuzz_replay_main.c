/* The replay test of a fuzz target, for builds without libFuzzer (gcc, valgrind, TSan):
 *   no arguments: the target's regression inputs (t4a_fuzz_regressions), then
 *                 T4A_FUZZ_REPLAY_COUNT (default 400) inputs made by a fixed generator;
 *   arguments:    each file, or each file of each directory, as one input (a corpus).
 * A violated invariant aborts inside the target; the test passes when every input returns. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testing/fuzz/fuzz_replay.h"

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return 1;
  }
  static uint8_t buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  (void)LLVMFuzzerTestOneInput(buf, n);
  return 0;
}

static int run_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    perror(path);
    return 1;
  }
  if (!S_ISDIR(st.st_mode)) return run_file(path);
  DIR *d = opendir(path);
  if (d == NULL) {
    perror(path);
    return 1;
  }
  int bad = 0, count = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    bad |= run_file(p);
    count++;
  }
  closedir(d);
  printf("replayed %d inputs from %s\n", count, path);
  return bad;
}

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

int main(int argc, char **argv) {
  if (argc > 1) {
    int bad = 0;
    for (int i = 1; i < argc; i++) bad |= run_path(argv[i]);
    return bad;
  }
  size_t n = 0;
  const t4a_fuzz_input *in = t4a_fuzz_regressions(&n);
  for (size_t i = 0; i < n; i++) (void)LLVMFuzzerTestOneInput(in[i].data, in[i].size);
  printf("replayed %zu regression inputs\n", n);
  const char *env = getenv("T4A_FUZZ_REPLAY_COUNT");
  long count = env != NULL ? atol(env) : 400;
  static uint8_t buf[1024];
  for (long k = 0; k < count; k++) {
    uint64_t s = 0x243f6a8885a308d3ull + (uint64_t)k * 0x9e3779b97f4a7c15ull;
    size_t len = 1 + next(&s) % sizeof buf;
    for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)(next(&s) >> 24);
    if (getenv("T4A_FUZZ_TRACE") != NULL) fprintf(stderr, "generated input %ld\n", k);
    const char *save = getenv("T4A_FUZZ_SAVE"); /* a path: each input is written there first */
    if (save != NULL) {
      FILE *f = fopen(save, "wb");
      if (f != NULL) {
        fwrite(buf, 1, len, f);
        fclose(f);
      }
    }
    (void)LLVMFuzzerTestOneInput(buf, len);
  }
  printf("replayed %ld generated inputs\n", count);
  return 0;
}
