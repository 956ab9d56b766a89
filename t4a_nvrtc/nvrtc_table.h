/* The NVRTC table: one slot per catalogue entry. Private to t4a_nvrtc. */
#ifndef T4A_NVRTC_NVRTC_TABLE_H_
#define T4A_NVRTC_NVRTC_TABLE_H_

#include <nvrtc.h>
#include <stdatomic.h>
#include <stdint.h>

#include "t4a/nvrtc.h"
#include "t4a_nvrtc/nvrtc_catalog.h"

typedef struct t4a_nvrtc_table {
#define T4A_NVRTC_SLOT_(name, need) __typeof__(name) *name;
  T4A_NVRTC_CATALOG(T4A_NVRTC_SLOT_)
#undef T4A_NVRTC_SLOT_
} t4a_nvrtc_table;

struct t4a_nvrtc_lib {
  t4a_nvrtc_table t;
  atomic_int refs;
  int major, minor;
  uint32_t caps;
  void *dl;
  char origin[512];
};

#endif /* T4A_NVRTC_NVRTC_TABLE_H_ */
