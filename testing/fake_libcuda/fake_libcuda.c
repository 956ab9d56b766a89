/* A stand-in libcuda.so.1 for testing the real loader path (dlopen + cuGetProcAddress_v2) on a
 * machine without a driver. It records every cuGetProcAddress_v2 request (name, version, flags)
 * and answers according to environment variables read at each request:
 *   T4A_FAKE_LIBCUDA_VERSION   driver version reported by cuDriverGetVersion (default 13000)
 *   T4A_FAKE_LIBCUDA_MISSING   an entry answered with CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
 *   T4A_FAKE_LIBCUDA_TOO_OLD   an entry answered with CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
 *   T4A_FAKE_LIBCUDA_STUB      if set, every request fails with CUDA_ERROR_STUB_LIBRARY
 * Entries other than cuInit, cuDriverGetVersion, cuGetErrorName and cuGetErrorString resolve to
 * a function that returns CUDA_ERROR_NOT_SUPPORTED (the loader never calls them). Test code. */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct request {
  char name[64];
  int version;
  unsigned long long flags;
} request;

static request g_requests[512];
static int g_num_requests;
static int g_init_calls;

EXPORT int t4a_fake_libcuda_num_requests(void);
EXPORT const char *t4a_fake_libcuda_request(int i, int *out_version, unsigned long long *flags);
EXPORT int t4a_fake_libcuda_init_calls(void);
EXPORT void t4a_fake_libcuda_reset(void);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status);

int t4a_fake_libcuda_num_requests(void) { return g_num_requests; }
const char *t4a_fake_libcuda_request(int i, int *out_version, unsigned long long *flags) {
  if (i < 0 || i >= g_num_requests) return NULL;
  *out_version = g_requests[i].version;
  *flags = g_requests[i].flags;
  return g_requests[i].name;
}
int t4a_fake_libcuda_init_calls(void) { return g_init_calls; }
void t4a_fake_libcuda_reset(void) {
  g_num_requests = 0;
  g_init_calls = 0;
}

static CUresult CUDAAPI fl_init(unsigned int flags) {
  (void)flags;
  g_init_calls++;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI fl_version(int *v) {
  const char *e = getenv("T4A_FAKE_LIBCUDA_VERSION");
  *v = e != NULL ? atoi(e) : 13000;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI fl_error_name(CUresult r, const char **s) {
  *s = r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE_LIBCUDA";
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI fl_unsupported(void) { return CUDA_ERROR_NOT_SUPPORTED; }

static int env_is(const char *var, const char *symbol) {
  const char *e = getenv(var);
  return e != NULL && strcmp(e, symbol) == 0;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
  if (symbol == NULL || pfn == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (g_num_requests < 512) {
    request *q = &g_requests[g_num_requests++];
    strncpy(q->name, symbol, sizeof q->name - 1);
    q->version = version;
    q->flags = flags;
  }
  *pfn = NULL;
  if (getenv("T4A_FAKE_LIBCUDA_STUB") != NULL) return CUDA_ERROR_STUB_LIBRARY;
  if (env_is("T4A_FAKE_LIBCUDA_MISSING", symbol)) {
    if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  if (env_is("T4A_FAKE_LIBCUDA_TOO_OLD", symbol)) {
    if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  if (strcmp(symbol, "cuInit") == 0) {
    *pfn = (void *)fl_init;
  } else if (strcmp(symbol, "cuDriverGetVersion") == 0) {
    *pfn = (void *)fl_version;
  } else if (strcmp(symbol, "cuGetErrorName") == 0 || strcmp(symbol, "cuGetErrorString") == 0) {
    *pfn = (void *)fl_error_name;
  } else {
    *pfn = (void *)fl_unsupported;
  }
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}
