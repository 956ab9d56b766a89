/* nvrtc_bench's link rows (bench/link_rows.c): nvJitLink link time and link-cache hits. */
#ifndef T4A_BENCH_LINK_ROWS_H_
#define T4A_BENCH_LINK_ROWS_H_

#include "t4a/nvrtc.h"

/* Prints the link table: a device library and a kernel that calls it, both LTO-IR from `nvrtc`,
 * linked into an sm_90 CUBIN. Returns 0, or 1 when nvJitLink cannot be opened (a line says so). */
int t4a_bench_link_rows(t4a_nvrtc_lib *nvrtc, int repeats, int batch);

#endif /* T4A_BENCH_LINK_ROWS_H_ */
