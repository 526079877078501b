/*
 * Weighted matching from an ONNX predecoder's edge logits (models/README.md,
 * "Weighted matching").
 *
 * A model may give, besides its residual and frame, the logit of every
 * matching edge: output `edge_logits` FLOAT [1, E], with the metadata
 * `edge_endpoints` naming edge i's two detectors (-1: the boundary). The
 * logit is the network's log-odds that the edge fired given the events
 * around it, so ln((1-q)/q) = -logit is the edge's weight for this shot.
 * MWPM takes edges of negative weight and matches on |w| (the graph's own
 * negative edges are handled so, mwpm.h): here that means applying every
 * edge of positive logit, which is the residual of decision threshold 0,
 * and weighing each edge |logit|. The model's own residual used its
 * decision threshold t, so the edges whose "logit > 0" and "logit > t"
 * differ are folded in here (their endpoints flipped, their observables
 * added to the frame, from the match graph's edge).
 *
 * Measured (H200, bench/results/weighted-matching-h200-2026-11-29.md): the
 * shipped accurate network at d = 13, p = 0.003 gives 0.18-0.22x the
 * logical error rate of MWPM alone this way, against 0.62-0.72x for its
 * thresholded residual, with 2.3% of the events left.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "predecoder_internal.h"

#define LOGITS_NAME "edge_logits"
#define EDGES_KEY "edge_endpoints"
#define THRESHOLD_KEY "decision_threshold"

/* The model's edges: the map (graph edge, model output index) in the match
 * graph's edge order, for cudaq_mwpm_decoder_set_weight_map; endpoints and
 * observables by model output index, for the fold. `map` is the public view
 * of the same arrays (cudaq_predecoder_edge_map_t, filled once they are
 * complete). */
struct pd__weights {
  size_t n;          /* model edges */
  float threshold;   /* the model's decision threshold */
  cudaq_predecoder_edge_map_t map;
  uint32_t *edge;    /* match graph edge of entry j (ascending) */
  uint32_t *src;     /* n: its index in the model's output */
  int32_t *ends;     /* 2n, by output index: the detectors (-1: the boundary) */
  uint64_t *obs;     /* n, by output index: the observables (the match graph's) */
  uint32_t *fold;    /* n: scratch, this shot's folded edges */
  uint8_t *res;      /* num_detectors: scratch residual */
};

void cudaq_predecoder__weights_destroy(pd__weights_t *w) {
  if (!w)
    return;
  free(w->edge);
  free(w->src);
  free(w->ends);
  free(w->obs);
  free(w->fold);
  free(w->res);
  free(w);
}

const cudaq_predecoder_edge_map_t *cudaq_predecoder__weights_map(const pd__weights_t *w) { return &w->map; }

cudaq_predecoder_status_t cudaq_predecoder__weights_mode_check(cudaq_predecoder_weights_t mode,
                                                               cudaq_predecoder_error_t *err) {
  if (mode == CUDAQ_PREDECODER_WEIGHTS_AUTO || mode == CUDAQ_PREDECODER_WEIGHTS_OFF ||
      mode == CUDAQ_PREDECODER_WEIGHTS_ON)
    return CUDAQ_PREDECODER_OK;
  cudaq_predecoder__set_error(err, "weights %d is none of AUTO, OFF, ON", (int)mode);
  return CUDAQ_PREDECODER_ERR_INVALID_ARG;
}

/* The output named LOGITS_NAME: its index, or -1. */
static long find_output(const cudaq_nn_model_t *m) {
  size_t no = cudaq_nn_model_num_outputs(m);
  for (size_t i = 2; i < no; i++) {
    cudaq_nn_binding_t b;
    if (!cudaq_nn_model_output(m, i, &b) && b.name && !strcmp(b.name, LOGITS_NAME))
      return (long)i;
  }
  return -1;
}

/* Parses the edge list into w->ends and maps each edge onto the graph. */
static cudaq_predecoder_status_t read_edges(pd__weights_t *w, const char *s, const cudaq_mwpm_graph_t *g,
                                            uint32_t nd, cudaq_predecoder_error_t *err) {
  s = cudaq_predecoder__skip_ws(s);
  if (*s != '[')
    goto malformed;
  s = cudaq_predecoder__skip_ws(s + 1);
  size_t i = 0;
  while (*s != ']') {
    double v[CUDAQ_DEM_MAX_COORDS];
    size_t k;
    if (!(s = cudaq_predecoder__parse_tuple(s, v, &k)) || k != 2)
      goto malformed;
    if (i == w->n) {
      cudaq_predecoder__set_error(err, "model metadata '%s' lists more edges than output '%s' has (%zu)",
                                  EDGES_KEY, LOGITS_NAME, w->n);
      return CUDAQ_PREDECODER_ERR_MODEL;
    }
    if (v[0] != floor(v[0]) || v[1] != floor(v[1]) || v[0] < 0 || v[0] >= nd || v[1] < -1 ||
        v[1] >= nd || v[0] == v[1]) {
      cudaq_predecoder__set_error(err, "model metadata '%s': edge %zu (%g, %g) is not two distinct "
                                  "detectors of %u (or a detector and -1, the boundary)", EDGES_KEY, i,
                                  v[0], v[1], nd);
      return CUDAQ_PREDECODER_ERR_MODEL;
    }
    int32_t a = (int32_t)v[0], b = (int32_t)v[1];
    size_t e;
    cudaq_mwpm_edge_t ge;
    if (cudaq_mwpm_graph_find_edge(g, a, b < 0 ? CUDAQ_MWPM_BOUNDARY : b, &e)) {
      char far[32] = "the boundary";
      if (b >= 0)
        snprintf(far, sizeof far, "detector %d", b);
      cudaq_predecoder__set_error(err, "model edge %zu (detector %d to %s) is not an edge of the DEM's "
                                  "matching graph: the model was made for another error model", i, a, far);
      return CUDAQ_PREDECODER_ERR_MODEL;
    }
    cudaq_mwpm_graph_edge(g, e, &ge);
    if (ge.weight < 0.0) {
      cudaq_predecoder__set_error(err, "model edge %zu: the DEM's edge from detector %d to %s%d has "
                                  "probability > 1/2 (negative weight), which weighted matching does not "
                                  "take", i, a, b < 0 ? "the boundary" : "detector ", b < 0 ? 0 : b);
      return CUDAQ_PREDECODER_ERR_MODEL;
    }
    w->edge[i] = (uint32_t)e;
    w->ends[2 * i] = a;
    w->ends[2 * i + 1] = b;
    w->obs[i] = ge.obs_mask;
    i++;
    s = cudaq_predecoder__skip_ws(s);
    if (*s == ',') {
      s = cudaq_predecoder__skip_ws(s + 1);
      if (*s != '[')
        goto malformed; /* a trailing comma */
    } else if (*s != ']') {
      goto malformed;
    }
  }
  if (*cudaq_predecoder__skip_ws(s + 1) != '\0')
    goto malformed;
  if (i != w->n) {
    cudaq_predecoder__set_error(err, "model metadata '%s' lists %zu edges, output '%s' has %zu", EDGES_KEY,
                                i, LOGITS_NAME, w->n);
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  return CUDAQ_PREDECODER_OK;
malformed:
  cudaq_predecoder__set_error(err, "model metadata '%s' is not a list of [detector, detector or -1] pairs",
                              EDGES_KEY);
  return CUDAQ_PREDECODER_ERR_MODEL;
}

typedef struct by_edge {
  uint32_t edge, src;
} by_edge_t;

static int cmp_by_edge(const void *x, const void *y) {
  const by_edge_t *p = x, *q = y;
  return p->edge < q->edge ? -1 : p->edge > q->edge;
}

/* Puts the map (read in the model's order) in the graph's edge order. */
static int sort_by_edge(pd__weights_t *w) {
  by_edge_t *t = malloc(w->n * sizeof *t);
  if (!t)
    return 1;
  for (size_t i = 0; i < w->n; i++)
    t[i] = (by_edge_t){w->edge[i], (uint32_t)i};
  qsort(t, w->n, sizeof *t, cmp_by_edge);
  for (size_t j = 0; j < w->n; j++) {
    w->edge[j] = t[j].edge;
    w->src[j] = t[j].src;
  }
  free(t);
  return 0;
}

cudaq_predecoder_status_t cudaq_predecoder__weights_create(const cudaq_nn_model_t *m,
                                                           const cudaq_mwpm_graph_t *g,
                                                           cudaq_predecoder_weights_t mode,
                                                           uint32_t nd, pd__weights_t **out,
                                                           cudaq_predecoder_error_t *err) {
  *out = NULL; /* mode: one of the three (cudaq_predecoder__weights_mode_check, by the callers) */
  if (mode == CUDAQ_PREDECODER_WEIGHTS_OFF || (mode == CUDAQ_PREDECODER_WEIGHTS_AUTO && !g))
    return CUDAQ_PREDECODER_OK; /* a caller without a match graph does not match with weights */
  long oi = find_output(m);
  if (oi < 0) {
    if (mode == CUDAQ_PREDECODER_WEIGHTS_AUTO)
      return CUDAQ_PREDECODER_OK;
    cudaq_predecoder__set_error(err, "weighted matching asked for, but the model has no output '%s' "
                                "(export it with tools/predecoder/export.py --edge-logits)", LOGITS_NAME);
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  cudaq_nn_binding_t b;
  cudaq_nn_model_output(m, (size_t)oi, &b);
  if (b.dtype != CUDAQ_NN_FLOAT || b.rank != 2 || b.shape[0] != 1 || b.shape[1] < 1) {
    cudaq_predecoder__set_error(err, "model output '%s' must be float [1, E] (E >= 1), it is %s of rank %d",
                                LOGITS_NAME, cudaq_nn_dtype_name(b.dtype), b.rank);
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  const char *edges = cudaq_nn_model_metadata(m, EDGES_KEY), *th = cudaq_nn_model_metadata(m, THRESHOLD_KEY);
  if (!edges || !th) {
    cudaq_predecoder__set_error(err, "model output '%s' needs the metadata '%s' (missing)", LOGITS_NAME,
                                edges ? THRESHOLD_KEY : EDGES_KEY);
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  char *end;
  double t = cudaq_dem_strtod(th, &end);
  if (end == th || *cudaq_predecoder__skip_ws(end) != '\0' || !isfinite(t)) {
    cudaq_predecoder__set_error(err, "model metadata '%s' is '%.40s', not a number", THRESHOLD_KEY, th);
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  if (!g) {
    cudaq_predecoder__set_error(err, "weighted matching (weights ON) needs the matching graph its "
                                "weights are for (match_graph)");
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  if (cudaq_mwpm_graph_num_nodes(g) != nd) {
    cudaq_predecoder__set_error(err, "the match graph has %u detectors, the predecoder %u",
                                cudaq_mwpm_graph_num_nodes(g), nd);
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  pd__weights_t *w = calloc(1, sizeof *w);
  if (!w) {
    cudaq_predecoder__set_error(err, "out of memory");
    return CUDAQ_PREDECODER_ERR_NO_MEMORY;
  }
  w->n = (size_t)b.shape[1];
  /* The graph compares float logits with a float constant (an FP16 engine: both in FP16, the
   * same comparison where the threshold is a half, as the shipped 3 is) */
  w->threshold = (float)t;
  w->edge = malloc(w->n * sizeof *w->edge);
  w->src = malloc(w->n * sizeof *w->src);
  w->ends = malloc(2 * w->n * sizeof *w->ends);
  w->obs = malloc(w->n * sizeof *w->obs);
  w->fold = malloc(w->n * sizeof *w->fold);
  w->res = calloc(nd ? nd : 1, 1);
  if (!w->edge || !w->src || !w->ends || !w->obs || !w->fold || !w->res) {
    cudaq_predecoder__weights_destroy(w);
    cudaq_predecoder__set_error(err, "out of memory");
    return CUDAQ_PREDECODER_ERR_NO_MEMORY;
  }
  cudaq_predecoder_status_t st = read_edges(w, edges, g, nd, err);
  if (!st && sort_by_edge(w)) {
    cudaq_predecoder__set_error(err, "out of memory");
    st = CUDAQ_PREDECODER_ERR_NO_MEMORY;
  }
  for (size_t j = 1; !st && j < w->n; j++)
    if (w->edge[j] == w->edge[j - 1]) { /* which weight would count? */
      cudaq_predecoder__set_error(err, "model metadata '%s' lists one edge twice (entries %u and %u)",
                                  EDGES_KEY, w->src[j - 1] < w->src[j] ? w->src[j - 1] : w->src[j],
                                  w->src[j - 1] < w->src[j] ? w->src[j] : w->src[j - 1]);
      st = CUDAQ_PREDECODER_ERR_MODEL;
    }
  if (st) {
    cudaq_predecoder__weights_destroy(w);
    return st;
  }
  w->map = (cudaq_predecoder_edge_map_t){w->n, (size_t)oi, w->threshold, w->edge, w->src, w->ends, w->obs, w};
  *out = w;
  return CUDAQ_PREDECODER_OK;
}

/* Logits scanned per chunk without branches (the compiler vectorises it);
 * only a chunk with a fold or a non-finite logit is looked at one by one.
 * The weights themselves are never written: MWPM reads |logit| where it
 * needs one (cudaq_mwpm_decode_mapped). */
#define SCAN_CHUNK 64

cudaq_predecoder_status_t cudaq_predecoder__weights_apply(pd__weights_t *w, const float *logits,
                                                          const int32_t *model_residual,
                                                          uint32_t nd, uint32_t *residual,
                                                          size_t *num_residual, uint64_t *frame,
                                                          cudaq_predecoder_error_t *err) {
  const float t = w->threshold;
  size_t nfold = 0;
  for (size_t i0 = 0; i0 < w->n; i0 += SCAN_CHUNK) {
    size_t i1 = i0 + SCAN_CHUNK < w->n ? i0 + SCAN_CHUNK : w->n;
    int flag = 0;
    for (size_t i = i0; i < i1; i++) {
      float x = logits[i];
      flag |= cudaq_predecoder_logit_folds(x, t) | cudaq_predecoder_logit_bad(x);
    }
    if (!flag)
      continue;
    for (size_t i = i0; i < i1; i++) {
      float x = logits[i];
      if (cudaq_predecoder_logit_bad(x)) {
        cudaq_predecoder__set_error(err, "model output '%s'[%zu] is %g, not a finite logit", LOGITS_NAME,
                                    i, (double)x);
        return CUDAQ_PREDECODER_ERR_OUTPUT;
      }
      if (cudaq_predecoder_logit_folds(x, t)) /* threshold 0 and the model's disagree: fold it in */
        w->fold[nfold++] = (uint32_t)i;
    }
  }
  size_t r = 0;
  if (!nfold) {
    for (uint32_t d = 0; d < nd; d++)
      if (model_residual[d])
        residual[r++] = d;
    *num_residual = r;
    return CUDAQ_PREDECODER_OK;
  }
  for (uint32_t d = 0; d < nd; d++)
    w->res[d] = (uint8_t)model_residual[d];
  uint64_t f = *frame;
  for (size_t j = 0; j < nfold; j++) {
    uint32_t i = w->fold[j];
    w->res[w->ends[2 * i]] ^= 1;
    if (w->ends[2 * i + 1] >= 0)
      w->res[w->ends[2 * i + 1]] ^= 1;
    f ^= w->obs[i];
  }
  for (uint32_t d = 0; d < nd; d++)
    if (w->res[d])
      residual[r++] = d;
  *num_residual = r;
  *frame = f;
  return CUDAQ_PREDECODER_OK;
}

/* ------------------------------------------------- the map for other runners */

cudaq_predecoder_status_t cudaq_predecoder_edge_map_create(const cudaq_nn_model_t *model,
                                                           const cudaq_mwpm_graph_t *match_graph,
                                                           cudaq_predecoder_weights_t mode,
                                                           cudaq_predecoder_edge_map_t *out,
                                                           cudaq_predecoder_error_t *err) {
  if (out)
    memset(out, 0, sizeof *out);
  if (!model || !match_graph || !out) {
    cudaq_predecoder__set_error(err, "edge map: %s is NULL", !model ? "model" : !match_graph ? "match_graph"
                                : "out");
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  pd__weights_t *w = NULL;
  cudaq_predecoder_status_t st = cudaq_predecoder__weights_mode_check(mode, err);
  if (!st)
    st = cudaq_predecoder__weights_create(model, match_graph, mode, cudaq_mwpm_graph_num_nodes(match_graph), &w,
                                          err);
  if (st || !w)
    return st; /* !w: OFF, or AUTO and a model without edge logits: no map (num_edges 0) */
  *out = w->map; /* its impl_ owns the arrays */
  return CUDAQ_PREDECODER_OK;
}

void cudaq_predecoder_edge_map_release(cudaq_predecoder_edge_map_t *m) {
  if (!m)
    return;
  cudaq_predecoder__weights_destroy(m->impl_);
  memset(m, 0, sizeof *m);
}
