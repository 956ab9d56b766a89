/* The runtime's layout, shared by the facade's own files (t4a.c, stats_json.c). Private to
 * //t4a: not installed. */
#ifndef T4A_T4A_RUNTIME_INTERNAL_H_
#define T4A_T4A_RUNTIME_INTERNAL_H_

#include <pthread.h>

#include "t4a/t4a.h"

struct t4a_runtime {
  t4a_driver *driver; /* a reference */
  int ordinal;
  t4a_lane *lane;
  t4a_mem_pool *pool;
  t4a_retire *retire;
  t4a_xfer *xfer;
  t4a_module_cache *modules;
  t4a_launch_table *table;
  int calibrated; /* 1: `calibration` holds what the table was created with */
  t4a_status calibration_failed; /* why calibrate_launches gave no figures (T4A_OK: it did) */
  t4a_launch_calibration calibration;
  char target[32];
  int compile_ptx;
  /* Compilation, opened at the first compile. `lock` guards `artifacts` (and its creation). */
  pthread_mutex_t lock;
  int lock_ready;
  t4a_nvrtc_cache *artifacts; /* the caller's (borrowed) or the runtime's own */
  int own_artifacts;          /* 1: created here, destroyed at close */
  char *nvrtc_path;           /* copies of the string options (NULL when not given) */
  char *disk_dir;
  t4a_nvrtc_cache_options artifact_options; /* disk_dir pointing at the copy above */
  /* Default include roots (under `lock`, looked for at the first compile). */
  int no_toolkit_roots;
  int toolkit_tried;
  t4a_status toolkit_status; /* T4A_OK: toolkit holds the roots */
  t4a_nvrtc_toolkit *toolkit;
};

#endif /* T4A_T4A_RUNTIME_INTERNAL_H_ */
