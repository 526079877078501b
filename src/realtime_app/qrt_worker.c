/* One CPU decoding worker of qec-realtime (see qrt_worker.h). */
#define _POSIX_C_SOURCE 200809L
#include "qrt_worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/realtime/bench_report.h"
#include "cudaq/realtime/rpc_wire_format.h"

struct qrt_worker {
  uint32_t num_detectors;
  qrt_payload_t fmt;
  cudaq_mwpm_decoder_t *dec;
  cudaq_predecoder_t *pd; /* NULL: MWPM alone on the raw events */
  int correlated;         /* the graph has correlation rules: two-pass correlated matching */
  const float *logits;    /* cpu mode, weighted: the predecoder's edge logits of the shot (MWPM's weights) */
  int gpu_weighted;       /* GPU modes: MWPM's weights are the logits in the GPU stage's output */
  uint32_t *events;       /* num_detectors + 1 */
  uint32_t *residual;     /* num_detectors + 1 */
};

qrt_pd_kind_t qrt_pd_kind_of(const char *model) {
  if (!model || !strcmp(model, "none")) return QRT_PD_NONE;
  return !strcmp(model, "local") ? QRT_PD_LOCAL : QRT_PD_ONNX;
}

int qrt_worker_create(const cudaq_mwpm_graph_t *graph, qrt_pd_kind_t kind, const char *model,
                      int check_layout, qrt_payload_t fmt, cudaq_predecoder_weights_t weights,
                      qrt_worker_t **out, char *msg, size_t msg_len) {
  qrt_worker_t *w = calloc(1, sizeof *w);
  if (!w) {
    snprintf(msg, msg_len, "out of memory");
    return 1;
  }
  w->num_detectors = cudaq_mwpm_graph_num_nodes(graph);
  w->fmt = fmt;
  w->correlated = cudaq_mwpm_graph_has_correlations(graph);
  uint32_t no = cudaq_mwpm_graph_num_observables(graph);
  w->events = malloc(((size_t)w->num_detectors + 1) * sizeof *w->events);
  w->residual = malloc(((size_t)w->num_detectors + 1) * sizeof *w->residual);
  if (!w->events || !w->residual || cudaq_mwpm_decoder_create(graph, &w->dec)) {
    snprintf(msg, msg_len, "out of memory");
    qrt_worker_destroy(w);
    return 1;
  }
  cudaq_predecoder_error_t perr;
  perr.message[0] = '\0';
  cudaq_predecoder_status_t st = CUDAQ_PREDECODER_OK;
  if (kind == QRT_PD_LOCAL)
    st = cudaq_predecoder_create_local(graph, NULL, &w->pd, &perr);
  else if (kind == QRT_PD_ONNX) {
    cudaq_onnx_predecoder_options_t oo;
    cudaq_onnx_predecoder_options_init(&oo);
    oo.graph = check_layout ? graph : NULL; /* the model's detector layout against the DEM's */
    oo.weights = weights;
    oo.match_graph = weights == CUDAQ_PREDECODER_WEIGHTS_OFF ? NULL : graph;
    st = cudaq_predecoder_create_onnx(model, w->num_detectors, no, &oo, &w->pd, &perr);
    if (!st && cudaq_predecoder_weighted(w->pd)) {
      const uint32_t *e, *sl;
      size_t n;
      (void)cudaq_predecoder_edge_weights(w->pd, &e, &sl, &n, &w->logits); /* weighted: cannot fail */
      if ((st = cudaq_predecoder_set_weight_map(w->pd, w->dec)))
        snprintf(perr.message, sizeof perr.message, "%s",
                 st == CUDAQ_PREDECODER_ERR_NO_MEMORY ? "out of memory for the weighted-matching map"
                 : "weighted matching needs a matching graph built with per-shot weights");
    }
  }
  if (st) {
    snprintf(msg, msg_len, "%s", perr.message[0] ? perr.message : cudaq_predecoder_status_str(st));
    qrt_worker_destroy(w);
    return 1;
  }
  *out = w;
  return 0;
}

void qrt_worker_destroy(qrt_worker_t *w) {
  if (!w)
    return;
  cudaq_predecoder_destroy(w->pd);
  cudaq_mwpm_decoder_destroy(w->dec);
  free(w->events);
  free(w->residual);
  free(w);
}

int qrt_worker_weighted(const qrt_worker_t *w) { return w && (w->logits || w->gpu_weighted); }

int qrt_worker_set_edge_map(qrt_worker_t *w, const cudaq_predecoder_edge_map_t *map, char *msg,
                            size_t msg_len) {
  cudaq_mwpm_status_t st = cudaq_mwpm_decoder_set_weight_map(w->dec, map->graph_edge, map->slot,
                                                             map->num_edges, map->num_edges);
  if (st) {
    snprintf(msg, msg_len, "weighted matching: %s", st == CUDAQ_MWPM_ERR_NO_MEMORY ? "out of memory"
             : "the matching graph has no per-shot weights, or the map is not for it");
    return 1;
  }
  w->gpu_weighted = 1;
  return 0;
}

static uint32_t sat_ns(uint64_t a, uint64_t b) {
  uint64_t d = b > a ? b - a : 0;
  return d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

/* Request validation on the CPU (cpu mode; the GPU modes check the values
 * in the ingest kernel): length and values of the payload, by the rules of
 * qrt_worker.h; lists the detection events in w->events. Returns QRT_OK or
 * the error status. The INT32 form reads the payload two values at a time
 * (most words are zero): one test for both values' bits above bit 0, then
 * the listing only where a word is not zero. */
static int32_t take_events(qrt_worker_t *w, const void *payload, size_t len, size_t *ne_out) {
  const uint8_t *p = payload;
  const uint32_t nd = w->num_detectors;
  uint32_t *events = w->events;
  size_t ne = 0;
  if (len != qrt_payload_len(w->fmt, nd))
    return QRT_ERR_LENGTH;
  if (w->fmt == QRT_PAYLOAD_BITS) {
    if (len && qrt_bits_padding(p[len - 1], nd)) /* no byte to read for 0 detectors */
      return QRT_ERR_VALUE; /* a padding bit set: the wire format keeps them zero */
    for (size_t b = 0; b < len; b++)
      for (uint32_t bits = p[b]; bits; bits &= bits - 1u)
        events[ne++] = (uint32_t)(8u * b) + (uint32_t)__builtin_ctz(bits);
  } else {
    /* Two INT32 values per 64-bit word (little-endian: value 2k in the low
     * half); the slot's payload need not be 8-aligned, hence memcpy. */
    uint64_t bad = 0;
    uint32_t d = 0;
    for (; d + 2u <= nd; d += 2u) {
      uint64_t v2;
      memcpy(&v2, p + 4u * d, sizeof v2);
      bad |= qrt_int32_pair_bad_bits(v2);
      if (!v2)
        continue;
      if (v2 & 1u)
        events[ne++] = d;
      if ((v2 >> 32) & 1u)
        events[ne++] = d + 1u;
    }
    if (d < nd) { /* an odd count: the last value alone */
      int32_t v;
      memcpy(&v, p + 4u * d, sizeof v);
      bad |= qrt_int32_bad_bits(v);
      if (v & 1)
        events[ne++] = d;
    }
    if (bad)
      return QRT_ERR_VALUE;
  }
  *ne_out = ne;
  return QRT_OK;
}

/* The CPU path begins with a cleared response and the request's events. */
static int32_t begin(qrt_worker_t *w, const void *payload, size_t len, qrt_response_t *out,
                     size_t *ne) {
  memset(out, 0, sizeof *out);
  *ne = 0;
  int32_t st = take_events(w, payload, len, ne);
  if (st == QRT_OK)
    out->events_in = (uint32_t)*ne;
  return out->status = st;
}

/* ... and end alike: MWPM on the residual, prediction = frame XOR MWPM;
 * with the shot's edge logits as weights where logits is not NULL. */
static int32_t match(qrt_worker_t *w, const uint32_t *residual, size_t nr, uint64_t frame,
                     const float *logits, qrt_response_t *out) {
  uint64_t t1 = cudaq_bench_now_ns();
  cudaq_mwpm_result_t res;
  /* The decodes allocate nothing per shot (mwpm.h). */
  cudaq_mwpm_status_t st = logits ? cudaq_mwpm_decode_mapped(w->dec, residual, nr, logits, &res)
                           : w->correlated ? cudaq_mwpm_decode_correlated(w->dec, residual, nr, &res)
                                           : cudaq_mwpm_decode(w->dec, residual, nr, &res);
  if (st) /* weighted: a NaN or infinite logit where the matching went is the predecoder's fault */
    return out->status = logits && st == CUDAQ_MWPM_ERR_INVALID_ARG ? QRT_ERR_PREDECODER : QRT_ERR_MWPM;
  out->mwpm_ns = sat_ns(t1, cudaq_bench_now_ns());
  out->events_residual = (uint32_t)nr;
  out->prediction = frame ^ res.obs_mask;
  out->corrections = (uint32_t)res.num_pairs;
  return out->status = QRT_OK;
}

int32_t qrt_worker_decode(qrt_worker_t *w, const void *payload, size_t len, qrt_response_t *out) {
  size_t ne;
  if (begin(w, payload, len, out, &ne))
    return out->status;
  if (!w->pd)
    return match(w, w->events, ne, 0, NULL, out);
  size_t nr = ne;
  uint64_t frame = 0;
  uint64_t t0 = cudaq_bench_now_ns();
  if (cudaq_predecoder_run(w->pd, w->events, ne, w->residual, &nr, &frame, NULL))
    return out->status = QRT_ERR_PREDECODER;
  out->predecoder_ns = sat_ns(t0, cudaq_bench_now_ns());
  return match(w, w->residual, nr, frame, w->logits, out);
}

int32_t qrt_worker_decode_gpu(qrt_worker_t *w, size_t len, const qrt_gpu_result_t *g, qrt_response_t *out) {
  /* The length here (the header's arg_len; a payload of the wrong length is
   * not used on the GPU); the values were checked and counted by the ingest
   * kernel with the same rules (qrt_worker.h), so the payload itself is not
   * read again on the CPU (8.7 KB of INT32 at d = 13: 3-4 us). */
  memset(out, 0, sizeof *out);
  if (len != qrt_payload_len(w->fmt, w->num_detectors))
    return out->status = QRT_ERR_LENGTH;
  if (g->status & QRT_GPU_BAD_INPUT)
    return out->status = QRT_ERR_VALUE;
  out->events_in = g->events_in;
  const uint32_t nr = g->count;
  out->gpu_ns = sat_ns(g->t_start_ns, g->t_ready_ns);
  out->gpu_publish_ns = sat_ns(g->t_publish_ns, g->t_ready_ns);
  if (g->status || nr > w->num_detectors)
    return out->status = QRT_ERR_PREDECODER;
  const uint32_t *ev = QRT_GPU_EVENTS(g);
  for (uint32_t k = 0; k < nr; k++) {
    if (ev[k] >= w->num_detectors)
      return out->status = QRT_ERR_PREDECODER;
    w->residual[k] = ev[k]; /* one pass over mapped memory, then MWPM works on a private copy */
  }
  /* weighted: MWPM reads the logits in mapped memory where it needs them
   * (published with the residual by the same release) */
  return match(w, w->residual, nr, g->frame, w->gpu_weighted ? QRT_GPU_LOGITS(g, w->num_detectors) : NULL,
               out);
}
