/*
 * cudaq/realtime/cudaq_realtime.h - the CUDA-Q realtime dispatcher host API.
 *
 * Spec: realtime-host-api.txt. The published names (cudaq_*, CUDAQ_*) are
 * kept, so code written against the specification compiles against this
 * header. Additions of this implementation are marked "(extension)".
 *
 * A manager owns dispatchers. A dispatcher is wired to a ring buffer (RX/TX
 * flags + slots), a function table and control words, then started and
 * stopped. It runs on one of two paths:
 *   CUDAQ_DISPATCH_PATH_HOST    a host thread polls the RX flags and runs
 *                               CUDAQ_DISPATCH_HOST_CALL handlers;
 *   CUDAQ_DISPATCH_PATH_DEVICE  a persistent GPU kernel (launch_fn) does.
 *
 * Threading: create / wire / start / stop / destroy are called from one
 * thread (the spec's rule). The ring-buffer helpers are called by the
 * producer and the consumer; each slot has one producer and one consumer.
 *
 * Compiles as C11 and C++17 without the CUDA headers; with them, the CUDA
 * types below are the same types.
 */
#ifndef CUDAQ_REALTIME_CUDAQ_REALTIME_H
#define CUDAQ_REALTIME_CUDAQ_REALTIME_H

#include <stddef.h>
#include <stdint.h>

#include "cudaq/realtime/rpc_wire_format.h"

/* The CUDA handle types, declared exactly as driver_types.h declares them
 * (a repeated identical typedef is valid C11 and C++), so this header does
 * not need the CUDA toolkit. */
struct CUstream_st;
struct CUgraphExec_st;
struct CUgraph_st;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef struct CUgraph_st *cudaGraph_t;

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Handles and enums                                                        */
/* ------------------------------------------------------------------------ */
typedef struct cudaq_dispatch_manager_t cudaq_dispatch_manager_t;
typedef struct cudaq_dispatcher_t cudaq_dispatcher_t;

typedef enum {
  CUDAQ_KERNEL_REGULAR = 0,
  CUDAQ_KERNEL_COOPERATIVE = 1,
  CUDAQ_KERNEL_UNIFIED = 2
} cudaq_kernel_type_t;

typedef enum {
  CUDAQ_DISPATCH_DEVICE_CALL = 0, /* __device__ handler called by the dispatch kernel */
  CUDAQ_DISPATCH_GRAPH_LAUNCH = 1, /* CUDA graph launched per request */
  CUDAQ_DISPATCH_HOST_CALL = 2     /* host function called by the dispatcher thread */
} cudaq_dispatch_mode_t;

typedef enum {
  CUDAQ_DISPATCH_PATH_DEVICE = 0, /* persistent GPU dispatch kernel */
  CUDAQ_DISPATCH_PATH_HOST = 1    /* host dispatcher thread */
} cudaq_dispatch_path_t;

/* State of a TX flag, from cudaq_host_ringbuffer_poll_tx_flag(). */
typedef enum {
  CUDAQ_TX_EMPTY = 0,     /* 0: no response yet */
  CUDAQ_TX_IN_FLIGHT = 1, /* CUDAQ_TX_FLAG_IN_FLIGHT: launched, not finished */
  CUDAQ_TX_ERROR = 2,     /* 0xDEAD in bits 63..48, CUDA error below */
  CUDAQ_TX_READY = 3      /* any other value: the response is in the TX slot */
} cudaq_tx_status_t;

#define CUDAQ_TX_FLAG_IN_FLIGHT 0xEEEEEEEEEEEEEEEEull
#define CUDAQ_TX_FLAG_ERROR_TAG 0xDEAD000000000000ull
#define CUDAQ_TX_FLAG_ERROR_MASK 0xFFFF000000000000ull
/* TX flag value that reports CUDA error `err` for a slot. */
#define CUDAQ_TX_FLAG_ERROR(err) (CUDAQ_TX_FLAG_ERROR_TAG | ((uint64_t)(uint32_t)(err)))

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */
/* ------------------------------------------------------------------------ */
typedef struct {
  int device_id;                 /* CUDA device (default 0) */
  uint32_t num_blocks;           /* dispatch grid size (0 means the default, 1) */
  uint32_t threads_per_block;    /* dispatch block size (0 means the default, 32) */
  uint32_t num_slots;            /* ring slots (required, > 0) */
  uint32_t slot_size;            /* bytes per slot (required, >= CUDAQ_RPC_HEADER_SIZE) */
  uint32_t vp_id;                /* transport channel tag (default 0) */
  cudaq_kernel_type_t kernel_type;     /* default CUDAQ_KERNEL_REGULAR */
  cudaq_dispatch_mode_t dispatch_mode; /* default CUDAQ_DISPATCH_DEVICE_CALL */
  cudaq_dispatch_path_t dispatch_path; /* (extension of the published API's backend) */
} cudaq_dispatcher_config_t;

/* Ring buffer: flags are uint64 arrays indexed by slot; slot i of the data
 * starts at data + i * stride. The first six fields are the views the
 * dispatcher uses (device-visible on the device path); the _host fields are
 * the same memory as the host sees it (on the host path the two views are
 * the same pointers; a NULL _host field means "same as the device view").
 * RX flag: nonzero = the slot holds a request (by convention the slot's
 * address). TX flag: see cudaq_tx_status_t. The `volatile` qualifiers are
 * the published types; all accesses inside the library are C11 atomics. */
typedef struct {
  volatile uint64_t *rx_flags;
  volatile uint64_t *tx_flags;
  uint8_t *rx_data;
  uint8_t *tx_data;
  size_t rx_stride_sz;
  size_t tx_stride_sz;
  volatile uint64_t *rx_flags_host;
  volatile uint64_t *tx_flags_host;
  uint8_t *rx_data_host;
  uint8_t *tx_data_host;
  /* How a request's completion is seen (extension; 0, the spec's flag
   * protocol, when the struct is zeroed): cudaq_rx_completion_t. */
  uint32_t completion;
} cudaq_ringbuffer_t;

/* Request completion (extension). FLAG: the spec's protocol (a request is
 * complete once its RX flag is set; the dispatcher reads it after the
 * flag). HEADER: the producer writes the request with its header's magic
 * word last (cudaq_host_ringbuffer_write_rpc_request does) and signals RX
 * as always; a GPU device-call dispatcher reads each slot's first 128-byte
 * line with the RX flag and serves a request whose magic it sees there
 * without a second read (one PCIe round trip less a request). It marks the
 * slot's magic word CUDAQ_RPC_SLOT_CONSUMED with its answer, and the slot
 * is free again once the consumer has released it with
 * cudaq_host_ringbuffer_clear_slot (which zeroes the word):
 * cudaq_host_ringbuffer_slot_available checks the word on such a ring.
 * Needs slots on 128-byte lines, a zeroed ring, separate TX data, and the
 * library's device-call launch functions (regular or cooperative);
 * CUDAQ_RING_ALLOC_HEADER_COMPLETION allocates one. */
#define CUDAQ_HEADER_LINE 128u /* bytes of a slot read with its RX flag under header completion */
/* 1 if RX slots at rx_data, rx_stride_sz bytes apart, with TX data at
 * tx_data, can be served with header completion: every slot on a
 * CUDAQ_HEADER_LINE-byte line, TX data separate (extension). */
static inline int cudaq_header_completion_layout_ok(const uint8_t *rx_data, const uint8_t *tx_data,
                                                    size_t rx_stride_sz) {
  return rx_stride_sz % CUDAQ_HEADER_LINE == 0 && (uintptr_t)rx_data % CUDAQ_HEADER_LINE == 0 && rx_data != tx_data;
}
typedef enum {
  CUDAQ_RX_COMPLETION_FLAG = 0,
  CUDAQ_RX_COMPLETION_HEADER = 1,
} cudaq_rx_completion_t;

/* ------------------------------------------------------------------------ */
/* Handlers and the function table                                          */
/* ------------------------------------------------------------------------ */

/* The one handler calling convention, for device and host handlers alike:
 *   args            the request payload (arg_len bytes after the header)
 *   result          the result area right after the response header
 *   max_result_len  bytes available at result
 *   *result_len     set by the handler to the bytes it wrote (preset to 0)
 * Returns the response status: 0 success, > 0 a handler error.
 * The dispatcher validates the request and writes the response header itself
 * (request_id and ptp_timestamp echoed). When TX is RX (in-place ring),
 * result == args: both start right after the 24-byte header, so an in-place
 * handler must read an argument before it overwrites it. */
typedef int (*cudaq_host_rpc_fn_t)(const void *args, void *result, uint32_t arg_len,
                                   uint32_t max_result_len, uint32_t *result_len);

typedef struct {
  union {
    void *device_fn_ptr;         /* CUDAQ_DISPATCH_DEVICE_CALL */
    cudaGraphExec_t graph_exec;  /* CUDAQ_DISPATCH_GRAPH_LAUNCH */
    cudaq_host_rpc_fn_t host_fn; /* CUDAQ_DISPATCH_HOST_CALL */
  } handler;
  uint32_t function_id;          /* cudaq_fnv1a_hash(handler name) */
  uint8_t dispatch_mode;         /* cudaq_dispatch_mode_t */
  uint8_t reserved[3];
  cudaq_handler_schema_t schema;
} cudaq_function_entry_t;

typedef struct {
  cudaq_function_entry_t *entries; /* device pointer on the device path, host pointer on the host path */
  uint32_t count;
} cudaq_function_table_t;

/* Launch function of the 3-kernel (ring-buffer) device path. */
typedef void (*cudaq_dispatch_launch_fn_t)(
    volatile uint64_t *rx_flags, volatile uint64_t *tx_flags, uint8_t *rx_data, uint8_t *tx_data,
    size_t rx_stride_sz, size_t tx_stride_sz, cudaq_function_entry_t *function_table,
    size_t func_count, volatile int *shutdown_flag, uint64_t *stats, size_t num_slots,
    uint32_t num_blocks, uint32_t threads_per_block, cudaStream_t stream);

/* Launch function of unified mode (transport built into the kernel). */
typedef void (*cudaq_unified_launch_fn_t)(void *transport_ctx,
                                          cudaq_function_entry_t *function_table,
                                          size_t func_count, volatile int *shutdown_flag,
                                          uint64_t *stats, cudaStream_t stream);

typedef struct {
  cudaq_unified_launch_fn_t launch_fn;
  void *transport_ctx;
} cudaq_unified_dispatch_ctx_t;

/* ------------------------------------------------------------------------ */
/* Counters (extension)                                                     */
/* ------------------------------------------------------------------------ */
/* Every request the dispatcher consumes is counted exactly once:
 * consumed = processed + dropped_bad_magic + dropped_unknown_function.
 * processed counts requests answered with a response, whatever its status;
 * the error counters break down the answered ones with a negative status. */
typedef struct {
  uint64_t processed;                /* answered (also in stats[0]) */
  uint64_t dropped_bad_magic;        /* consumed and cleared, no response */
  uint64_t dropped_unknown_function; /* consumed and cleared, no response */
  uint64_t err_payload_too_large;    /* answered CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE */
  uint64_t err_arg_len_mismatch;     /* answered CUDAQ_RPC_ERR_ARG_LEN_MISMATCH */
  uint64_t err_result_too_large;     /* answered CUDAQ_RPC_ERR_RESULT_TOO_LARGE */
  uint64_t err_unsupported_mode;     /* answered CUDAQ_RPC_ERR_UNSUPPORTED_MODE */
  uint64_t handler_errors;           /* answered with the handler's status > 0 */
} cudaq_dispatcher_counters_t;

/* ------------------------------------------------------------------------ */
/* Manager and dispatcher lifecycle                                         */
/* ------------------------------------------------------------------------ */

/* Creates a manager. Returns CUDAQ_OK, CUDAQ_ERR_INVALID_ARG (out_mgr NULL),
 * CUDAQ_ERR_INTERNAL (out of memory). */
cudaq_status_t cudaq_dispatch_manager_create(cudaq_dispatch_manager_t **out_mgr);

/* Destroys a manager; dispatchers it still owns are stopped and destroyed.
 * Returns CUDAQ_OK, CUDAQ_ERR_INVALID_ARG (mgr NULL), or the first error of
 * stopping a dispatcher (everything is released regardless). */
cudaq_status_t cudaq_dispatch_manager_destroy(cudaq_dispatch_manager_t *mgr);

/* Fills *config with the spec's defaults (extension): device 0, 1 block of
 * 32 threads, vp 0, regular kernel, device call, device path; num_slots and
 * slot_size 0 (required). Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG. */
cudaq_status_t cudaq_dispatcher_config_init(cudaq_dispatcher_config_t *config);

/* Creates a dispatcher owned by mgr and validates the configuration.
 * Returns CUDAQ_OK; CUDAQ_ERR_INVALID_ARG for a NULL pointer, an unknown
 * enum value, num_slots == 0 or slot_size < 24 (both allowed to be 0 for a
 * unified kernel), a negative device_id, or a unified / cooperative kernel
 * on the host path; CUDAQ_ERR_INTERNAL (out of memory). */
cudaq_status_t cudaq_dispatcher_create(cudaq_dispatch_manager_t *mgr,
                                       const cudaq_dispatcher_config_t *config,
                                       cudaq_dispatcher_t **out_dispatcher);

/* Stops the dispatcher if it runs, then frees it. Returns CUDAQ_OK,
 * CUDAQ_ERR_INVALID_ARG (NULL), or the error of the stop. */
cudaq_status_t cudaq_dispatcher_destroy(cudaq_dispatcher_t *dispatcher);

/* Wires the ring. A request's payload may use its whole RX slot:
 * arg_len <= rx_stride_sz - 24 (the same limit on every path).
 * Returns CUDAQ_OK; CUDAQ_ERR_INVALID_ARG for a NULL dispatcher or ring, a
 * NULL flag or data pointer, rx and tx flags at the same address, an
 * rx_stride_sz smaller than the config's slot_size or a tx_stride_sz below
 * 24 (or either 4 GiB or more), an in-place ring (tx_data == rx_data) with
 * different strides, on the device path a stride that is not a multiple of
 * 4 or memory the GPU cannot read, or a running dispatcher. */
cudaq_status_t cudaq_dispatcher_set_ringbuffer(cudaq_dispatcher_t *dispatcher,
                                               const cudaq_ringbuffer_t *ringbuffer);

/* Wires the function table. On the host path the entries are copied and
 * checked (valid dispatch mode, valid schema, a handler pointer, no
 * duplicate function_id); on the device path the pointer is kept and the
 * entries are read once to refuse duplicate function_ids (write them, and
 * synchronise the writer, before this call). Every dispatcher serves a
 * request with the first entry of its function_id.
 * Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG (naming the bad entry and id
 * in cudaq_last_error(); on the device path also memory the GPU cannot
 * read, or a failed read); CUDAQ_ERR_INTERNAL (out of memory). */
cudaq_status_t cudaq_dispatcher_set_function_table(cudaq_dispatcher_t *dispatcher,
                                                   const cudaq_function_table_t *table);

/* Wires the shutdown flag (nonzero = stop) and the stats buffer (stats[0]
 * = processed count; at least one uint64_t). Both stay the caller's and
 * must outlive the dispatcher. Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG. */
cudaq_status_t cudaq_dispatcher_set_control(cudaq_dispatcher_t *dispatcher,
                                            volatile int *shutdown_flag, uint64_t *stats);

/* Wires the device-path launch function. Returns CUDAQ_OK or
 * CUDAQ_ERR_INVALID_ARG (NULL, or a running dispatcher). */
cudaq_status_t cudaq_dispatcher_set_launch_fn(cudaq_dispatcher_t *dispatcher,
                                              cudaq_dispatch_launch_fn_t launch_fn);

/* Wires unified mode (kernel_type CUDAQ_KERNEL_UNIFIED only). Returns
 * CUDAQ_OK or CUDAQ_ERR_INVALID_ARG. */
cudaq_status_t cudaq_dispatcher_set_unified_launch(cudaq_dispatcher_t *dispatcher,
                                                   cudaq_unified_launch_fn_t unified_launch_fn,
                                                   void *transport_ctx);

/* Pins the host dispatcher thread to one CPU core (extension); -1 (the
 * default) lets it run on every CPU rather than inherit the caller's
 * affinity. Takes effect at the next start. Returns CUDAQ_OK or
 * CUDAQ_ERR_INVALID_ARG (NULL, core < -1 or not an online CPU). */
cudaq_status_t cudaq_dispatcher_set_host_affinity(cudaq_dispatcher_t *dispatcher, int cpu_core);

/* Starts dispatching: clears *shutdown_flag, then starts the host thread or
 * launches the kernel. Returns CUDAQ_OK; CUDAQ_ERR_INVALID_ARG if the
 * dispatcher is not fully wired or already running; CUDAQ_ERR_UNSUPPORTED
 * for the device path in a build without CUDA; CUDAQ_ERR_INTERNAL if the
 * thread cannot be created; CUDAQ_ERR_CUDA for a CUDA failure. */
cudaq_status_t cudaq_dispatcher_start(cudaq_dispatcher_t *dispatcher);

/* Raises the shutdown flag and waits for the dispatcher to exit. Requests
 * whose RX flag is already set when stop is called are still answered
 * (drained) before it returns. Idempotent: stopping a stopped or never
 * started dispatcher returns CUDAQ_OK. On the device path it waits for the
 * stream the launch function was given (a launch function must launch on
 * it) for at most 10 s. Returns CUDAQ_ERR_INVALID_ARG (NULL),
 * CUDAQ_ERR_INTERNAL (joining the host thread failed) or CUDAQ_ERR_CUDA (a
 * CUDA failure, or the kernel did not exit in time: it is then still
 * considered running). */
cudaq_status_t cudaq_dispatcher_stop(cudaq_dispatcher_t *dispatcher);

/* Raises (value nonzero) or clears (0) the shutdown flag of a dispatch
 * kernel or dispatch graph launched without a dispatcher (extension), and
 * never through a stream the kernel may occupy: through the flag's host
 * view when it is mapped pinned or managed memory (a release store), else
 * with a copy on a private non-blocking stream. A copy or memset of the
 * flag queued on the stream a persistent kernel or the dispatch graph runs
 * in waits for it to exit, and it waits for the flag: a deadlock this call
 * cannot cause. It does not wait for the kernel: synchronise its stream
 * next. cudaq_dispatcher_stop raises a dispatcher's flag the same way.
 * Returns CUDAQ_OK; CUDAQ_ERR_INVALID_ARG (NULL, or memory the GPU cannot
 * read); CUDAQ_ERR_UNSUPPORTED (a build without CUDA); CUDAQ_ERR_CUDA. */
cudaq_status_t cudaq_dispatch_set_shutdown_flag(volatile int *shutdown_flag, int value);

/* Reads stats[0], the number of processed (answered) requests. Exact once
 * the dispatcher is stopped or idle (one kernel block: its first poll that
 * finds no request; several: 32 idle polls); while requests arrive back to
 * back the device-call kernels update it every 64 answers per polling block
 * (the count is kept off the path between a response and the next poll), so
 * it may lag by up to 63 per block. Returns CUDAQ_OK or
 * CUDAQ_ERR_INVALID_ARG (NULL, or no stats buffer wired). */
cudaq_status_t cudaq_dispatcher_get_processed(cudaq_dispatcher_t *dispatcher,
                                              uint64_t *out_packets);

/* Reads all counters (extension). Safe while running (each value is a
 * consistent snapshot of itself, not of the set). On the device path the
 * counters live in device memory kept by the dispatch library. Returns
 * CUDAQ_OK; CUDAQ_ERR_INVALID_ARG (NULL, no control words, no counters for
 * this stats buffer, or reading them failed); CUDAQ_ERR_UNSUPPORTED (device
 * path without the dispatch library linked). */
cudaq_status_t cudaq_dispatcher_get_counters(cudaq_dispatcher_t *dispatcher,
                                             cudaq_dispatcher_counters_t *out);

/* ------------------------------------------------------------------------ */
/* Ring-buffer helpers (producer and consumer side)                         */
/* ------------------------------------------------------------------------ */

/* Writes header + payload into RX slot slot_idx (host view). Returns
 * CUDAQ_OK; CUDAQ_ERR_INVALID_ARG for a NULL ring, a NULL payload with a
 * nonzero length, or 24 + payload_len > rx_stride_sz. */
cudaq_status_t cudaq_host_ringbuffer_write_rpc_request(const cudaq_ringbuffer_t *rb,
                                                       uint32_t slot_idx, uint32_t function_id,
                                                       const void *payload, uint32_t payload_len,
                                                       uint32_t request_id,
                                                       uint64_t ptp_timestamp);

/* The slot helpers below take slot_idx < the ring's slot count on trust
 * (the ring struct does not carry it; checking would cost the hot path a
 * lookup). A NULL ring is ignored (poll reports CUDAQ_TX_EMPTY,
 * slot_available 0).
 * Publishes slot slot_idx to the dispatcher: stores the slot's
 * device-visible address into its RX flag with release ordering. */
void cudaq_host_ringbuffer_signal_slot(const cudaq_ringbuffer_t *rb, uint32_t slot_idx);

/* Reads the slot's TX flag (acquire) and classifies it; on CUDAQ_TX_ERROR
 * stores the CUDA error into *out_cuda_error if not NULL. */
cudaq_tx_status_t cudaq_host_ringbuffer_poll_tx_flag(const cudaq_ringbuffer_t *rb,
                                                     uint32_t slot_idx, int *out_cuda_error);

/* 1 if the slot may be reused by the producer (RX and TX flags both 0; on a
 * ring with header completion also the slot's magic word 0: released by
 * cudaq_host_ringbuffer_clear_slot after its answer). */
int cudaq_host_ringbuffer_slot_available(const cudaq_ringbuffer_t *rb, uint32_t slot_idx);

/* Clears the slot's TX flag (release) after the response was consumed; on a
 * ring with header completion it zeroes the slot's magic word first. */
void cudaq_host_ringbuffer_clear_slot(const cudaq_ringbuffer_t *rb, uint32_t slot_idx);

/* Allocation flags for cudaq_host_ringbuffer_alloc (extension). */
#define CUDAQ_RING_ALLOC_DEFAULT 0u  /* mapped pinned if a CUDA device is usable, else host memory */
#define CUDAQ_RING_ALLOC_HOST 1u     /* plain host memory (host path only) */
#define CUDAQ_RING_ALLOC_MAPPED 2u   /* mapped pinned memory; fails without a CUDA device */
#define CUDAQ_RING_ALLOC_IN_PLACE 4u /* TX data is the RX data (responses overwrite requests) */
#define CUDAQ_RING_ALLOC_HEADER_COMPLETION 8u /* completion = CUDAQ_RX_COMPLETION_HEADER; slot_size a
                                                 multiple of 128; not with IN_PLACE */

/* Allocates a zeroed ring of num_slots slots of slot_size bytes (extension):
 * RX and TX flag arrays each start on their own 128-byte-aligned cache
 * lines, data slots are 128-byte aligned (slot_size is rounded up to a
 * multiple of 8). Fills every field of *rb (device and host views).
 * Returns CUDAQ_OK; CUDAQ_ERR_INVALID_ARG (NULL rb, num_slots 0, slot_size
 * < 24, unknown flags); CUDAQ_ERR_UNSUPPORTED (MAPPED requested in a build
 * without CUDA); CUDAQ_ERR_CUDA (MAPPED requested, no usable device);
 * CUDAQ_ERR_INTERNAL (out of memory). */
cudaq_status_t cudaq_host_ringbuffer_alloc(cudaq_ringbuffer_t *rb, uint32_t num_slots,
                                           uint32_t slot_size, uint32_t flags);

/* Frees a ring from cudaq_host_ringbuffer_alloc and zeroes *rb. A zeroed
 * ring is accepted and left alone. Returns CUDAQ_OK, CUDAQ_ERR_INVALID_ARG
 * (NULL, or not a ring of cudaq_host_ringbuffer_alloc), CUDAQ_ERR_CUDA. */
cudaq_status_t cudaq_host_ringbuffer_free(cudaq_ringbuffer_t *rb);

/* 1 if the ring's memory is mapped pinned memory visible to the GPU. */
int cudaq_host_ringbuffer_is_mapped(const cudaq_ringbuffer_t *rb);

/* ------------------------------------------------------------------------ */
/* Diagnostics (extension)                                                  */
/* ------------------------------------------------------------------------ */

/* The message of the last error a public call returned on this thread
 * (names the call and the problem); "" if none. */
const char *cudaq_last_error(void);

/* Short names of status values. */
const char *cudaq_status_string(cudaq_status_t status);
const char *cudaq_rpc_status_string(int32_t rpc_status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CUDAQ_REALTIME_CUDAQ_REALTIME_H */
