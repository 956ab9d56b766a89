/* For t4a's own libraries (target //t4a_mem:mem_internal): keepalive adapters and the pool's
 * teardown after a fault. */
#ifndef T4A_MEM_MEM_INTERNAL_H_
#define T4A_MEM_MEM_INTERNAL_H_

#include "t4a/mem.h"

/* t4a_buffer_release with a void * argument, for keepalive lists. */
void t4a_buffer_release_object_(void *buffer);

/* t4a_pinned_release with a void * argument, for keepalive lists. */
void t4a_pinned_release_object_(void *pinned);

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
