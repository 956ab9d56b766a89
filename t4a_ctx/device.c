/* Device enumeration and properties. */
#include <stdio.h>
#include <string.h>

#include "t4a_ctx/driver_table.h"
#include "t4a_ctx/status_internal.h"

t4a_status t4a_device_count(t4a_driver *driver, int *out_count) {
  if (out_count == NULL || driver == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "driver or out_count is NULL");
  }
  *out_count = 0;
  int n = 0;
  t4a_status st = T4A_CU(driver, cuDeviceGetCount, &n);
  if (st == T4A_OK) *out_count = n;
  return st;
}

static t4a_status get_device(t4a_driver *driver, int ordinal, CUdevice *out) {
  int count = 0;
  t4a_status st = t4a_device_count(driver, &count);
  if (st != T4A_OK) return st;
  if (ordinal < 0 || ordinal >= count) {
    return t4a_error_set_(T4A_INVALID_DEVICE, NULL, 0, NULL, 0,
                          "device ordinal %d is out of range (the driver sees %d devices)",
                          ordinal, count);
  }
  return T4A_CU(driver, cuDeviceGet, out, ordinal);
}

t4a_status t4a_device_query(t4a_driver *driver, int ordinal, t4a_device_info *out) {
  if (out == NULL || driver == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "driver or out is NULL");
  }
  memset(out, 0, sizeof *out);
  t4a_device_info info = {0};
  info.ordinal = ordinal;
  CUdevice dev = 0;
  t4a_status st = get_device(driver, ordinal, &dev);
  if (st != T4A_OK) return st;
  CUuuid uuid;
  size_t total = 0;
  if ((st = T4A_CU(driver, cuDeviceGetName, info.name, (int)sizeof info.name - 1, dev)) !=
          T4A_OK ||
      (st = T4A_CU(driver, cuDeviceGetUuid, &uuid, dev)) != T4A_OK ||
      (st = T4A_CU(driver, cuDeviceTotalMem, &total, dev)) != T4A_OK) {
    return st;
  }
  info.name[sizeof info.name - 1] = '\0';
  memcpy(info.uuid, uuid.bytes, sizeof info.uuid);
  info.total_mem_bytes = total;
  static const struct {
    CUdevice_attribute attr;
    size_t offset;
  } attrs[] = {
#define A(attr, field) {CU_DEVICE_ATTRIBUTE_##attr, offsetof(t4a_device_info, field)}
      A(COMPUTE_CAPABILITY_MAJOR, cc_major),
      A(COMPUTE_CAPABILITY_MINOR, cc_minor),
      A(MULTIPROCESSOR_COUNT, sm_count),
      A(MAX_THREADS_PER_BLOCK, max_threads_per_block),
      A(MAX_BLOCK_DIM_X, max_block_dim[0]),
      A(MAX_BLOCK_DIM_Y, max_block_dim[1]),
      A(MAX_BLOCK_DIM_Z, max_block_dim[2]),
      A(MAX_GRID_DIM_X, max_grid_dim[0]),
      A(MAX_GRID_DIM_Y, max_grid_dim[1]),
      A(MAX_GRID_DIM_Z, max_grid_dim[2]),
      A(WARP_SIZE, warp_size),
      A(MAX_SHARED_MEMORY_PER_BLOCK, max_shared_per_block_bytes),
      A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, max_shared_per_block_optin_bytes),
      A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, max_shared_per_sm_bytes),
      A(MAX_REGISTERS_PER_BLOCK, max_registers_per_block),
      A(L2_CACHE_SIZE, l2_cache_bytes),
      A(MAX_PERSISTING_L2_CACHE_SIZE, max_persisting_l2_bytes),
      A(MAX_ACCESS_POLICY_WINDOW_SIZE, max_access_policy_window_bytes),
      A(CLOCK_RATE, clock_khz),
      A(MEMORY_CLOCK_RATE, memory_clock_khz),
      A(GLOBAL_MEMORY_BUS_WIDTH, memory_bus_width_bits),
      A(ASYNC_ENGINE_COUNT, async_engine_count),
      A(UNIFIED_ADDRESSING, unified_addressing),
      A(CAN_MAP_HOST_MEMORY, can_map_host_memory),
      A(MEMORY_POOLS_SUPPORTED, memory_pools_supported),
      A(CONCURRENT_MANAGED_ACCESS, concurrent_managed_access),
      A(PCI_DOMAIN_ID, pci_domain),
      A(PCI_BUS_ID, pci_bus),
      A(PCI_DEVICE_ID, pci_device),
      A(INTEGRATED, integrated),
#undef A
  };
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
    int *field = (int *)((char *)&info + attrs[i].offset);
    if ((st = T4A_CU(driver, cuDeviceGetAttribute, field, attrs[i].attr, dev)) != T4A_OK) {
      return st;
    }
  }
  *out = info;
  return T4A_OK;
}

t4a_status t4a_device_can_access_peer(t4a_driver *driver, int ordinal, int peer_ordinal,
                                      int *out_can) {
  if (out_can == NULL || driver == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "driver or out_can is NULL");
  }
  *out_can = 0;
  CUdevice a = 0, b = 0;
  t4a_status st;
  if ((st = get_device(driver, ordinal, &a)) != T4A_OK ||
      (st = get_device(driver, peer_ordinal, &b)) != T4A_OK) {
    return st;
  }
  if (ordinal == peer_ordinal) return T4A_OK;
  int can = 0;
  if ((st = T4A_CU(driver, cuDeviceCanAccessPeer, &can, a, b)) == T4A_OK) *out_can = can != 0;
  return st;
}

char *t4a_device_uuid_format(const uint8_t uuid[16], char *buf, size_t size) {
  if (buf == NULL || size == 0) return buf;
  snprintf(buf, size,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", uuid[0],
           uuid[1], uuid[2], uuid[3], uuid[4], uuid[5], uuid[6], uuid[7], uuid[8], uuid[9],
           uuid[10], uuid[11], uuid[12], uuid[13], uuid[14], uuid[15]);
  return buf;
}
