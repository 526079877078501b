/* Wire-level pre-scan of a serialized ModelProto, run before protobuf-c
 * unpacks it.
 *
 * protobuf_c_message_unpack recurses once per level of nested messages and
 * has no depth limit, so a small file that nests messages thousands of
 * levels deep (a node whose GRAPH attribute holds a graph whose node has
 * another, or TypeProto.sequence_type inside itself) overflows the stack.
 * This scan walks the same bytes without recursion: an explicit stack of the
 * open length-delimited messages, their descriptors taken from the code
 * protoc-c generated (so every message-typed field of onnx.proto is covered,
 * and unknown fields are skipped as protobuf-c stores them: as bytes). It
 * refuses nesting deeper than NN_PB_MAX_DEPTH, and framing that protobuf
 * forbids (truncated varints or lengths, group or reserved wire types,
 * field number 0), before protobuf-c sees the file. */
#include <stdint.h>

#include "nn_internal.h"
#include "onnx.pb-c.h"

/* A supported model needs 6 levels (ModelProto > GraphProto > ValueInfoProto
 * > TypeProto > Tensor > TensorShapeProto > Dimension); 64 leaves room for
 * the subgraphs of exported models to reach the loader's own refusal, and
 * bounds protobuf-c's recursion to a few tens of KiB of stack. */
#define NN_PB_MAX_DEPTH 64

static int read_varint(const uint8_t *p, size_t end, size_t *pos, uint64_t *v) {
  uint64_t r = 0;
  for (int i = 0; i < 10; i++) {
    if (*pos >= end) return 0;
    uint8_t b = p[(*pos)++];
    r |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *v = r;
      return 1;
    }
  }
  return 0; /* longer than 10 bytes */
}

cudaq_nn_status_t nn__onnx_prescan(const void *data, size_t len, cudaq_nn_error_t *err) {
  const uint8_t *p = data;
  struct {
    size_t end;                             /* one past the message's last byte */
    const ProtobufCMessageDescriptor *desc; /* its type */
  } stk[NN_PB_MAX_DEPTH + 1];
  int depth = 0;
  stk[0].end = len;
  stk[0].desc = &onnx__model_proto__descriptor;
  size_t pos = 0, field_at = 0;
  for (;;) {
    while (depth > 0 && pos == stk[depth].end) depth--;
    size_t end = stk[depth].end;
    if (pos == end) return CUDAQ_NN_OK; /* the whole ModelProto */
    field_at = pos;
    uint64_t key, n;
    if (!read_varint(p, end, &pos, &key) || (key >> 3) == 0 || (key >> 3) > 0x1fffffff) goto malformed;
    switch (key & 7) {
      case 0: /* varint */
        if (!read_varint(p, end, &pos, &n)) goto malformed;
        break;
      case 1: /* 64-bit */
        if (end - pos < 8) goto malformed;
        pos += 8;
        break;
      case 5: /* 32-bit */
        if (end - pos < 4) goto malformed;
        pos += 4;
        break;
      case 2: { /* length-delimited: bytes, string, packed scalars or a message */
        if (!read_varint(p, end, &pos, &n) || n > end - pos) goto malformed;
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field(stk[depth].desc, (unsigned)(key >> 3));
        if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE) {
          pos += (size_t)n;
          break;
        }
        const ProtobufCMessageDescriptor *child = f->descriptor;
        if (depth == NN_PB_MAX_DEPTH) {
          nn__set_error(err,
                        "model nests protobuf messages more than %d levels deep (%s.%s, a %s, at byte "
                        "%zu): refused before parsing (supported models nest 6; subgraphs are not supported)",
                        NN_PB_MAX_DEPTH, stk[depth].desc->short_name, f->name, child->short_name,
                        field_at);
          return CUDAQ_NN_ERR_UNSUPPORTED;
        }
        depth++;
        stk[depth].end = pos + (size_t)n;
        stk[depth].desc = child;
        break;
      }
      default: /* groups (3, 4) and the reserved wire types 6, 7 */
        goto malformed;
    }
  }
malformed:
  nn__set_error(err,
                "not a valid ONNX model: the protobuf does not parse (bad or truncated file, %zu "
                "bytes; bad field at byte %zu)",
                len, field_at);
  return CUDAQ_NN_ERR_PARSE;
}
