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

#endif /* T4A_MEM_MEM_INTERNAL_H_ */
