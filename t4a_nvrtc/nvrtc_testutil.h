/* Test support for t4a_nvrtc's tests (never linked into a library): an NVRTC table that wraps
 * the real library's entry points, counts every call and can fail any one of them; a fault hook
 * that fails the Nth consultation of chosen fault points; temporary directories; and the small
 * kernels the tests compile. */
#ifndef T4A_NVRTC_NVRTC_TESTUTIL_H_
#define T4A_NVRTC_NVRTC_TESTUTIL_H_

#include <stdatomic.h>
#include <stddef.h>

#include "t4a/fault.h"
#include "t4a/nvrtc.h"
#include "t4a/status.h"

/* What the wrapped table did since the last nvrtc_wrap_reset. */
typedef struct nvrtc_wrap_state {
  atomic_long calls;         /* wrapped calls (every entry but nvrtcGetErrorString) */
  atomic_long compiles;      /* nvrtcCompileProgram calls */
  atomic_long programs_live; /* programs created and not yet destroyed */
  long fail_at;              /* the call index that fails (-1: none) */
  int fail_code;             /* the nvrtcResult it returns */
  const char *failed_entry;  /* the entry that was failed, or NULL */
  /* If set, nvrtcCompileProgram calls it (after counting) before NVRTC compiles: a test can hold
   * a compile until other threads have reached a state. Cleared by nvrtc_wrap_reset. */
  void (*on_compile)(void *user);
  void *on_compile_user;
  /* If set, nvrtcCompileProgram calls it after NVRTC compiled (with on_compile_user): a test can
   * change what NVRTC read. Cleared by nvrtc_wrap_reset. */
  void (*on_compiled)(void *user);
} nvrtc_wrap_state;

extern nvrtc_wrap_state g_nvrtc_wrap;

/* Opens the real NVRTC and returns a lib built from a table that wraps it
 * (t4a_nvrtc_lib_create_from_table). drop_entry, if non-NULL, names a slot to leave NULL. The
 * failure plan in force (nvrtc_wrap_reset) applies to the calls the construction makes. */
t4a_status nvrtc_wrap_open(t4a_nvrtc_lib **out, const char *drop_entry);
/* Resets the counts; the call with index fail_at (0-based) then fails with fail_code. For
 * nvrtcDestroyProgram the real destroy still runs (so nothing leaks) before the failure is
 * reported. */
void nvrtc_wrap_reset(long fail_at, int fail_code);
/* Closes the real library kept open by nvrtc_wrap_open (after every wrapped lib is released)
 * and clears the failure plan. */
void nvrtc_wrap_close(void);

/* A fault plan: the consultation with index fail_at of any point in `mask` (bit 1 << point)
 * fails; consultations of other points pass and are not counted. */
typedef struct fault_plan {
  atomic_long seen;
  long fail_at;
  unsigned mask;
  int failed_point; /* the point that was failed, or -1 */
} fault_plan;

void fault_plan_install(fault_plan *plan, long fail_at, unsigned mask);
void fault_plan_remove(void);
#define FAULT_BIT(p) (1u << (p))
#define FAULT_FILE_BITS                                              \
  (FAULT_BIT(T4A_FAULT_FILE_OPEN) | FAULT_BIT(T4A_FAULT_FILE_READ) | \
   FAULT_BIT(T4A_FAULT_FILE_WRITE) | FAULT_BIT(T4A_FAULT_FILE_RENAME))
#define FAULT_ALL_BITS \
  (FAULT_FILE_BITS | FAULT_BIT(T4A_FAULT_HOST_MALLOC) | FAULT_BIT(T4A_FAULT_MUTEX_INIT))

/* Creates a fresh directory under $TMPDIR (or /tmp); writes its path into out. */
void test_tmpdir(char *out, size_t size);
/* Removes every file in dir (flat), then dir itself. */
void test_rmdir(const char *dir);
/* Counts files in dir whose names end with suffix (NULL: all files) / start with prefix. */
size_t test_count_files(const char *dir, const char *suffix, const char *prefix);
/* Writes the path of the first "*.t4a" entry of dir into out; 0 if none. */
int test_find_entry(const char *dir, char *out, size_t size);
/* Sum of the sizes of the "*.t4a" entries of dir. */
unsigned long long test_entry_bytes(const char *dir);

/* Kernels. */
extern const char k_add1_src[];     /* extern "C" __global__ void add1(float *, int) */
extern const char k_template_src[]; /* template <typename T> __global__ void k() */
extern const char k_broken_src[];   /* does not compile: uses undefined_thing */
extern const char k_scale_src[];    /* #include "scale.h"; needs SCALE */

/* A request for k_add1_src: PTX for sm_90, no headers, no options. */
t4a_nvrtc_request test_add1_request(void);

#endif /* T4A_NVRTC_NVRTC_TESTUTIL_H_ */
