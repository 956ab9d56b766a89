/** @file
 * t4a/status.h — the status vocabulary shared by every t4a library.
 *
 * Layer: t4a_ctx:status, the bottom of the stack. It opens no library and needs no CUDA header,
 * so t4a_nvrtc (and any user that wants only the vocabulary) can take it alone.
 *
 * Every fallible t4a function returns a t4a_status. T4A_OK is 0; the other values are stable and
 * never renumbered (new ones are appended to the table). The detail of a failure — the driver or
 * NVRTC entry point, the native result code and its name, the bytes asked for on out-of-memory,
 * and a message — is kept per thread: after a call returned a status other than T4A_OK,
 * t4a_error_last() on the same thread copies that failure's detail. Several threads failing at
 * once each see their own detail. Successful calls leave the detail untouched (as errno does).
 *
 * Thread-safety: all functions here are safe to call from any thread. */
#ifndef T4A_STATUS_H_
#define T4A_STATUS_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** T4A_MUST_USE marks a function whose result must be used (warn_unused_result); T4A_PRINTF(f,
 * a) checks a printf-style format (argument f, values from a). Empty for compilers other than
 * gcc and clang. */
#if defined(__GNUC__) || defined(__clang__)
#define T4A_MUST_USE __attribute__((warn_unused_result))
#define T4A_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
/** Result must be used (warn_unused_result with gcc and clang). */
#define T4A_MUST_USE
/** printf-style format check of argument f with values from a (gcc and clang). */
#define T4A_PRINTF(f, a)
#endif

/** X(name, value, message). Values are part of the ABI: append, never renumber. */
#define T4A_STATUS_MAP(X)                                                                          \
  X(OK, 0, "success")                                                                              \
  X(INVALID_ARGUMENT, 1, "an argument is invalid")                                                 \
  X(HOST_OUT_OF_MEMORY, 2, "host memory allocation failed")                                        \
  X(DEVICE_OUT_OF_MEMORY, 3, "device memory allocation failed")                                    \
  X(DRIVER_NOT_FOUND, 4, "the CUDA driver library could not be loaded")                            \
  X(DRIVER_TOO_OLD, 5, "the CUDA driver is older than t4a requires")                               \
  X(DRIVER_SYMBOL_MISSING, 6, "a required CUDA driver entry point is missing")                     \
  X(DRIVER_ERROR, 7, "a CUDA driver call failed")                                                  \
  X(NO_DEVICE, 8, "no CUDA device is available")                                                   \
  X(INVALID_DEVICE, 9, "the device ordinal does not name a device")                                \
  X(INVALID_CONTEXT, 10, "the CUDA context is invalid or destroyed")                               \
  X(CONTEXT_LOST, 11, "the CUDA context took a sticky error and cannot be used")                   \
  X(NOT_READY, 12, "the work has not completed yet")                                               \
  X(REENTRY, 13, "the runtime was re-entered from inside one of its own callbacks")                \
  X(FOREIGN_HANDLE, 14, "a handle belongs to another runtime, domain or device")                   \
  X(UNSUPPORTED, 15, "the operation is not supported by this driver or device")                    \
  X(NVRTC_NOT_FOUND, 16, "the NVRTC library could not be loaded")                                  \
  X(NVRTC_SYMBOL_MISSING, 17, "a required NVRTC entry point is missing")                           \
  X(COMPILE_FAILED, 18, "NVRTC compilation failed")                                                \
  X(INVALID_LAUNCH, 19, "the launch configuration is invalid for this device or kernel")           \
  X(ARGUMENT_MISMATCH, 20, "launch arguments do not match the kernel's parameters")                \
  X(UNKNOWN_ENTRY_POINT, 21, "the module has no kernel or global of that name")                    \
  X(CACHE_CORRUPT, 22, "a cache entry is corrupt")                                                 \
  X(IO, 23, "a file operation failed")                                                             \
  X(LANE_BROKEN, 24, "the lane is broken by an earlier fault and refuses new work")               \
  X(ALREADY_CONSUMED, 25, "the result was already delivered")                                      \
  X(LIMIT_EXCEEDED, 26, "the request exceeds a limit")                                             \
  X(INTERNAL, 27, "internal invariant violated")                                                   \
  X(NVRTC_ERROR, 28, "an NVRTC call failed")                                                       \
  X(BUSY, 29, "the object is still in use")                                                      \
  X(UPSTREAM_FAILED, 30, "work this operation depends on failed on another lane or device")     \
  X(JITLINK_NOT_FOUND, 31, "the nvJitLink library could not be loaded")                            \
  X(JITLINK_SYMBOL_MISSING, 32, "a required nvJitLink entry point is missing")                     \
  X(LINK_FAILED, 33, "nvJitLink could not link the inputs")                                        \
  X(JITLINK_ERROR, 34, "an nvJitLink call failed")

/** Every status of t4a: T4A_<name> = value for each entry of T4A_STATUS_MAP (T4A_OK = 0);
 * values are never renumbered. */
typedef enum t4a_status {
#define T4A_STATUS_ENUM_(name, value, msg) T4A_##name = value,
  T4A_STATUS_MAP(T4A_STATUS_ENUM_)
#undef T4A_STATUS_ENUM_
} t4a_status;

/** Returns the status's name without the T4A_ prefix ("DEVICE_OUT_OF_MEMORY"), or "UNKNOWN" for a
 * value outside the table. The string is static. */
const char *t4a_status_name(t4a_status status);

/** Returns a one-line English description of the status. The string is static. */
const char *t4a_status_str(t4a_status status);

/** The detail of one failure. Strings are static or copied into the struct, so a copy stays valid. */
typedef struct t4a_error {
  t4a_status status;     /**< the status that was returned */
  const char *entry;     /**< driver/NVRTC entry point or t4a operation that failed; "" if none */
  int code;              /**< the native result (CUresult, nvrtcResult); 0 if none */
  const char *code_name; /**< its name ("CUDA_ERROR_OUT_OF_MEMORY"); "" if none */
  uint64_t bytes;        /**< bytes requested when the failure is an allocation; 0 otherwise */
  char message[256];     /**< human-readable detail, NUL-terminated */
} t4a_error;

/** Copies this thread's most recent failure detail into *out. If no t4a call on this thread has
 * failed yet, *out has status T4A_OK and empty strings. */
void t4a_error_last(t4a_error *out);

/** Forgets this thread's failure detail. */
void t4a_error_clear(void);

/** Puts back a detail saved with t4a_error_last(). t4a's drop and cleanup paths use the pair so
 * that a failure inside cleanup never replaces the detail of the failure being reported. */
void t4a_error_restore(const t4a_error *saved);

/** Formats "STATUS_NAME: message [entry -> CODE_NAME (code)] (N bytes)" into buf (always
 * NUL-terminated when size > 0). Returns buf. */
char *t4a_error_format(const t4a_error *err, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /**< T4A_STATUS_H_ */
