/** @file
 * t4a/event.h — user events and host functions on a lane's stream.
 *
 * Layer: t4a_retire, on t4a_ctx. A stream here is a t4a_retire (its lane's stream).
 *
 * Events. A t4a_event is one CUevent of a lane's context (device), timing or not. Recording
 * enqueues it on a retire's stream after everything admitted so far; query and synchronize
 * observe its latest record from the host; t4a_event_wait makes a retire's stream wait for it
 * (no host wait); t4a_event_elapsed_ms gives the time between two completed records of timing
 * events. During a graph capture (or a chain recording) of the retire, record and wait are
 * captured as external event nodes (CU_EVENT_RECORD_EXTERNAL, CU_EVENT_WAIT_EXTERNAL): each
 * replay records the event, or waits for its latest record, and the graph keeps the event.
 * Query, synchronize and elapsed time are host calls and are not captured.
 *
 * Host functions. t4a_host_func_launch enqueues fn(user) on the stream (cuLaunchHostFunc); the
 * driver runs it on a thread of its own once the work before it completed. The keepalives handed
 * over are released only after the function ran. Inside the function every t4a call that would
 * activate a context, wait, or take a lane's operation lock answers REENTRY (the Driver API
 * forbids CUDA calls there, and a wait on its own stream would never end). Host functions are
 * captured into graphs and chains (a host node), and run at each replay.
 *
 * Thread-safety: any thread. Ownership: create returns a reference; release accepts NULL. */
#ifndef T4A_EVENT_H_
#define T4A_EVENT_H_

#include <stddef.h>
#include <stdint.h>

#include "t4a/ctx.h"
#include "t4a/retire.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A user event. Refcounted, opaque. */
typedef struct t4a_event t4a_event;

#define T4A_EVENT_TIMING 1u /**< record timestamps (t4a_event_elapsed_ms); off: DISABLE_TIMING */

/** Options of t4a_event_create; zero means the default (no timing). */
typedef struct t4a_event_options {
  uint32_t flags; /**< T4A_EVENT_TIMING */
} t4a_event_options;
/** Every option at its default. */
#define T4A_EVENT_OPTIONS_INIT {0}

/** Creates an event in `lane`'s context (the lane is retained). options may be NULL.
 * Statuses: INVALID_ARGUMENT (NULL, unknown flags), LANE_BROKEN, REENTRY (inside a host
 * function), HOST_OUT_OF_MEMORY, driver failures. */
T4A_MUST_USE t4a_status t4a_event_create(t4a_lane *lane, const t4a_event_options *options,
                                         t4a_event **out);
/** Adds a reference. Accepts NULL. */
void t4a_event_retain(t4a_event *event);
/** Drops a reference; the last destroys the event under its context (a pending record is fine:
 * the driver completes it), or leaks and counts it when the context cannot be activated.
 * Accepts NULL. */
void t4a_event_release(t4a_event *event);
/** Whether the event records timestamps. */
int t4a_event_is_timing(const t4a_event *event);

/** Records the event on `retire`'s stream after all work admitted so far (an admission; counted
 * in user_events_recorded); in a capture, an event record node. Statuses: INVALID_ARGUMENT,
 * FOREIGN_HANDLE (the retire's lane is on another device's context), REENTRY, LANE_BROKEN, driver
 * failures. Nothing is enqueued on failure. */
T4A_MUST_USE t4a_status t4a_event_record(t4a_event *event, t4a_retire *retire);
/** OK once the latest record completed (or when never recorded, as the driver answers),
 * NOT_READY, or the device's failure. Never blocks. */
T4A_MUST_USE t4a_status t4a_event_query(t4a_event *event);
/** Waits on the host until the latest record completed (counted in host_waits of the event's
 * lane). Statuses as query, and REENTRY inside a host function. */
T4A_MUST_USE t4a_status t4a_event_synchronize(t4a_event *event);
/** Makes `retire`'s stream wait for the event's latest record (cuStreamWaitEvent; no host wait;
 * counted in user_event_waits); in a capture, an event wait node. The event may be of another
 * lane of the same device. Statuses: INVALID_ARGUMENT, FOREIGN_HANDLE (an event of another
 * device's context), REENTRY, LANE_BROKEN, driver failures. */
T4A_MUST_USE t4a_status t4a_event_wait(t4a_retire *retire, t4a_event *event);
/** Milliseconds between the completed records of two timing events (cuEventElapsedTime, about
 * 0.5 µs resolution). Statuses: INVALID_ARGUMENT (NULL; an event without timing; an event never
 * recorded; events of two devices), NOT_READY (a record has not completed), REENTRY, driver
 * failures. *out_ms is 0 on failure. */
T4A_MUST_USE t4a_status t4a_event_elapsed_ms(t4a_event *start, t4a_event *end, float *out_ms);

/* ---- host functions ---- */

/** A host function: runs on a driver thread, in stream order. Must not call t4a or CUDA (t4a
 * calls answer REENTRY). */
typedef void (*t4a_host_fn)(void *user);

/** Enqueues fn(user) on `retire`'s stream (cuLaunchHostFunc; counted in host_funcs). The
 * `num_keep` keepalives (references handed over in every case; may be 0) are held until the
 * function ran and the work before it completed. On a failure they are released at once when
 * nothing was enqueued, and quarantined (held for good, counted as leaked at teardown) when the
 * driver's enqueue call itself failed (the function may still run). Captured (a host node)
 * during a graph capture or chain recording: the keepalives then go with the graph.
 * Statuses: INVALID_ARGUMENT (NULL retire or fn, a keepalive without a release), REENTRY,
 * LANE_BROKEN, HOST_OUT_OF_MEMORY, driver failures. */
T4A_MUST_USE t4a_status t4a_host_func_launch(t4a_retire *retire, t4a_host_fn fn, void *user,
                                             const t4a_keepalive *keep, size_t num_keep);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_EVENT_H_ */
