/* dispatch_internal.cuh - private declarations of the CUDA launch layer. */
#ifndef CUDAQ_SRC_DISPATCH_INTERNAL_CUH
#define CUDAQ_SRC_DISPATCH_INTERNAL_CUH

#include <cuda/atomic>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cudaq/realtime/dispatch_kernel.h"

/* The request the polling thread parsed, as every thread handling it needs it. */
struct cudaq__request_state {
  uint32_t cmd;
  uint32_t slot;
  uint32_t arg_len;
  uint32_t request_id;
  uint64_t ptp;
  int32_t status;     /* the answer for CMD_ANSWER */
  uint32_t drop_kind; /* 0 bad magic, 1 unknown function */
  uint32_t line;      /* header completion: the request was seen in its slot's first line */
  cudaq_device_rpc_fn_t fn;
};

/* Per-dispatcher state in device memory: counters in the order of
 * cudaq_dispatcher_counters_t (written only by the polling thread), and
 * the request broadcast area of the cooperative kernel. */
struct cudaq__device_state {
  uint64_t processed;
  uint64_t dropped_bad_magic;
  uint64_t dropped_unknown_function;
  uint64_t err_payload_too_large;
  uint64_t err_arg_len_mismatch;
  uint64_t err_result_too_large;
  uint64_t err_unsupported_mode;
  uint64_t handler_errors;
  /* Per launch (reset by cudaq__state_for_launch): */
  uint32_t exited_blocks; /* regular kernel: polling blocks that have left */
  uint32_t pad_;
  cudaq__request_state bcast;
};

/* Prints the device state of the dispatcher using `stats` to stderr (for
 * tests and debugging; not part of the API). */
extern "C" void cudaq__dispatch_debug_dump(const uint64_t *stats);
/* The same for a graph-launch dispatcher: its relaunch state. */
extern "C" void cudaq__graph_debug_dump(cudaq_dispatch_graph_context *context);

/* System-scope flag accesses of the device side (the GPU only loads and
 * stores host-mapped words; it never does read-modify-write on them, since
 * hostNativeAtomicSupported is 0 on the machines we target). Each call site
 * names the pairing it takes part in. */
static __device__ inline uint64_t cudaq__load_acquire_sys(uint64_t *p) {
  return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).load(cuda::memory_order_acquire);
}
static __device__ inline void cudaq__store_release_sys(uint64_t *p, uint64_t v) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_release);
}

/* Adds one to a device-memory counter. Several polling blocks (regular
 * kernel, num_blocks > 1) count into the same state, so this is a device
 * atomic; device memory only, never host memory. The host may copy the
 * counters while the kernel runs (cudaq_dispatcher_get_counters, a copy on
 * a private stream): it publishes nothing through them and promises no
 * order between counters, only that each aligned 8-byte counter is read
 * whole, so relaxed device-scope atomics are enough; exact totals are read
 * after the kernel has exited (its completion orders every count). */
/* The GPU's global nanosecond clock. */
static __device__ inline uint64_t cudaq__globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __device__ inline void cudaq__bump(uint64_t *c) {
  atomicAdd(reinterpret_cast<unsigned long long *>(c), 1ull);
}

/* Counts an answered request's status. */
static __device__ inline void cudaq__count_status(cudaq__device_state *c, int32_t status) {
  switch (status) {
  case 0: break;
  case CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE: cudaq__bump(&c->err_payload_too_large); break;
  case CUDAQ_RPC_ERR_ARG_LEN_MISMATCH: cudaq__bump(&c->err_arg_len_mismatch); break;
  case CUDAQ_RPC_ERR_RESULT_TOO_LARGE: cudaq__bump(&c->err_result_too_large); break;
  case CUDAQ_RPC_ERR_UNSUPPORTED_MODE: cudaq__bump(&c->err_unsupported_mode); break;
  default: cudaq__bump(&c->handler_errors); break; /* includes CUDAQ_RPC_ERR_LAUNCH_FAILED */
  }
}

/* Counts n processed requests and mirrors the total into stats[0] (the
 * spec's processed count; it may be host memory: a posted relaxed store,
 * read by the host with a relaxed load). With several polling blocks two
 * mirror stores may land out of order, so stats[0] can lag while requests
 * flow; the last block to exit writes the exact total. */
static __device__ inline void cudaq__count_processed(cudaq__device_state *c, uint64_t *stats, uint64_t n) {
  const uint64_t total =
      atomicAdd(reinterpret_cast<unsigned long long *>(&c->processed), (unsigned long long)n) + n;
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*stats).store(total, cuda::memory_order_relaxed);
}

/* What a function-table entry's schema demands of arg_len
 * (cudaq_schema_arg_rule in rpc_wire_format.h, the one home of the rule;
 * checked with cudaq_rpc_check_arg_len). */
struct cudaq__arg_rule {
  uint32_t len;
  int exact;
};
static __host__ __device__ inline cudaq__arg_rule cudaq__arg_rule_of(const cudaq_function_entry_t *e) {
  cudaq__arg_rule r;
  cudaq_schema_arg_rule(&e->schema, &r.len, &r.exact);
  return r;
}

/* The one lookup rule of the device kernels (regular, cooperative, graph,
 * unified) and of the graph dispatcher's pre-launch check, the same as the
 * host path's (host_slot.c): the first entry with the request's
 * function_id serves it. Duplicate ids can reach a
 * kernel only through a launch helper called directly:
 * cudaq_dispatcher_set_function_table refuses them on both paths. A
 * template so that the regular kernel's shared-memory cache (an array of
 * entries reduced to what it reads, each with a function_id, holding the
 * table's first entries in order) is searched by the same code. */
template <class Entry>
static __host__ __device__ inline const Entry *cudaq__find_entry(const Entry *table, uint32_t count,
                                                        uint32_t function_id) {
  for (uint32_t i = 0; i < count; ++i)
    if (table[i].function_id == function_id) return &table[i];
  return nullptr;
}

/* The one set of checks of a found entry, in the host path's order: the
 * length rule first (cudaq_rpc_check_arg_len, max_payload = slot or frame
 * size - header), then the dispatch mode the kernel serves (want_mode) and
 * a handler. Returns 0 (run it) or the status to answer with. */
static __device__ inline int32_t cudaq__entry_status(cudaq__arg_rule rule, uint32_t mode, bool has_handler,
                                                     uint32_t want_mode, uint32_t arg_len,
                                                     uint32_t max_payload) {
  int32_t s = cudaq_rpc_check_arg_len(arg_len, max_payload, rule.len, rule.exact);
  if (s == 0 && (mode != want_mode || !has_handler)) s = CUDAQ_RPC_ERR_UNSUPPORTED_MODE;
  return s;
}

/* The device state of the dispatcher whose stats buffer is `stats`;
 * created (zeroed) on first use when create is true. NULL on failure. */
cudaq__device_state *cudaq__state_for(const uint64_t *stats, bool create);

/* cudaq__state_for(stats, true), prepared for a new launch: the counters
 * start again from 0 when stats[0] reads 0 (a fresh stats buffer, or one
 * the caller zeroed), else they continue (a restarted dispatcher); the
 * per-launch fields are always reset. *completion (if not NULL): the
 * ring's cudaq_rx_completion_t that cudaq_dispatcher_start prepared this
 * launch with (FLAG for a launch helper called directly). Not on any hot
 * path. */
cudaq__device_state *cudaq__state_for_launch(const uint64_t *stats, uint32_t *completion = nullptr);

/* Reports a launch-helper argument error the way CUDA reports launch
 * errors: the next cudaGetLastError() returns cudaErrorInvalidConfiguration. */
void cudaq__report_bad_launch(void);

/* cudaMemset on a private non-blocking stream: never waits behind a
 * persistent kernel running on a blocking stream. */
cudaError_t cudaq__memset_private_stream(void *dev, int value, size_t bytes);

/* cudaMemcpy between host, mapped host and device memory (either way), on
 * a private non-blocking stream (same reason). */
cudaError_t cudaq__copy_private_stream(void *dst, const void *src, size_t bytes);

/* Copies device-resident counters to the host (on a private non-blocking
 * stream, so it never waits for a persistent kernel). */
cudaError_t cudaq__read_device_counters(const cudaq__device_state *dev, cudaq_dispatcher_counters_t *out);

#endif
