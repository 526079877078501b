/*
 * device_path.c - the device dispatch path of the host API: memory checks,
 * start (launch through the launch function on the dispatcher's own
 * stream), stop (raise the shutdown flag, wait with a grace period) and
 * statistics. Built only with CUDA.
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "atomics.h"
#include "internal.h"

#define STOP_GRACE_NS 10000000000ull /* stop() gives a kernel 10 s to exit */

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int cudaq__device_accessible(const void *p, const void **host_view) {
  struct cudaPointerAttributes a;
  if (host_view) *host_view = NULL;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError(); /* clear the sticky-free error of a failed query */
    return 0;
  }
  switch (a.type) {
  case cudaMemoryTypeDevice: return 1;
  case cudaMemoryTypeHost:
  case cudaMemoryTypeManaged:
    if (host_view) *host_view = a.hostPointer ? a.hostPointer : p;
    return 1;
  default: return 0; /* unregistered host memory: the GPU cannot read it */
  }
}

/* Stores v into an int the GPU reads: through its host view when it has
 * one, else with a copy on a private non-blocking stream, never on a
 * stream a persistent kernel occupies (the one home of this rule: start,
 * stop and cudaq_dispatch_set_shutdown_flag use it). */
static cudaError_t write_control_int(volatile int *flag, int v) {
  const void *host = NULL;
  if (!cudaq__device_accessible((const void *)(uintptr_t)flag, &host)) return cudaErrorInvalidValue;
  if (host) {
    /* R4 (device path) asks the kernel to exit; the kernel reads it relaxed
     * every few dozen polls (nothing is published through it). */
    cudaq__store_release_int((volatile int *)(uintptr_t)host, v);
    return cudaSuccess;
  }
  cudaStream_t s;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return e;
  e = cudaMemcpyAsync((void *)(uintptr_t)flag, &v, sizeof v, cudaMemcpyHostToDevice, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  return e;
}

cudaq_status_t cudaq_dispatch_set_shutdown_flag(volatile int *shutdown_flag, int value) {
  static const char *fn = "cudaq_dispatch_set_shutdown_flag";
  if (!shutdown_flag) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: shutdown_flag is NULL", fn);
  if (!cudaq__device_accessible((const void *)(uintptr_t)shutdown_flag, NULL))
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: shutdown_flag is not device-visible memory", fn);
  cudaError_t e = write_control_int(shutdown_flag, value);
  return e == cudaSuccess ? cudaq__ok()
                          : cudaq__fail(CUDAQ_ERR_CUDA, "%s: %s", fn, cudaGetErrorString(e));
}

/* Zeroes the stats word (through its host view when it has one). */
static cudaError_t zero_stats(uint64_t *stats) {
  const void *host = NULL;
  if (!cudaq__device_accessible(stats, &host)) return cudaErrorInvalidValue;
  if (host) {
    atomic_store_explicit(CUDAQ__A64(host), 0, memory_order_relaxed); /* no kernel runs yet */
    return cudaSuccess;
  }
  cudaStream_t s;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return e;
  e = cudaMemsetAsync(stats, 0, sizeof *stats, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  return e;
}

int cudaq__device_copy_to_host(void *dst, const void *src, size_t bytes) {
  cudaStream_t s;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return (int)e;
  e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s); /* device, mapped or managed memory */
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  return (int)e;
}

cudaq_status_t cudaq__device_read_u64(const uint64_t *p, uint64_t *out) {
  const void *host = NULL;
  if (!cudaq__device_accessible(p, &host))
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "stats buffer is not device-visible memory");
  if (host) {
    *out = atomic_load_explicit(CUDAQ__A64(host), memory_order_relaxed);
    return cudaq__ok();
  }
  cudaError_t e = (cudaError_t)cudaq__device_copy_to_host(out, p, sizeof *out);
  return e == cudaSuccess ? cudaq__ok()
                          : cudaq__fail(CUDAQ_ERR_CUDA, "reading stats: %s", cudaGetErrorString(e));
}

cudaq_status_t cudaq__device_start(cudaq_dispatcher_t *d) {
  static const char *fn = "cudaq_dispatcher_start";
  int prev = 0, ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0)
    return cudaq__fail(CUDAQ_ERR_CUDA, "%s: no CUDA device (%s)", fn, cudaGetErrorString(e));
  if (d->config.device_id >= ndev)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: device_id %d, but there are %d devices", fn,
                       d->config.device_id, ndev);
  cudaGetDevice(&prev);
  if ((e = cudaSetDevice(d->config.device_id)) != cudaSuccess)
    return cudaq__fail(CUDAQ_ERR_CUDA, "%s: cudaSetDevice(%d): %s", fn, d->config.device_id,
                       cudaGetErrorString(e));
  if ((e = write_control_int(d->shutdown_flag, 0)) != cudaSuccess) {
    cudaSetDevice(prev);
    return cudaq__fail(CUDAQ_ERR_CUDA, "%s: clearing the shutdown flag: %s", fn, cudaGetErrorString(e));
  }
  /* A new dispatcher counts from 0 even if its stats buffer held another
   * dispatcher's counts; a restarted one continues, stats[0] and the
   * device counters alike. Decided by started_once, not by stats[0]: a
   * first run that only dropped requests leaves stats[0] at 0 and its drop
   * counters must survive a restart. */
  if (!d->started_once && (e = zero_stats(d->stats)) != cudaSuccess) {
    cudaSetDevice(prev);
    return cudaq__fail(CUDAQ_ERR_CUDA, "%s: clearing the stats buffer: %s", fn, cudaGetErrorString(e));
  }
  if (d->ring.completion == CUDAQ_RX_COMPLETION_HEADER &&
      (d->config.kernel_type == CUDAQ_KERNEL_UNIFIED || !cudaq__is_header_launcher(d->launch_fn))) {
    cudaSetDevice(prev);
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: a ring with header completion needs cudaq_launch_dispatch_kernel_regular or "
                       "cudaq_launch_dispatch_kernel_cooperative as the launch function",
                       fn);
  }
  if (cudaq__device_launch_prepare(d->stats, !d->started_once, d->ring.completion) != 0) {
    cudaSetDevice(prev);
    return cudaq__fail(CUDAQ_ERR_CUDA, "%s: preparing the device counters failed", fn);
  }
  if (!d->stream && (e = cudaStreamCreateWithFlags((cudaStream_t *)&d->stream, cudaStreamNonBlocking)) != cudaSuccess) {
    cudaSetDevice(prev);
    return cudaq__fail(CUDAQ_ERR_CUDA, "%s: cudaStreamCreate: %s", fn, cudaGetErrorString(e));
  }
  cudaGetLastError(); /* launch errors below must be ours */
  const cudaq_ringbuffer_t *r = &d->ring;
  if (d->config.kernel_type == CUDAQ_KERNEL_UNIFIED)
    d->unified_launch_fn(d->transport_ctx, d->table.entries, d->table.count, d->shutdown_flag, d->stats,
                         (cudaStream_t)d->stream);
  else
    d->launch_fn(r->rx_flags, r->tx_flags, r->rx_data, r->tx_data, r->rx_stride_sz, r->tx_stride_sz,
                 d->table.entries, d->table.count, d->shutdown_flag, d->stats, d->config.num_slots,
                 d->config.num_blocks, d->config.threads_per_block, (cudaStream_t)d->stream);
  e = cudaGetLastError();
  cudaSetDevice(prev);
  if (e == cudaSuccess) d->started_once = true;
  if (e != cudaSuccess)
    return cudaq__fail(CUDAQ_ERR_CUDA, "%s: the launch function failed: %s (%s)", fn,
                       cudaGetErrorName(e), cudaGetErrorString(e));
  return cudaq__ok();
}

cudaq_status_t cudaq__device_stop(cudaq_dispatcher_t *d) {
  static const char *fn = "cudaq_dispatcher_stop";
  cudaError_t e = write_control_int(d->shutdown_flag, 1);
  if (e != cudaSuccess)
    return cudaq__fail(CUDAQ_ERR_CUDA, "%s: raising the shutdown flag: %s", fn, cudaGetErrorString(e));
  /* Wait for the kernel with a grace period instead of hanging (not a hot
   * path: stream queries are fine here). */
  const uint64_t t0 = now_ns();
  while ((e = cudaStreamQuery((cudaStream_t)d->stream)) == cudaErrorNotReady) {
    if (now_ns() - t0 > STOP_GRACE_NS)
      return cudaq__fail(CUDAQ_ERR_CUDA,
                         "%s: the dispatch kernel did not exit within %llu s of the shutdown flag",
                         fn, STOP_GRACE_NS / 1000000000ull);
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  if (e != cudaSuccess)
    return cudaq__fail(CUDAQ_ERR_CUDA, "%s: the dispatch kernel failed: %s (%s)", fn,
                       cudaGetErrorName(e), cudaGetErrorString(e));
  return cudaq__ok();
}

void cudaq__device_release(cudaq_dispatcher_t *d) {
  if (d->stream) cudaStreamDestroy((cudaStream_t)d->stream);
  d->stream = NULL;
}
