/* errors.c - per-thread last-error message and status names. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char last_error[512];

cudaq_status_t cudaq__fail(cudaq_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

cudaq_status_t cudaq__ok(void) {
  last_error[0] = '\0';
  return CUDAQ_OK;
}

const char *cudaq_last_error(void) { return last_error; }

const char *cudaq_status_string(cudaq_status_t status) {
  switch (status) {
  case CUDAQ_OK: return "CUDAQ_OK";
  case CUDAQ_ERR_INVALID_ARG: return "CUDAQ_ERR_INVALID_ARG";
  case CUDAQ_ERR_INTERNAL: return "CUDAQ_ERR_INTERNAL";
  case CUDAQ_ERR_CUDA: return "CUDAQ_ERR_CUDA";
  case CUDAQ_ERR_UNSUPPORTED: return "CUDAQ_ERR_UNSUPPORTED";
  }
  return "unknown cudaq_status_t";
}

const char *cudaq_rpc_status_string(int32_t rpc_status) {
  if (rpc_status == 0) return "ok";
  if (rpc_status > 0) return "handler error";
  switch (rpc_status) {
  case CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE: return "payload larger than the slot";
  case CUDAQ_RPC_ERR_ARG_LEN_MISMATCH: return "arg_len does not match the handler schema";
  case CUDAQ_RPC_ERR_RESULT_TOO_LARGE: return "result larger than the TX slot";
  case CUDAQ_RPC_ERR_UNSUPPORTED_MODE: return "dispatch mode not supported by this dispatcher";
  case CUDAQ_RPC_ERR_LAUNCH_FAILED: return "handler launch failed";
  }
  return "unknown protocol error";
}
