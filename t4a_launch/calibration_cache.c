/* The process's launch calibrations, one per driver and device (t4a_launch_calibrate_device in
 * t4a/launch.h): a fixed table; when it is full a new pair is measured each time and counted,
 * never stored over another. */
#include <pthread.h>
#include <string.h>

#include "t4a/launch.h"
#include "t4a_ctx/status_internal.h"

/* The empty kernel the calibration fires: PTX for any device the driver can JIT for. */
static const char k_nop_ptx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n\n.visible .entry t4a_nop()\n{\n  ret;\n}\n";

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  const t4a_driver *driver;
  int ordinal;
  t4a_launch_calibration c;
} g_slots[T4A_LAUNCH_CALIBRATION_CACHE_SLOTS];
static uint32_t g_entries;
static uint64_t g_measured, g_reused, g_not_stored;

/* One measurement on a lane, retirement state and module cache of its own on the device, all
 * released before it returns: no other lane's counters see its launches, waits or module load.
 * On failure the detail is the first failure's. */
static t4a_status measure(t4a_driver *driver, int ordinal, t4a_launch_calibration *out) {
  t4a_lane *lane = NULL;
  t4a_retire *retire = NULL;
  t4a_module_cache *cache = NULL;
  t4a_module *m = NULL;
  t4a_function *fn = NULL;
  t4a_status st = t4a_lane_create(driver, ordinal, NULL, &lane);
  if (st == T4A_OK) st = t4a_retire_create(lane, NULL, &retire);
  if (st == T4A_OK) st = t4a_module_cache_create(retire, NULL, &cache);
  if (st == T4A_OK) st = t4a_module_load(cache, k_nop_ptx, sizeof k_nop_ptx, T4A_IMAGE_PTX, &m);
  if (st == T4A_OK) st = t4a_module_get_function(m, "t4a_nop", &fn);
  if (st == T4A_OK) st = t4a_launch_calibrate(retire, fn, 0, out);
  t4a_error saved;
  t4a_error_last(&saved);
  t4a_function_release(fn);
  t4a_module_release(m);
  t4a_module_cache_destroy(cache);
  t4a_status dst = retire != NULL ? t4a_retire_destroy(retire) : T4A_OK;
  t4a_lane_release(lane);
  t4a_error_restore(&saved);
  if (st == T4A_OK) st = dst;
  if (st != T4A_OK) memset(out, 0, sizeof *out);
  return st;
}

t4a_status t4a_launch_calibrate_device(t4a_driver *driver, int ordinal,
                                       t4a_launch_calibration *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (driver == NULL || out == NULL) {
    return t4a_error_set_(T4A_INVALID_ARGUMENT, NULL, 0, NULL, 0, "driver or out is NULL");
  }
  /* The lock is held across the measurement: two callers for one device measure once. */
  pthread_mutex_lock(&g_lock);
  for (uint32_t i = 0; i < g_entries; i++) {
    if (g_slots[i].driver == driver && g_slots[i].ordinal == ordinal) {
      *out = g_slots[i].c;
      g_reused++;
      pthread_mutex_unlock(&g_lock);
      return T4A_OK;
    }
  }
  t4a_status st = measure(driver, ordinal, out);
  if (st == T4A_OK) {
    g_measured++;
    if (g_entries < T4A_LAUNCH_CALIBRATION_CACHE_SLOTS) {
      g_slots[g_entries].driver = driver;
      g_slots[g_entries].ordinal = ordinal;
      g_slots[g_entries].c = *out;
      g_entries++;
    } else {
      g_not_stored++;
    }
  }
  pthread_mutex_unlock(&g_lock);
  return st;
}

void t4a_launch_calibration_cache_stats(struct t4a_launch_calibration_cache_stats *out) {
  if (out == NULL) return;
  pthread_mutex_lock(&g_lock);
  out->entries = g_entries;
  out->capacity = T4A_LAUNCH_CALIBRATION_CACHE_SLOTS;
  out->measured = g_measured;
  out->reused = g_reused;
  out->not_stored = g_not_stored;
  pthread_mutex_unlock(&g_lock);
}
