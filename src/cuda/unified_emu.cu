/*
 * unified_emu.cu - unified dispatch over the emulated NIC transport
 * (see emu_transport.h). One thread polls one completion word; the request
 * is handled in place, so per request the kernel makes one dependent read
 * of the counter and one of the frame, and two posted writes (response,
 * send counter).
 */
#include <cuda/atomic>

#include <stdlib.h>
#include <string.h>

#include "cudaq/realtime/dispatch_kernel.h"
#include "cudaq/realtime/emu_transport.h"
#include "dispatch_internal.cuh"

struct cudaq_emu_transport {
  /* Device views (the kernel's). */
  uint8_t *frames_dev;
  uint64_t *delivered_dev; /* NIC -> kernel: frames delivered so far */
  uint64_t *sent_dev;      /* kernel -> NIC: frames answered so far */
  uint32_t frame_size;
  uint32_t num_frames;
  /* Host views (the NIC thread's). */
  uint8_t *base_host;
  uint8_t *frames_host;
  uint64_t *delivered_host;
  uint64_t *sent_host;
  uint64_t next_send;    /* NIC-thread private */
  uint64_t next_receive; /* NIC-thread private */
};

namespace {


struct unified_params {
  uint8_t *frames;
  uint64_t *delivered;
  uint64_t *sent;
  uint32_t frame_size;
  uint32_t num_frames;
  const cudaq_function_entry_t *table;
  uint32_t table_count;
  int *shutdown;
  uint64_t *stats;
  cudaq__device_state *state;
};

__global__ void unified_emu_kernel(unified_params p) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return; /* single thread, single block (spec) */
  cudaq__device_state *c = p.state;
  /* The transport keeps the position: frames below `sent` were answered by
   * an earlier launch on this transport (0 for a fresh one). Only this
   * kernel writes it, and the previous launch has finished. */
  uint64_t next = cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p.sent).load(cuda::memory_order_relaxed);
  uint64_t drain_to = UINT64_MAX; /* set at shutdown: what was delivered by then */
  uint32_t iter = 0;
  for (;;) {
    /* Shutdown is checked every 64 loop iterations, busy or idle. Frames
     * delivered before it was seen are still answered (U1 below makes them
     * visible); later ones are left to the next launch. */
    if (drain_to == UINT64_MAX && ++iter % 64 == 0 &&
        cuda::atomic_ref<int, cuda::thread_scope_system>(*p.shutdown).load(cuda::memory_order_relaxed))
      drain_to = cudaq__load_acquire_sys(p.delivered); /* U1 */
    if (next == drain_to) break;
    /* U1 pairs with N1 in cudaq_emu_nic_send: frames below `delivered`
     * are complete and visible. */
    uint64_t delivered = cudaq__load_acquire_sys(p.delivered);
    if (delivered == next) continue;
    uint8_t *f = p.frames + (size_t)(next % p.num_frames) * p.frame_size;
    uint32_t *h = reinterpret_cast<uint32_t *>(f);
    /* Header fields into registers before the handler overwrites the frame. */
    const uint32_t magic = h[0], fid = h[1], arg_len = h[2], rid = h[3], t0 = h[4], t1 = h[5];
    const cudaq_function_entry_t *e = cudaq__find_entry(p.table, p.table_count, fid);
    int32_t status = 0;
    uint32_t len = 0;
    if (magic != CUDAQ_RPC_MAGIC_REQUEST || !e) {
      /* Dropped: the frame goes back without a response (result_len 0,
       * magic left as it was, so the NIC can tell). */
      cudaq__bump(magic != CUDAQ_RPC_MAGIC_REQUEST ? &c->dropped_bad_magic : &c->dropped_unknown_function);
    } else {
      const uint32_t room = p.frame_size - CUDAQ_RPC_HEADER_SIZE;
      status = cudaq__entry_status(cudaq__arg_rule_of(e), e->dispatch_mode, e->handler.device_fn_ptr != nullptr,
                                   CUDAQ_DISPATCH_DEVICE_CALL, arg_len, room);
      if (status == 0) {
        auto fn = reinterpret_cast<cudaq_device_rpc_fn_t>(e->handler.device_fn_ptr);
        status = fn(f + CUDAQ_RPC_HEADER_SIZE, f + CUDAQ_RPC_HEADER_SIZE, arg_len, room, &len);
        if (len > room) {
          status = CUDAQ_RPC_ERR_RESULT_TOO_LARGE;
          len = 0;
        }
      }
      if (status < 0 && status >= CUDAQ_RPC_ERR_LAUNCH_FAILED) len = 0;
      h[0] = CUDAQ_RPC_MAGIC_RESPONSE;
      h[1] = (uint32_t)status;
      h[2] = len;
      h[3] = rid;
      h[4] = t0;
      h[5] = t1;
      cudaq__count_status(c, status);
      cudaq__count_processed(c, p.stats, 1);
    }
    ++next;
    /* U2 publishes the response written in place; pairs with N2 in
     * cudaq_emu_nic_poll. */
    cudaq__store_release_sys(p.sent, next);
  }
}

} // namespace

extern "C" cudaq_status_t cudaq_emu_transport_create(uint32_t num_frames, uint32_t frame_size,
                                                     cudaq_emu_transport_t **out) {
  if (!out || num_frames == 0 || frame_size < CUDAQ_RPC_HEADER_SIZE || frame_size % 8) return CUDAQ_ERR_INVALID_ARG;
  *out = nullptr;
  cudaq_emu_transport_t *t = static_cast<cudaq_emu_transport_t *>(calloc(1, sizeof *t));
  if (!t) return CUDAQ_ERR_INTERNAL;
  const size_t ctrl = 256; /* the two counters on separate 128-byte lines */
  const size_t bytes = ctrl + (size_t)num_frames * frame_size;
  void *host = nullptr, *dev = nullptr;
  if (cudaHostAlloc(&host, bytes, cudaHostAllocMapped) != cudaSuccess) {
    free(t);
    return CUDAQ_ERR_CUDA;
  }
  memset(host, 0, bytes);
  if (cudaHostGetDevicePointer(&dev, host, 0) != cudaSuccess) {
    cudaFreeHost(host);
    free(t);
    return CUDAQ_ERR_CUDA;
  }
  t->base_host = static_cast<uint8_t *>(host);
  t->delivered_host = reinterpret_cast<uint64_t *>(t->base_host);
  t->sent_host = reinterpret_cast<uint64_t *>(t->base_host + 128);
  t->frames_host = t->base_host + ctrl;
  uint8_t *d = static_cast<uint8_t *>(dev);
  t->delivered_dev = reinterpret_cast<uint64_t *>(d);
  t->sent_dev = reinterpret_cast<uint64_t *>(d + 128);
  t->frames_dev = d + ctrl;
  t->frame_size = frame_size;
  t->num_frames = num_frames;
  *out = t;
  return CUDAQ_OK;
}

extern "C" cudaq_status_t cudaq_emu_transport_destroy(cudaq_emu_transport_t *t) {
  if (!t) return CUDAQ_ERR_INVALID_ARG;
  cudaError_t e = cudaFreeHost(t->base_host);
  free(t);
  return e == cudaSuccess ? CUDAQ_OK : CUDAQ_ERR_CUDA;
}

extern "C" void *cudaq_emu_transport_ctx(cudaq_emu_transport_t *t) { return t; }

extern "C" void cudaq_launch_unified_dispatch_emu(void *transport_ctx, cudaq_function_entry_t *function_table,
                                                  size_t func_count, volatile int *shutdown_flag,
                                                  uint64_t *stats, cudaStream_t stream) {
  cudaq_emu_transport_t *t = static_cast<cudaq_emu_transport_t *>(transport_ctx);
  if (!t || !function_table || !func_count || func_count > UINT32_MAX || !shutdown_flag || !stats) {
    cudaq__report_bad_launch();
    return;
  }
  unified_params p;
  p.frames = t->frames_dev;
  p.delivered = t->delivered_dev;
  p.sent = t->sent_dev;
  p.frame_size = t->frame_size;
  p.num_frames = t->num_frames;
  p.table = function_table;
  p.table_count = (uint32_t)func_count;
  p.shutdown = const_cast<int *>(shutdown_flag);
  p.stats = stats;
  p.state = cudaq__state_for_launch(stats);
  if (!p.state) {
    cudaq__report_bad_launch();
    return;
  }
  unified_emu_kernel<<<1, 1, 0, stream>>>(p);
}

/* Host side. Only the NIC thread touches next_send / next_receive; the
 * counters are system-scope atomics on the mapped words (libcu++ on the host). */
extern "C" cudaq_status_t cudaq_emu_nic_send(cudaq_emu_transport_t *t, uint32_t function_id,
                                             const void *payload, uint32_t len, uint32_t request_id,
                                             uint64_t ptp_timestamp) {
  if (!t || (!payload && len) || (uint64_t)len + CUDAQ_RPC_HEADER_SIZE > t->frame_size)
    return CUDAQ_ERR_INVALID_ARG;
  if (t->next_send - t->next_receive >= t->num_frames) return CUDAQ_ERR_UNSUPPORTED; /* ring full */
  uint8_t *f = t->frames_host + (size_t)(t->next_send % t->num_frames) * t->frame_size;
  cudaq_rpc_header_t h = {CUDAQ_RPC_MAGIC_REQUEST, function_id, len, request_id, ptp_timestamp};
  memcpy(f, &h, sizeof h);
  if (len) memcpy(f + CUDAQ_RPC_HEADER_SIZE, payload, len);
  ++t->next_send;
  /* N1 delivers the frame; pairs with U1 in the unified kernel. */
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*t->delivered_host)
      .store(t->next_send, cuda::memory_order_release);
  return CUDAQ_OK;
}

extern "C" const uint8_t *cudaq_emu_nic_poll(cudaq_emu_transport_t *t) {
  if (!t || t->next_receive == t->next_send) return nullptr;
  /* N2 pairs with U2: the response bytes are visible once sent covers it. */
  if (cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*t->sent_host).load(cuda::memory_order_acquire) <=
      t->next_receive)
    return nullptr;
  return t->frames_host + (size_t)(t->next_receive % t->num_frames) * t->frame_size;
}

extern "C" void cudaq_emu_nic_release(cudaq_emu_transport_t *t) {
  if (t && t->next_receive < t->next_send) ++t->next_receive;
}
