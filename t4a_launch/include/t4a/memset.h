/** @file
 * t4a/memset.h — stream-ordered fills of a buffer range with an 8-, 16- or 32-bit pattern.
 *
 * Layer: t4a_launch (on t4a_mem and t4a_retire). The stream is a t4a_retire (its lane's).
 *
 * t4a_memset fills `count` elements of `elem_bytes` (1, 2 or 4) starting `offset` bytes into the
 * buffer with `value` (cuMemsetD8/D16/D32Async), in stream order, as an admission that keeps the
 * buffer alive until the fill ran. Bounds and alignment are checked before anything is enqueued.
 * During a graph capture or chain recording the fill is captured (a memset node). In a chain,
 * t4a_chain_memset records a fill whose value t4a_chain_set_memset changes between replays: the
 * next replay updates the node in place (cuGraphExecMemsetNodeSetParams), never re-instantiates.
 *
 * Thread-safety: any thread. */
#ifndef T4A_MEMSET_H_
#define T4A_MEMSET_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/chain.h"
#include "t4a/launch.h"
#include "t4a/mem.h"
#include "t4a/retire.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Fills [offset, offset + count * elem_bytes) of `buffer` with `value` on `retire`'s stream.
 * Statuses: INVALID_ARGUMENT (NULL; elem_bytes not 1, 2 or 4; a value wider than the element;
 * count 0; offset not a multiple of elem_bytes: misaligned; the range past the buffer's end),
 * FOREIGN_HANDLE (a buffer of another allocation domain), REENTRY, LANE_BROKEN, driver
 * failures. Nothing is enqueued on a refusal. Counted in memsets. */
T4A_MUST_USE t4a_status t4a_memset(t4a_retire *retire, t4a_buffer *buffer, size_t offset,
                                   size_t count, unsigned elem_bytes, uint32_t value);

/** During a chain recording of `table` (t4a_chain_begin): a t4a_memset on the table's retire
 * whose node the chain remembers; *out_id (may be NULL) numbers it among the recording's
 * memsets, 0 first. Statuses: as t4a_memset; INVALID_ARGUMENT also when no chain is being
 * recorded on the table (the recording then fails at t4a_chain_end if the node cannot be
 * learnt, as for fires). */
T4A_MUST_USE t4a_status t4a_chain_memset(t4a_launch_table *table, t4a_buffer *buffer,
                                         size_t offset, size_t count, unsigned elem_bytes,
                                         uint32_t value, uint32_t *out_id);

/** Sets the value memset `id` of the chain fills from the next replay on (that replay updates
 * the node in place when the value differs from the node's: counted in chain_memset_updates).
 * Statuses: INVALID_ARGUMENT (NULL, an id the chain does not have, a value wider than the
 * memset's element), REENTRY (inside an admission of the table's runtime). */
T4A_MUST_USE t4a_status t4a_chain_set_memset(t4a_chain *chain, uint32_t id, uint32_t value);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_MEMSET_H_ */
