/*
 * ringbuffer.c - producer / consumer helpers for the slot + flag protocol,
 * and the ring allocator.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "atomics.h"
#include "internal.h"

#ifdef CUDAQ_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static inline volatile uint64_t *rx_flags_h(const cudaq_ringbuffer_t *rb) {
  return rb->rx_flags_host ? rb->rx_flags_host : rb->rx_flags;
}
static inline volatile uint64_t *tx_flags_h(const cudaq_ringbuffer_t *rb) {
  return rb->tx_flags_host ? rb->tx_flags_host : rb->tx_flags;
}
static inline uint8_t *rx_data_h(const cudaq_ringbuffer_t *rb) {
  return rb->rx_data_host ? rb->rx_data_host : rb->rx_data;
}

/* Slot `slot_idx`'s first word (the request's magic), host view. */
static inline volatile uint32_t *slot_magic(const cudaq_ringbuffer_t *rb, uint32_t slot_idx) {
  return (volatile uint32_t *)(void *)(rx_data_h(rb) + (size_t)slot_idx * rb->rx_stride_sz);
}

cudaq_status_t cudaq_host_ringbuffer_write_rpc_request(const cudaq_ringbuffer_t *rb,
                                                       uint32_t slot_idx, uint32_t function_id,
                                                       const void *payload, uint32_t payload_len,
                                                       uint32_t request_id,
                                                       uint64_t ptp_timestamp) {
  static const char *fn = "cudaq_host_ringbuffer_write_rpc_request";
  if (!rb || !rx_data_h(rb)) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: ring is NULL", fn);
  if (!payload && payload_len)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: payload is NULL, payload_len %u", fn,
                       payload_len);
  if ((uint64_t)CUDAQ_RPC_HEADER_SIZE + payload_len > rb->rx_stride_sz)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: 24-byte header + %u-byte payload exceeds the %zu-byte slot", fn,
                       payload_len, rb->rx_stride_sz);
  uint8_t *slot = rx_data_h(rb) + (size_t)slot_idx * rb->rx_stride_sz;
  cudaq_rpc_header_t h = {CUDAQ_RPC_MAGIC_REQUEST, function_id, payload_len, request_id,
                          ptp_timestamp};
  /* The payload, the header after the magic, and the magic word last: a
   * dispatcher with header completion (a ring with CUDAQ_RX_COMPLETION_HEADER)
   * takes a line whose magic is a request's (and whose RX flag is set) for a
   * complete request. */
  if (payload_len) memcpy(slot + CUDAQ_RPC_HEADER_SIZE, payload, payload_len);
  memcpy(slot + sizeof h.magic, (const uint8_t *)&h + sizeof h.magic, sizeof h - sizeof h.magic);
  if (rb->completion == CUDAQ_RX_COMPLETION_HEADER)
    /* R1h publishes the request (payload and header) through its magic word
     * (slots of such a ring are on 128-byte lines, so the word is aligned);
     * pairs with A1h, the header-completion poll in the dispatch kernel
     * (dispatch_loop.cuh, poll_ready_slot and parse_request). */
    cudaq__store_release_u32(slot_magic(rb, slot_idx), h.magic);
  else
    memcpy(slot, &h.magic, sizeof h.magic); /* published by the RX flag (R1) */
  return cudaq__ok();
}

void cudaq_host_ringbuffer_signal_slot(const cudaq_ringbuffer_t *rb, uint32_t slot_idx) {
  if (!rb || !rx_flags_h(rb)) return; /* nothing to signal */
  /* R1 publishes the request bytes written into the slot; pairs with A1 in
   * the dispatcher (host loop or dispatch kernel). The value is the slot's
   * device-visible address, the spec's convention; dispatchers use it only
   * as "nonzero" and address the slot by its index. */
  cudaq__store_release_u64(&rx_flags_h(rb)[slot_idx],
                           (uint64_t)(uintptr_t)(rb->rx_data + (size_t)slot_idx * rb->rx_stride_sz));
}

cudaq_tx_status_t cudaq_host_ringbuffer_poll_tx_flag(const cudaq_ringbuffer_t *rb,
                                                     uint32_t slot_idx, int *out_cuda_error) {
  if (!rb || !tx_flags_h(rb)) return CUDAQ_TX_EMPTY;
  /* A2 pairs with R2 in the dispatcher or worker that answered the slot:
   * after a READY result the response bytes are visible to this thread (and,
   * on a ring with header completion, the slot's RX clear and consumed
   * magic word, stored before R2). */
  uint64_t v = cudaq__load_acquire_u64(&tx_flags_h(rb)[slot_idx]);
  if (v == 0) return CUDAQ_TX_EMPTY;
  if (v == CUDAQ_TX_FLAG_IN_FLIGHT) return CUDAQ_TX_IN_FLIGHT;
  if ((v & CUDAQ_TX_FLAG_ERROR_MASK) == CUDAQ_TX_FLAG_ERROR_TAG) {
    if (out_cuda_error) *out_cuda_error = (int)(uint32_t)(v & 0xFFFFFFFFull);
    return CUDAQ_TX_ERROR;
  }
  return CUDAQ_TX_READY;
}

int cudaq_host_ringbuffer_slot_available(const cudaq_ringbuffer_t *rb, uint32_t slot_idx) {
  if (!rb || !rx_flags_h(rb) || !tx_flags_h(rb)) return 0;
  /* A3 pairs with R3 (dispatcher cleared RX), R3d (a device-call kernel
   * took back the in-flight marker of a request it dropped) and R5
   * (consumer cleared TX: done reading the response); only then may the
   * producer overwrite the slot. While a dispatcher still reads a request
   * after clearing RX (the GPU kernels read the request after R3), TX holds
   * its in-flight marker, so the slot is not available until the response
   * is consumed. */
  if (cudaq__load_acquire_u64(&rx_flags_h(rb)[slot_idx]) != 0 ||
      cudaq__load_acquire_u64(&tx_flags_h(rb)[slot_idx]) != 0)
    return 0;
  /* Header completion: a dispatcher clears RX before its answer with no
   * in-flight marker, so both flags read 0 for a moment before TX is set;
   * the slot's magic word (CUDAQ_RPC_SLOT_CONSUMED from the take until
   * clear_slot zeroes it, after the answer) tells that moment from a free
   * slot. A3h pairs with R5h in cudaq_host_ringbuffer_clear_slot and R3h
   * in the kernel's drop (dispatch_loop.cuh). */
  return rb->completion != CUDAQ_RX_COMPLETION_HEADER || cudaq__load_acquire_u32(slot_magic(rb, slot_idx)) == 0;
}

void cudaq_host_ringbuffer_clear_slot(const cudaq_ringbuffer_t *rb, uint32_t slot_idx) {
  if (!rb || !tx_flags_h(rb)) return;
  /* Header completion: the slot's magic word zeroed first (R5h: ordered
   * before TX's clear by R5, so a producer that sees TX 0 sees it;
   * slot_available's A3h). */
  if (rb->completion == CUDAQ_RX_COMPLETION_HEADER && rx_data_h(rb))
    cudaq__store_release_u32(slot_magic(rb, slot_idx), 0);
  /* R5 says the consumer is done with the response; pairs with A3 in
   * cudaq_host_ringbuffer_slot_available (the producer). */
  cudaq__store_release_u64(&tx_flags_h(rb)[slot_idx], 0);
}

/* ---- allocation -------------------------------------------------------- */

/* One block per ring: [rx flags][tx flags][rx data][tx data], each part
 * 128-byte aligned (two cache lines: the adjacent-line prefetcher pairs
 * lines, so 128 keeps flags and data from sharing a pair). Allocated rings
 * are kept in a small registry so that free() can tell how a ring was
 * allocated and refuse one it did not allocate, without reading memory
 * outside the caller's ring. Not on any hot path. */
#define RING_ALIGN 128u

typedef struct ring_node {
  struct ring_node *next;
  void *base;             /* what to pass to free / cudaFreeHost */
  const void *rx_flags_host; /* the key */
  int mapped;             /* 1: cudaHostAlloc'ed */
} ring_node_t;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static ring_node_t *registry;

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* Finds the node of a ring and removes it from the registry. */
static ring_node_t *registry_take(const void *key) {
  ring_node_t *found = NULL;
  pthread_mutex_lock(&registry_lock);
  for (ring_node_t **pp = &registry; *pp; pp = &(*pp)->next) {
    if ((*pp)->rx_flags_host == key) {
      found = *pp;
      *pp = found->next;
      break;
    }
  }
  pthread_mutex_unlock(&registry_lock);
  return found;
}

#ifdef CUDAQ_HAVE_CUDA
static int cuda_device_usable(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
#endif

cudaq_status_t cudaq_host_ringbuffer_alloc(cudaq_ringbuffer_t *rb, uint32_t num_slots,
                                           uint32_t slot_size, uint32_t flags) {
  static const char *fn = "cudaq_host_ringbuffer_alloc";
  const uint32_t known = CUDAQ_RING_ALLOC_HOST | CUDAQ_RING_ALLOC_MAPPED | CUDAQ_RING_ALLOC_IN_PLACE |
                         CUDAQ_RING_ALLOC_HEADER_COMPLETION;
  if (!rb) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: rb is NULL", fn);
  if (num_slots == 0) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: num_slots is 0", fn);
  if (slot_size < CUDAQ_RPC_HEADER_SIZE)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: slot_size %u < the %u-byte header", fn,
                       slot_size, CUDAQ_RPC_HEADER_SIZE);
  if ((flags & ~known) ||
      ((flags & CUDAQ_RING_ALLOC_HOST) && (flags & CUDAQ_RING_ALLOC_MAPPED)))
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: bad flags 0x%x", fn, flags);
  const int in_place = (flags & CUDAQ_RING_ALLOC_IN_PLACE) != 0;
  const int header = (flags & CUDAQ_RING_ALLOC_HEADER_COMPLETION) != 0;
  if (header && (in_place || slot_size % CUDAQ_HEADER_LINE))
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: header completion needs slots on %u-byte lines and separate TX data "
                       "(slot_size %u%s)", fn, CUDAQ_HEADER_LINE, slot_size, in_place ? ", in place" : "");

  int mapped = 0;
  if (flags & CUDAQ_RING_ALLOC_MAPPED) {
#ifndef CUDAQ_HAVE_CUDA
    return cudaq__fail(CUDAQ_ERR_UNSUPPORTED, "%s: mapped memory needs a build with CUDA", fn);
#else
    mapped = 1;
#endif
  }
#ifdef CUDAQ_HAVE_CUDA
  if (!(flags & (CUDAQ_RING_ALLOC_HOST | CUDAQ_RING_ALLOC_MAPPED))) mapped = cuda_device_usable();
#endif

  const size_t stride = round_up(slot_size, 8);
  size_t flags_raw, data_raw;
  /* Checked arithmetic: a huge ring must be refused, not wrapped to a tiny
   * allocation. */
  if (__builtin_mul_overflow((size_t)num_slots, sizeof(uint64_t), &flags_raw) ||
      __builtin_mul_overflow((size_t)num_slots, stride, &data_raw) ||
      flags_raw > SIZE_MAX / 4 - RING_ALIGN || data_raw > SIZE_MAX / 4 - RING_ALIGN)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: %u slots of %u bytes overflow the address space",
                       fn, num_slots, slot_size);
  const size_t flags_bytes = round_up(flags_raw, RING_ALIGN);
  const size_t data_bytes = round_up(data_raw, RING_ALIGN);
  const size_t total = 2 * flags_bytes + (in_place ? 1 : 2) * data_bytes;
  ring_node_t *node = calloc(1, sizeof *node);
  if (!node) return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: out of memory", fn);
  uint8_t *base = NULL;
  if (mapped) {
#ifdef CUDAQ_HAVE_CUDA
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, total, cudaHostAllocMapped);
    if (e != cudaSuccess) {
      free(node);
      return cudaq__fail(CUDAQ_ERR_CUDA, "%s: cudaHostAlloc(%zu bytes, mapped): %s", fn, total,
                         cudaGetErrorString(e));
    }
    base = p;
#endif
  } else {
    base = aligned_alloc(RING_ALIGN, total);
    if (!base) {
      free(node);
      return cudaq__fail(CUDAQ_ERR_INTERNAL, "%s: out of memory (%zu bytes)", fn, total);
    }
  }
  memset(base, 0, total);
  uint8_t *h_rx_flags = base;
  uint8_t *h_tx_flags = h_rx_flags + flags_bytes;
  uint8_t *h_rx_data = h_tx_flags + flags_bytes;
  uint8_t *h_tx_data = in_place ? h_rx_data : h_rx_data + data_bytes;
  uint8_t *d_base = base;
#ifdef CUDAQ_HAVE_CUDA
  if (mapped) {
    void *dp = NULL;
    cudaError_t e = cudaHostGetDevicePointer(&dp, base, 0);
    if (e != cudaSuccess) {
      cudaFreeHost(base);
      free(node);
      return cudaq__fail(CUDAQ_ERR_CUDA, "%s: cudaHostGetDevicePointer: %s", fn,
                         cudaGetErrorString(e));
    }
    d_base = dp;
  }
#endif
  memset(rb, 0, sizeof *rb);
  rb->rx_flags_host = (volatile uint64_t *)(void *)h_rx_flags;
  rb->tx_flags_host = (volatile uint64_t *)(void *)h_tx_flags;
  rb->rx_data_host = h_rx_data;
  rb->tx_data_host = h_tx_data;
  rb->rx_flags = (volatile uint64_t *)(void *)(d_base + (h_rx_flags - base));
  rb->tx_flags = (volatile uint64_t *)(void *)(d_base + (h_tx_flags - base));
  rb->rx_data = d_base + (h_rx_data - base);
  rb->tx_data = d_base + (h_tx_data - base);
  rb->rx_stride_sz = stride;
  rb->tx_stride_sz = stride;
  rb->completion = header ? CUDAQ_RX_COMPLETION_HEADER : CUDAQ_RX_COMPLETION_FLAG;
  node->base = base;
  node->rx_flags_host = h_rx_flags;
  node->mapped = mapped;
  pthread_mutex_lock(&registry_lock);
  node->next = registry;
  registry = node;
  pthread_mutex_unlock(&registry_lock);
  return cudaq__ok();
}

cudaq_status_t cudaq_host_ringbuffer_free(cudaq_ringbuffer_t *rb) {
  static const char *fn = "cudaq_host_ringbuffer_free";
  if (!rb) return cudaq__fail(CUDAQ_ERR_INVALID_ARG, "%s: rb is NULL", fn);
  if (!rx_flags_h(rb)) return cudaq__ok(); /* zeroed ring: nothing to free */
  ring_node_t *node = registry_take((const void *)(uintptr_t)rx_flags_h(rb));
  if (!node)
    return cudaq__fail(CUDAQ_ERR_INVALID_ARG,
                       "%s: this ring was not allocated by cudaq_host_ringbuffer_alloc "
                       "(or was freed already)", fn);
  memset(rb, 0, sizeof *rb);
  void *base = node->base;
  int mapped = node->mapped;
  free(node);
  if (mapped) {
#ifdef CUDAQ_HAVE_CUDA
    cudaError_t e = cudaFreeHost(base);
    if (e != cudaSuccess)
      return cudaq__fail(CUDAQ_ERR_CUDA, "%s: cudaFreeHost: %s", fn, cudaGetErrorString(e));
#endif
  } else {
    free(base);
  }
  return cudaq__ok();
}

int cudaq_host_ringbuffer_is_mapped(const cudaq_ringbuffer_t *rb) {
  if (!rb || !rx_flags_h(rb)) return 0;
  const void *key = (const void *)(uintptr_t)rx_flags_h(rb);
  int mapped = 0;
  pthread_mutex_lock(&registry_lock);
  for (const ring_node_t *n = registry; n; n = n->next)
    if (n->rx_flags_host == key) mapped = n->mapped;
  pthread_mutex_unlock(&registry_lock);
  return mapped;
}
