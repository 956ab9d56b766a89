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
  t4a_jitlink_cache *links; /* the caller's (borrowed) or the runtime's own (under `lock`) */
  int own_links;            /* 1: created at the first link, destroyed at close */
  /* Further streams (stream.c): a list under `lock`; close destroys those left. */
  t4a_xfer_options xfer_options; /* what each stream's own staging ring is made with */
  struct t4a_stream *streams;
  /* Default include roots (under `lock`, looked for at the first compile). */
  int no_toolkit_roots;
  int toolkit_tried;
  t4a_status toolkit_status; /* T4A_OK: toolkit holds the roots */
  t4a_nvrtc_toolkit *toolkit;
};

/* A further stream of a runtime (t4a_stream_create): a sibling lane of the runtime's (same
 * context, pool domain, module cache and descriptor table) with its own retire, and a staging
 * ring made at its first staged transfer. */
struct t4a_stream {
  t4a_runtime *rt;  /* borrowed: the runtime destroys its streams at close */
  t4a_lane *lane;   /* a reference */
  t4a_retire *retire;
  t4a_xfer *xfer;   /* NULL until the first transfer on it (under rt->lock) */
  struct t4a_stream *prev, *next;
};

/* Resolves a stream argument of a facade call: NULL is the runtime's own stream. Statuses:
 * INVALID_ARGUMENT (NULL rt), FOREIGN_HANDLE (a stream of another runtime: nothing enqueued). */
t4a_status t4a_runtime_stream_resolve_(t4a_runtime *rt, t4a_stream *stream, t4a_lane **lane,
                                       t4a_retire **retire);
/* Whether this thread is inside an admission of one of the runtime's streams (a raw scope on it):
 * then close refuses (REENTRY). */
int t4a_runtime_streams_held_(t4a_runtime *rt);
/* Destroys every stream left (t4a_runtime_close, before the runtime's own pieces); returns the
 * first failure. */
t4a_status t4a_runtime_streams_close_(t4a_runtime *rt);

#endif /* T4A_T4A_RUNTIME_INTERNAL_H_ */
