/* For t4a's own libraries (target //t4a_mem:mem_internal): keepalive adapters and the pool's
 * teardown after a fault. */
#ifndef T4A_MEM_MEM_INTERNAL_H_
#define T4A_MEM_MEM_INTERNAL_H_

#include "t4a/mem.h"
#include "t4a_ctx/ctx_internal.h"

/* t4a_buffer_release with a void * argument, for keepalive lists. */
void t4a_buffer_release_object_(void *buffer);

/* t4a_pinned_release with a void * argument, for keepalive lists. */
void t4a_pinned_release_object_(void *pinned);

/* Cross-stream use of a buffer on another stream of its pool's domain (a lane made by
 * t4a_lane_create_sibling; design §6). Inside an admission on `lane` (its context current):
 * before enqueueing work that uses b, t4a_buffer_use_on_ orders the lane after b's allocation on
 * the pool's stream (at most one marker record and one wait, amortised over every buffer
 * allocated before; nothing for the pool's own lane). Statuses: UNSUPPORTED (the lane or the
 * pool's lane is capturing and an order would be needed: nothing enqueued), driver failures. */
t4a_status t4a_buffer_use_on_(t4a_buffer *b, t4a_lane *lane);
/* After enqueueing: remembers the use (a mark on `lane`), so the block's next reuse or free on the
 * pool's stream waits for it. Returns whether the admission must still keep b in its epoch: 1 on
 * the pool's own lane and in a capture; 0 otherwise (the marks order its memory; the caller's
 * release may be the last). */
int t4a_buffer_used_on_(t4a_buffer *b, t4a_lane *lane);

/* What a launch's argument check reads of a buffer, in one call: its domain, size and device
 * address (t4a_buffer_domain, t4a_buffer_size, t4a_buffer_devptr). b is not NULL. */
typedef struct t4a_buffer_facts_ {
  uint64_t domain;
  size_t bytes;
  t4a_devptr ptr;
} t4a_buffer_facts_;
void t4a_buffer_facts_get_(const t4a_buffer *b, t4a_buffer_facts_ *out);

/* Whether every non-NULL buffer of `buffers` (n of them) is local to `lane`: of the pool of that
 * lane, or a view. For those t4a_buffer_use_on_ orders nothing and t4a_buffer_used_on_ marks
 * nothing and answers 1 (the epoch keeps them), so a launch may skip both calls. */
int t4a_buffers_local_(t4a_buffer *const *buffers, uint32_t n, const t4a_lane *lane);

/* Marks the pool as not provably drained (teardown after a fault): its cached blocks are leaked
 * and counted (buffers_leaked) at once, so are blocks of buffers released after it, and its final
 * release leaks the pool instead of calling the driver. */
void t4a_mem_pool_abandon_(t4a_mem_pool *pool);

/* Marks the pool as closed by its owner (t4a_runtime_close): from now on it caches nothing. A
 * buffer released after it frees its block at once and waits for the lane's stream (a counted
 * host wait: no owner will drain the lane later), so the block is freed after a proved drain; when
 * that fails the block is leaked and counted (buffers_leaked) and the pool abandoned. Blocks
 * cached before are the caller's to return (t4a_mem_pool_trim) or abandon. */
void t4a_mem_pool_close_(t4a_mem_pool *pool);

/* A view: a t4a_buffer over `bytes` of device memory at `ptr` that t4a_mem did not allocate (a
 * module global, t4a_launch), in `lane`'s allocation domain, so that uploads, downloads, copies,
 * launches and raw scopes take it as they take a buffer and keep it alive the same way. The view
 * holds `owner` (the caller hands one reference over on success; on failure it keeps it), which
 * must keep the memory, `name` and the lane alive; the view's last release calls
 * owner_release(owner) with the caller's error detail kept, or, if the view was quarantined,
 * keeps the owner for good and counts it in the lane's `leaked`. t4a_buffer_pool of a view is
 * NULL. Statuses: INVALID_ARGUMENT (NULL, 0 bytes, no owner), HOST_OUT_OF_MEMORY. */
t4a_status t4a_buffer_view_create_(t4a_lane *lane, t4a_devptr ptr, size_t bytes, const char *name,
                                   void *owner, void (*owner_release)(void *owner),
                                   t4a_buffer **out);

/* The name a view was created with (NULL for a buffer of a pool, or a view without one). */
const char *t4a_buffer_view_name_(const t4a_buffer *buffer);

#endif /* T4A_MEM_MEM_INTERNAL_H_ */
