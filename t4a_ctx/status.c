/* Status names, messages and the per-thread failure detail. */
#include "t4a/status.h"
#include "t4a_ctx/status_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local t4a_error t_last_error;

const char *t4a_status_name(t4a_status status) {
  switch (status) {
#define T4A_STATUS_NAME_(name, value, msg) \
  case T4A_##name:                         \
    return #name;
    T4A_STATUS_MAP(T4A_STATUS_NAME_)
#undef T4A_STATUS_NAME_
  }
  return "UNKNOWN";
}

const char *t4a_status_str(t4a_status status) {
  switch (status) {
#define T4A_STATUS_STR_(name, value, msg) \
  case T4A_##name:                        \
    return msg;
    T4A_STATUS_MAP(T4A_STATUS_STR_)
#undef T4A_STATUS_STR_
  }
  return "unknown status";
}

void t4a_error_last(t4a_error *out) {
  if (out == NULL) return;
  *out = t_last_error;
  if (out->entry == NULL) out->entry = "";
  if (out->code_name == NULL) out->code_name = "";
}

void t4a_error_clear(void) { memset(&t_last_error, 0, sizeof t_last_error); }

void t4a_error_restore(const t4a_error *saved) {
  if (saved != NULL) t_last_error = *saved;
}

t4a_status t4a_error_set_(t4a_status status, const char *entry, int code, const char *code_name,
                          uint64_t bytes, const char *fmt, ...) {
  t4a_error *e = &t_last_error;
  e->status = status;
  e->entry = entry != NULL ? entry : "";
  e->code = code;
  e->code_name = code_name != NULL ? code_name : "";
  e->bytes = bytes;
  e->message[0] = '\0';
  if (fmt != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
  }
  return status;
}

char *t4a_error_format(const t4a_error *err, char *buf, size_t size) {
  if (buf == NULL || size == 0) return buf;
  buf[0] = '\0';
  if (err == NULL) return buf;
  size_t n = (size_t)snprintf(buf, size, "%s: %s", t4a_status_name(err->status),
                              err->message[0] ? err->message : t4a_status_str(err->status));
  if (n < size && err->entry != NULL && err->entry[0] != '\0') {
    if (err->code != 0 || (err->code_name != NULL && err->code_name[0] != '\0')) {
      n += (size_t)snprintf(buf + n, size - n, " [%s -> %s (%d)]", err->entry,
                            err->code_name && err->code_name[0] ? err->code_name : "?", err->code);
    } else {
      n += (size_t)snprintf(buf + n, size - n, " [%s]", err->entry);
    }
  }
  if (n < size && err->bytes != 0) {
    snprintf(buf + n, size - n, " (%llu bytes)", (unsigned long long)err->bytes);
  }
  return buf;
}
