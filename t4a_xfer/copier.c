/* Host copy threads for the staging ring: a chunk-sized memcpy split across a small pool of
 * threads (the calling thread takes slices too). See xfer_internal.h.
 *
 * Why: for pageable data the host's copy into (and out of) pinned chunks is the limit, not PCIe
 * (docs/performance.md, "The driver alone on one H200").
 *
 * One job at a time: a caller that finds the pool busy (another thread's upload or delivery)
 * copies alone instead of queueing, so no caller ever waits for another caller's copy. A job lives
 * on its caller's stack; the caller returns only when every slice is done and no worker is still
 * inside the job (active == 0), so nothing touches the job after it is gone. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#define T4A_COPIER_STREAM 1
#else
#define T4A_COPIER_STREAM 0
#endif

#include "t4a/fault.h"
#include "t4a_ctx/status_internal.h"
#include "t4a_xfer/xfer_internal.h"

typedef struct job {
  unsigned char *dst;
  const unsigned char *src;
  size_t n, slice;
  uint32_t slices;
  int stream; /* non-temporal stores (T4A_XFER_COPY_STREAM) */
  atomic_uint next;     /* the next slice to take */
  atomic_uint finished; /* slices copied */
  uint32_t active;      /* workers inside the job (under the pool's lock) */
} job;

struct t4a_xfer_copier {
  pthread_mutex_t busy; /* held by the caller running a job (trylock: never waited for) */
  pthread_mutex_t lock; /* the fields below */
  pthread_cond_t start; /* a new job, or stop */
  pthread_cond_t done;  /* a worker left a job */
  job *current;
  uint64_t generation;
  int stop;
  uint32_t num_threads; /* workers (the caller is one more) */
  size_t split_min;     /* the smallest copy split across the threads */
  pthread_t *threads;
  atomic_ullong parallel_copies, parallel_bytes;
};

/* memcpy with non-temporal stores where the target has them (x86-64: SSE2 streaming stores,
 * 64 bytes a step, from the first 16-byte-aligned byte of dst; the ends by memcpy), then a store
 * fence, so the bytes are in memory, not in this core's write buffers, before the caller goes on
 * (a DMA reads them next). Elsewhere, memcpy. */
static void copy_stream(unsigned char *dst, const unsigned char *src, size_t n) {
#if T4A_COPIER_STREAM
  size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
  if (head > n) head = n;
  memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  size_t steps = n / 64;
  for (size_t i = 0; i < steps; i++, src += 64, dst += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)src);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + 32));
    __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + 48));
    _mm_stream_si128((__m128i *)(void *)dst, a);
    _mm_stream_si128((__m128i *)(void *)(dst + 16), b);
    _mm_stream_si128((__m128i *)(void *)(dst + 32), c);
    _mm_stream_si128((__m128i *)(void *)(dst + 48), d);
  }
  memcpy(dst, src, n - steps * 64);
  _mm_sfence();
#else
  memcpy(dst, src, n);
#endif
}

/* Copies slices until none is left. Returns after the last slice this thread took. */
static void run_slices(job *j) {
  for (;;) {
    uint32_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    if (i >= j->slices) return;
    size_t off = (size_t)i * j->slice;
    size_t len = j->n - off < j->slice ? j->n - off : j->slice;
    if (j->stream) {
      copy_stream(j->dst + off, j->src + off, len);
    } else {
      memcpy(j->dst + off, j->src + off, len);
    }
    atomic_fetch_add_explicit(&j->finished, 1, memory_order_release);
  }
}

static void *worker(void *arg) {
  t4a_xfer_copier *c = arg;
  pthread_mutex_lock(&c->lock);
  uint64_t seen = c->generation;
  for (;;) {
    while (!c->stop && (c->generation == seen || c->current == NULL)) {
      pthread_cond_wait(&c->start, &c->lock);
    }
    if (c->stop) break;
    seen = c->generation;
    job *j = c->current;
    j->active++;
    pthread_mutex_unlock(&c->lock);
    run_slices(j);
    pthread_mutex_lock(&c->lock);
    j->active--;
    pthread_cond_broadcast(&c->done);
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

static void stop_and_join(t4a_xfer_copier *c, uint32_t started) {
  pthread_mutex_lock(&c->lock);
  c->stop = 1;
  pthread_cond_broadcast(&c->start);
  pthread_mutex_unlock(&c->lock);
  for (uint32_t i = 0; i < started; i++) pthread_join(c->threads[i], NULL);
}

static void copier_free(t4a_xfer_copier *c) {
  pthread_cond_destroy(&c->done);
  pthread_cond_destroy(&c->start);
  pthread_mutex_destroy(&c->lock);
  pthread_mutex_destroy(&c->busy);
  free(c->threads);
  free(c);
}

t4a_status t4a_xfer_copier_create_(uint32_t threads, size_t split_min, t4a_xfer_copier **out) {
  *out = NULL;
  if (threads <= 1) return T4A_OK; /* the caller alone: no pool */
  t4a_xfer_copier *c = t4a_host_calloc(1, sizeof *c);
  if (c == NULL) return T4A_HOST_OUT_OF_MEMORY;
  c->threads = t4a_host_calloc(threads - 1, sizeof *c->threads);
  if (c->threads == NULL) {
    free(c);
    return T4A_HOST_OUT_OF_MEMORY;
  }
  if (t4a_fault_sim(T4A_FAULT_MUTEX_INIT) || pthread_mutex_init(&c->busy, NULL) != 0) {
    free(c->threads);
    free(c);
    return t4a_error_set_(T4A_INTERNAL, "pthread_mutex_init", 0, NULL, 0,
                          "cannot initialise the copy threads' lock");
  }
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->start, NULL);
  pthread_cond_init(&c->done, NULL);
  c->split_min = split_min;
  atomic_init(&c->parallel_copies, 0);
  atomic_init(&c->parallel_bytes, 0);
  for (uint32_t i = 0; i < threads - 1; i++) {
    if (t4a_fault_sim(T4A_FAULT_THREAD_CREATE) ||
        pthread_create(&c->threads[i], NULL, worker, c) != 0) {
      stop_and_join(c, i);
      copier_free(c);
      return t4a_error_set_(T4A_INTERNAL, "pthread_create", 0, NULL, 0,
                            "cannot start copy thread %u of %u", i + 1, threads - 1);
    }
    c->num_threads++;
  }
  *out = c;
  return T4A_OK;
}

void t4a_xfer_copier_destroy_(t4a_xfer_copier *c) {
  if (c == NULL) return;
  stop_and_join(c, c->num_threads);
  copier_free(c);
}

int t4a_xfer_copier_memcpy_(t4a_xfer_copier *c, void *dst, const void *src, size_t n,
                            unsigned flags) {
  if (c == NULL || n < c->split_min || pthread_mutex_trylock(&c->busy) != 0) {
    if (flags & T4A_XFER_COPY_STREAM) {
      copy_stream(dst, src, n);
    } else {
      memcpy(dst, src, n);
    }
    return 0;
  }
  /* Four slices per thread, at least 16 KiB, whole pages (no two threads share a page of a
   * page-aligned destination, as chunks are): the threads that wake first (the caller first of
   * all) take the slices of those that wake late, so the copy does not wait for the slowest
   * wake-up. */
  uint32_t ways = c->num_threads + 1;
  size_t slice = n / ((size_t)ways * 4);
  if (slice < ((size_t)16 << 10)) slice = (size_t)16 << 10;
  slice = (slice + 4095) & ~(size_t)4095;
  job j = {.dst = dst, .src = src, .n = n, .slice = slice,
           .slices = (uint32_t)((n + slice - 1) / slice),
           .stream = (flags & T4A_XFER_COPY_STREAM) != 0};
  atomic_init(&j.next, 0);
  atomic_init(&j.finished, 0);
  pthread_mutex_lock(&c->lock);
  c->current = &j;
  c->generation++;
  pthread_cond_broadcast(&c->start);
  pthread_mutex_unlock(&c->lock);
  run_slices(&j);
  pthread_mutex_lock(&c->lock);
  /* Every slice copied, and no worker still inside this job (it is on this stack). */
  while (atomic_load_explicit(&j.finished, memory_order_acquire) < j.slices || j.active > 0) {
    pthread_cond_wait(&c->done, &c->lock);
  }
  c->current = NULL;
  pthread_mutex_unlock(&c->lock);
  pthread_mutex_unlock(&c->busy);
  atomic_fetch_add_explicit(&c->parallel_copies, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&c->parallel_bytes, n, memory_order_relaxed);
  return 1;
}

void t4a_xfer_copy_stream_(void *dst, const void *src, size_t n) { copy_stream(dst, src, n); }

uint32_t t4a_xfer_copier_threads_(const t4a_xfer_copier *c) {
  return c != NULL ? c->num_threads + 1 : 1;
}

uint64_t t4a_xfer_copier_parallel_copies_(t4a_xfer_copier *c) {
  return c != NULL ? atomic_load_explicit(&c->parallel_copies, memory_order_relaxed) : 0;
}
