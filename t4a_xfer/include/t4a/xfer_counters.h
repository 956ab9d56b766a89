/** @file
 * t4a/xfer_counters.h — the counters t4a_xfer owns, as X(name, description) lists.
 *
 * t4a/counters.h joins every library's runs into T4A_COUNTER_LIST (the one counter block,
 * its ids and the snapshot's fields) in the order the counters were added, so ids stay put: a
 * new counter goes into a new run here, joined at the end of T4A_COUNTER_LIST. Plain macros:
 * this header includes nothing and compiles as C and as C++. */
#ifndef T4A_XFER_COUNTERS_H_
#define T4A_XFER_COUNTERS_H_

/** Run 1 of t4a_xfer's counters. */
#define T4A_XFER_COUNTERS_1(X)                                                                    \
  X(bytes_uploaded, "bytes copied host to device (t4a_xfer uploads)")                             \
  X(bytes_downloaded, "bytes copied device to host (t4a_xfer downloads)")                         \
  X(staging_waits, "host waits for a staging chunk whose DMA had not completed")

/** Run 2 of t4a_xfer's counters. */
#define T4A_XFER_COUNTERS_2(X)                                                                    \
  X(copies_same_device, "copies between buffers of one device (t4a_xfer_copy)")                   \
  X(copies_peer, "copies between devices through peer access (t4a_xfer_copy)")                    \
  X(copies_staged, "copies between devices staged through pinned chunks (t4a_xfer_copy)")

/** Every counter of t4a_xfer, in the joined order. */
#define T4A_XFER_COUNTERS(X) T4A_XFER_COUNTERS_1(X) T4A_XFER_COUNTERS_2(X)

#endif /**< T4A_XFER_COUNTERS_H_ */
