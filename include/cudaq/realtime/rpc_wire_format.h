/*
 * cudaq/realtime/rpc_wire_format.h - the CUDA-Q realtime RPC wire protocol.
 *
 * Everything in this header is a pure function or a type: it compiles as C11,
 * as C++17 and as CUDA (the functions are __host__ __device__ under nvcc), so
 * a producer, a host dispatcher and a GPU dispatch kernel share one definition
 * of the protocol.
 *
 * Spec: realtime-message-protocol.txt ("RPC Header / Response", "Type System",
 * "Payload Encoding", "Bit-Packed Data Encoding", "Multi-Bit Measurement
 * Encoding", "Status Codes").
 *
 * Byte order: the wire is little-endian. The structs below are the wire
 * layout on little-endian hosts and GPUs (x86-64, aarch64, every CUDA GPU);
 * a big-endian build is refused at compile time rather than silently wrong.
 */
#ifndef CUDAQ_REALTIME_RPC_WIRE_FORMAT_H
#define CUDAQ_REALTIME_RPC_WIRE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
#error "cudaq-realtime: the RPC wire format is little-endian; big-endian hosts are not supported"
#endif

#if defined(__CUDACC__)
#define CUDAQ_HD __host__ __device__
#else
#define CUDAQ_HD
#endif

/* In C++14 and later the pure helpers are constexpr, so function ids can be
 * computed at compile time: constexpr uint32_t id = cudaq_fnv1a_hash("x"); */
#if defined(__cplusplus) && __cplusplus >= 201402L
#define CUDAQ_INLINE static inline constexpr
#else
#define CUDAQ_INLINE static inline
#endif

#if defined(__cplusplus)
#define CUDAQ_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define CUDAQ_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status of the public C API (every public call returns one).               */
/* ------------------------------------------------------------------------ */
#ifndef CUDAQ_STATUS_T_DEFINED
#define CUDAQ_STATUS_T_DEFINED
typedef enum {
  CUDAQ_OK = 0,              /* success */
  CUDAQ_ERR_INVALID_ARG = 1, /* a missing pointer or a bad value; see cudaq_last_error() */
  CUDAQ_ERR_INTERNAL = 2,    /* an OS call failed (thread, memory) */
  CUDAQ_ERR_CUDA = 3,        /* a CUDA call failed */
  CUDAQ_ERR_UNSUPPORTED = 4  /* valid, but not available in this build or on this path */
} cudaq_status_t;
#endif

/* ------------------------------------------------------------------------ */
/* Header and response                                                      */
/* ------------------------------------------------------------------------ */
#define CUDAQ_RPC_MAGIC_REQUEST 0x43555152u  /* 'CUQR' little-endian: 52 51 55 43 */
#define CUDAQ_RPC_MAGIC_RESPONSE 0x43555153u /* 'CUQS' little-endian: 53 51 55 43 */
/* A request's magic word after a dispatcher with header completion took it
 * (cudaq_rx_completion_t, extension): 'CUQX'. */
#define CUDAQ_RPC_SLOT_CONSUMED 0x43555158u
#define CUDAQ_RPC_HEADER_SIZE 24u

/* Request header at the start of every RX slot. */
typedef struct {
  uint32_t magic;         /* CUDAQ_RPC_MAGIC_REQUEST */
  uint32_t function_id;   /* cudaq_fnv1a_hash("handler_name") */
  uint32_t arg_len;       /* payload bytes following this header */
  uint32_t request_id;    /* caller-assigned, echoed in the response */
  uint64_t ptp_timestamp; /* sender's PTP time (0 if unused), echoed */
} cudaq_rpc_header_t;

/* Response header at the start of every TX slot. */
typedef struct {
  uint32_t magic;         /* CUDAQ_RPC_MAGIC_RESPONSE */
  int32_t status;         /* 0 success, > 0 handler error, < 0 protocol error */
  uint32_t result_len;    /* bytes of result following this header */
  uint32_t request_id;    /* echoed from the request */
  uint64_t ptp_timestamp; /* echoed from the request */
} cudaq_rpc_response_t;

/* The fields are laid out so that natural alignment leaves no padding: the
 * structs are "packed" without a packing attribute (which would make every
 * device-side access a byte-wise one). These checks keep it that way. */
CUDAQ_STATIC_ASSERT(sizeof(cudaq_rpc_header_t) == CUDAQ_RPC_HEADER_SIZE, "RPC header must be 24 bytes");
CUDAQ_STATIC_ASSERT(sizeof(cudaq_rpc_response_t) == CUDAQ_RPC_HEADER_SIZE, "RPC response must be 24 bytes");
CUDAQ_STATIC_ASSERT(offsetof(cudaq_rpc_header_t, magic) == 0, "header.magic at 0");
CUDAQ_STATIC_ASSERT(offsetof(cudaq_rpc_header_t, function_id) == 4, "header.function_id at 4");
CUDAQ_STATIC_ASSERT(offsetof(cudaq_rpc_header_t, arg_len) == 8, "header.arg_len at 8");
CUDAQ_STATIC_ASSERT(offsetof(cudaq_rpc_header_t, request_id) == 12, "header.request_id at 12");
CUDAQ_STATIC_ASSERT(offsetof(cudaq_rpc_header_t, ptp_timestamp) == 16, "header.ptp_timestamp at 16");
CUDAQ_STATIC_ASSERT(offsetof(cudaq_rpc_response_t, magic) == 0, "response.magic at 0");
CUDAQ_STATIC_ASSERT(offsetof(cudaq_rpc_response_t, status) == 4, "response.status at 4");
CUDAQ_STATIC_ASSERT(offsetof(cudaq_rpc_response_t, result_len) == 8, "response.result_len at 8");
CUDAQ_STATIC_ASSERT(offsetof(cudaq_rpc_response_t, request_id) == 12, "response.request_id at 12");
CUDAQ_STATIC_ASSERT(offsetof(cudaq_rpc_response_t, ptp_timestamp) == 16, "response.ptp_timestamp at 16");

/* ------------------------------------------------------------------------ */
/* Response status codes                                                    */
/* ------------------------------------------------------------------------ */
/* 0 is success, positive values belong to the handler, negative values are
 * written by the dispatcher itself (never by a handler). */
#define CUDAQ_RPC_STATUS_OK 0
typedef enum {
  /* CUDAQ_RPC_HEADER_SIZE + arg_len exceeds the RX slot size. */
  CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE = -1,
  /* The handler's schema fixes the payload size and arg_len differs from it,
   * or (variable-size last argument) arg_len is shorter than the fixed
   * arguments before it (host path; the device kernels check exact sizes). */
  CUDAQ_RPC_ERR_ARG_LEN_MISMATCH = -2,
  /* The handler reported more result bytes than fit in the TX slot. */
  CUDAQ_RPC_ERR_RESULT_TOO_LARGE = -3,
  /* The entry's dispatch mode cannot run on this dispatcher (e.g. a
   * DEVICE_CALL entry on the host-thread path). */
  CUDAQ_RPC_ERR_UNSUPPORTED_MODE = -4,
  /* Launching the handler (a CUDA graph) failed. */
  CUDAQ_RPC_ERR_LAUNCH_FAILED = -5
} cudaq_rpc_error_t;

/* ------------------------------------------------------------------------ */
/* FNV-1a function ids                                                      */
/* ------------------------------------------------------------------------ */
#define CUDAQ_FNV1A_OFFSET_BASIS 2166136261u
#define CUDAQ_FNV1A_PRIME 16777619u

/* 32-bit FNV-1a of a NUL-terminated handler name. NULL hashes like "". */
CUDAQ_INLINE CUDAQ_HD uint32_t cudaq_fnv1a_hash(const char *name) {
  uint32_t h = CUDAQ_FNV1A_OFFSET_BASIS;
  if (name) {
    for (; *name; ++name) {
      h ^= (uint32_t)(uint8_t)*name;
      h *= CUDAQ_FNV1A_PRIME;
    }
  }
  return h;
}

/* ------------------------------------------------------------------------ */
/* Payload type system and handler schemas                                  */
/* ------------------------------------------------------------------------ */
typedef enum {
  CUDAQ_TYPE_UINT8 = 0x10,
  CUDAQ_TYPE_INT32 = 0x11,
  CUDAQ_TYPE_INT64 = 0x12,
  CUDAQ_TYPE_FLOAT32 = 0x13,
  CUDAQ_TYPE_FLOAT64 = 0x14,
  CUDAQ_TYPE_ARRAY_UINT8 = 0x20,
  CUDAQ_TYPE_ARRAY_INT32 = 0x21,
  CUDAQ_TYPE_ARRAY_FLOAT32 = 0x22,
  CUDAQ_TYPE_ARRAY_FLOAT64 = 0x23,
  CUDAQ_TYPE_BIT_PACKED = 0x30 /* LSB-first bits */
} cudaq_payload_type_t;

#define CUDAQ_SCHEMA_MAX_ARGS 8
#define CUDAQ_SCHEMA_MAX_RESULTS 4

/* One argument or result. num_elements: 1 for scalars, the element count for
 * arrays, the bit count for CUDAQ_TYPE_BIT_PACKED.
 * Variable size: an array or bit-packed descriptor with size_bytes == 0 and
 * num_elements == 0 accepts any length; it may only be the last entry. */
typedef struct {
  uint8_t type_id; /* cudaq_payload_type_t */
  uint8_t reserved[3];
  uint32_t size_bytes;
  uint32_t num_elements;
} cudaq_type_desc_t;

/* A handler's interface. num_args == 0 declares no schema for the arguments:
 * the dispatcher then accepts any arg_len that fits in the slot. */
typedef struct {
  uint8_t num_args;
  uint8_t num_results;
  uint16_t reserved;
  cudaq_type_desc_t args[CUDAQ_SCHEMA_MAX_ARGS];
  cudaq_type_desc_t results[CUDAQ_SCHEMA_MAX_RESULTS];
} cudaq_handler_schema_t;

CUDAQ_STATIC_ASSERT(sizeof(cudaq_type_desc_t) == 12, "type descriptor is 12 bytes");
CUDAQ_STATIC_ASSERT(sizeof(cudaq_handler_schema_t) == 4 + 12 * 12, "schema is 148 bytes");

/* Bytes per element of a type; 0 for CUDAQ_TYPE_BIT_PACKED and unknown ids. */
CUDAQ_INLINE CUDAQ_HD uint32_t cudaq_payload_type_elem_size(uint8_t type_id) {
  return type_id == CUDAQ_TYPE_UINT8 || type_id == CUDAQ_TYPE_ARRAY_UINT8     ? 1u
         : type_id == CUDAQ_TYPE_INT32 || type_id == CUDAQ_TYPE_ARRAY_INT32   ? 4u
         : type_id == CUDAQ_TYPE_FLOAT32 || type_id == CUDAQ_TYPE_ARRAY_FLOAT32 ? 4u
         : type_id == CUDAQ_TYPE_INT64 || type_id == CUDAQ_TYPE_FLOAT64 ||
                 type_id == CUDAQ_TYPE_ARRAY_FLOAT64
             ? 8u
             : 0u;
}

CUDAQ_INLINE CUDAQ_HD int cudaq_payload_type_is_scalar(uint8_t type_id) {
  return type_id >= CUDAQ_TYPE_UINT8 && type_id <= CUDAQ_TYPE_FLOAT64;
}

CUDAQ_INLINE CUDAQ_HD int cudaq_payload_type_is_array(uint8_t type_id) {
  return type_id >= CUDAQ_TYPE_ARRAY_UINT8 && type_id <= CUDAQ_TYPE_ARRAY_FLOAT64;
}

/* Bytes needed for num_bits bit-packed bits: ceil(num_bits / 8). */
CUDAQ_INLINE CUDAQ_HD uint32_t cudaq_bitpacked_size(uint32_t num_bits) {
  return num_bits / 8u + (num_bits % 8u != 0u ? 1u : 0u);
}

/* Bytes needed for n 4-bit soft-readout values: ceil(n / 2). */
CUDAQ_INLINE CUDAQ_HD uint32_t cudaq_nibble_packed_size(uint32_t n) { return n / 2u + (n % 2u); }

/* 1 if the descriptor is variable-size (see cudaq_type_desc_t). */
CUDAQ_INLINE CUDAQ_HD int cudaq_type_desc_is_variable(const cudaq_type_desc_t *d) {
  return d->size_bytes == 0 && d->num_elements == 0 &&
         (cudaq_payload_type_is_array(d->type_id) || d->type_id == CUDAQ_TYPE_BIT_PACKED);
}

/* Checks one descriptor: known type id, and size_bytes consistent with the
 * type and num_elements. Returns CUDAQ_OK or CUDAQ_ERR_INVALID_ARG. */
CUDAQ_INLINE CUDAQ_HD cudaq_status_t cudaq_type_desc_validate(const cudaq_type_desc_t *d) {
  return !d ? CUDAQ_ERR_INVALID_ARG
         : cudaq_type_desc_is_variable(d) ? CUDAQ_OK
         : cudaq_payload_type_is_scalar(d->type_id)
             ? ((d->num_elements == 1 && d->size_bytes == cudaq_payload_type_elem_size(d->type_id))
                    ? CUDAQ_OK
                    : CUDAQ_ERR_INVALID_ARG)
         : cudaq_payload_type_is_array(d->type_id)
             ? ((d->num_elements > 0 &&
                 (uint64_t)d->size_bytes ==
                     (uint64_t)d->num_elements * cudaq_payload_type_elem_size(d->type_id))
                    ? CUDAQ_OK
                    : CUDAQ_ERR_INVALID_ARG)
         : d->type_id == CUDAQ_TYPE_BIT_PACKED
             ? ((d->num_elements > 0 && d->size_bytes == cudaq_bitpacked_size(d->num_elements))
                    ? CUDAQ_OK
                    : CUDAQ_ERR_INVALID_ARG)
             : CUDAQ_ERR_INVALID_ARG;
}

/* Offsets of n descriptors laid end to end, and their total size.
 * offsets may be NULL. *is_fixed is 1 when every descriptor has a fixed size
 * (then *total is the exact payload size), 0 when the last one is variable
 * (then *total is the minimum size). Returns CUDAQ_ERR_INVALID_ARG if a
 * descriptor is invalid, a variable one is not last, or the sum overflows. */
static inline CUDAQ_HD cudaq_status_t cudaq_type_desc_layout(const cudaq_type_desc_t *descs,
                                                             uint32_t n, uint32_t *offsets,
                                                             uint32_t *total, int *is_fixed) {
  uint64_t off = 0;
  int fixed = 1;
  if ((!descs && n) || !total || !is_fixed) return CUDAQ_ERR_INVALID_ARG;
  for (uint32_t i = 0; i < n; ++i) {
    if (cudaq_type_desc_validate(&descs[i]) != CUDAQ_OK) return CUDAQ_ERR_INVALID_ARG;
    if (cudaq_type_desc_is_variable(&descs[i])) {
      if (i + 1 != n) return CUDAQ_ERR_INVALID_ARG;
      fixed = 0;
    }
    if (offsets) offsets[i] = (uint32_t)off;
    off += descs[i].size_bytes;
    if (off > 0xFFFFFFFFu) return CUDAQ_ERR_INVALID_ARG;
  }
  *total = (uint32_t)off;
  *is_fixed = fixed;
  return CUDAQ_OK;
}

/* Argument offsets within the request payload (offsets[0] == 0). */
static inline CUDAQ_HD cudaq_status_t cudaq_schema_arg_layout(const cudaq_handler_schema_t *s,
                                                              uint32_t offsets[CUDAQ_SCHEMA_MAX_ARGS],
                                                              uint32_t *total, int *is_fixed) {
  if (!s || s->num_args > CUDAQ_SCHEMA_MAX_ARGS) return CUDAQ_ERR_INVALID_ARG;
  return cudaq_type_desc_layout(s->args, s->num_args, offsets, total, is_fixed);
}

/* Result offsets within the response payload (offsets[0] == 0). */
static inline CUDAQ_HD cudaq_status_t cudaq_schema_result_layout(
    const cudaq_handler_schema_t *s, uint32_t offsets[CUDAQ_SCHEMA_MAX_RESULTS], uint32_t *total,
    int *is_fixed) {
  if (!s || s->num_results > CUDAQ_SCHEMA_MAX_RESULTS) return CUDAQ_ERR_INVALID_ARG;
  return cudaq_type_desc_layout(s->results, s->num_results, offsets, total, is_fixed);
}

/* Checks a whole schema: counts within 8 and 4, every descriptor valid, only
 * the last argument / result variable-size. */
static inline CUDAQ_HD cudaq_status_t cudaq_schema_validate(const cudaq_handler_schema_t *s) {
  uint32_t total = 0;
  int fixed = 0;
  if (cudaq_schema_arg_layout(s, NULL, &total, &fixed) != CUDAQ_OK) return CUDAQ_ERR_INVALID_ARG;
  return cudaq_schema_result_layout(s, NULL, &total, &fixed);
}

/* ------------------------------------------------------------------------ */
/* The request-length rule: its one home, for every path (host slot         */
/* processor, host workers, regular / graph / unified kernels, UDP bridge)  */
/* ------------------------------------------------------------------------ */

/* What a handler schema demands of a request's arg_len: exactly *len bytes
 * (*exact = 1: every argument fixed-size), or at least *len bytes (*exact =
 * 0: the fixed arguments before a variable-size last one). No schema (or an
 * invalid one, which set_function_table refuses): at least 0 bytes. */
static inline CUDAQ_HD void cudaq_schema_arg_rule(const cudaq_handler_schema_t *s, uint32_t *len,
                                                  int *exact) {
  uint32_t total = 0;
  int fixed = 0;
  if (!s || s->num_args == 0 || cudaq_schema_arg_layout(s, 0, &total, &fixed) != CUDAQ_OK) {
    total = 0;
    fixed = 0;
  }
  *len = total;
  *exact = fixed;
}

/* Checks a request of arg_len payload bytes in a slot (or frame, or
 * datagram buffer) with `room` bytes after the header, for a handler whose
 * rule (cudaq_schema_arg_rule) is (len, exact). Returns 0,
 * CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE (arg_len > room) or
 * CUDAQ_RPC_ERR_ARG_LEN_MISMATCH (the schema's size is not met). */
CUDAQ_INLINE CUDAQ_HD int32_t cudaq_rpc_check_arg_len(uint32_t arg_len, uint32_t room,
                                                      uint32_t len, int exact) {
  return arg_len > room                             ? (int32_t)CUDAQ_RPC_ERR_PAYLOAD_TOO_LARGE
         : (exact ? arg_len != len : arg_len < len) ? (int32_t)CUDAQ_RPC_ERR_ARG_LEN_MISMATCH
                                                    : 0;
}

/* ------------------------------------------------------------------------ */
/* Bit packing (CUDAQ_TYPE_BIT_PACKED): LSB-first, unused high bits zero     */
/* ------------------------------------------------------------------------ */

/* Packs num_bits values (each 0 or nonzero) from bits[] into
 * out[0 .. cudaq_bitpacked_size(num_bits)), LSB-first. out_len must be at
 * least that size. Unused bits of the last byte are written as 0. */
static inline CUDAQ_HD cudaq_status_t cudaq_bitpack(const uint8_t *bits, uint32_t num_bits,
                                                    uint8_t *out, uint32_t out_len) {
  uint32_t nbytes = cudaq_bitpacked_size(num_bits);
  if ((!bits && num_bits) || (!out && nbytes) || out_len < nbytes) return CUDAQ_ERR_INVALID_ARG;
  for (uint32_t b = 0; b < nbytes; ++b) out[b] = 0;
  for (uint32_t i = 0; i < num_bits; ++i)
    if (bits[i]) out[i >> 3] = (uint8_t)(out[i >> 3] | (1u << (i & 7u)));
  return CUDAQ_OK;
}

/* Unpacks num_bits LSB-first bits from packed[] into bits_out[] (0 or 1). */
static inline CUDAQ_HD cudaq_status_t cudaq_bitunpack(const uint8_t *packed, uint32_t num_bits,
                                                      uint8_t *bits_out) {
  if (num_bits && (!packed || !bits_out)) return CUDAQ_ERR_INVALID_ARG;
  for (uint32_t i = 0; i < num_bits; ++i) bits_out[i] = (uint8_t)((packed[i >> 3] >> (i & 7u)) & 1u);
  return CUDAQ_OK;
}

/* ------------------------------------------------------------------------ */
/* 4-bit soft readout: two values per byte, low nibble first                 */
/* ------------------------------------------------------------------------ */

/* Packs n values 0..15 into out[0 .. ceil(n/2)): out[i/2] holds value i in
 * its low nibble when i is even, high nibble when odd; an odd count leaves
 * the last high nibble 0. A value above 15 is refused (nothing is written). */
static inline CUDAQ_HD cudaq_status_t cudaq_nibble_pack(const uint8_t *values, uint32_t n,
                                                        uint8_t *out, uint32_t out_len) {
  uint32_t nbytes = cudaq_nibble_packed_size(n);
  if ((!values && n) || (!out && nbytes) || out_len < nbytes) return CUDAQ_ERR_INVALID_ARG;
  for (uint32_t i = 0; i < n; ++i)
    if (values[i] > 15u) return CUDAQ_ERR_INVALID_ARG;
  for (uint32_t i = 0; i < n; i += 2) {
    uint32_t hi = (i + 1 < n) ? values[i + 1] : 0u;
    out[i >> 1] = (uint8_t)(values[i] | (hi << 4));
  }
  return CUDAQ_OK;
}

/* Unpacks n 4-bit values from packed[] into values_out[]. */
static inline CUDAQ_HD cudaq_status_t cudaq_nibble_unpack(const uint8_t *packed, uint32_t n,
                                                          uint8_t *values_out) {
  if (n && (!packed || !values_out)) return CUDAQ_ERR_INVALID_ARG;
  for (uint32_t i = 0; i < n; ++i)
    values_out[i] = (uint8_t)((packed[i >> 1] >> ((i & 1u) * 4u)) & 0x0Fu);
  return CUDAQ_OK;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CUDAQ_REALTIME_RPC_WIRE_FORMAT_H */
