/*
 * The detector layout an ONNX predecoder was made for, against a DEM's.
 *
 * A model maps detector i of its input to a place in its (round, row,
 * column) grid fixed at export, from the detector coordinates of the
 * circuit it was trained on. Another circuit with the same number of
 * detectors (the other basis of the same distance, another layout) fits
 * the model's shapes but not its grid: the model would run and answer
 * nonsense. Models that record their layout (metadata entry
 * `detector_coordinates`, models/README.md) are checked here against the
 * DEM's own `detector(...)` coordinates, up to one translation (the same
 * layout shifted in space or time).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaq/qec/dem.h" /* CUDAQ_DEM_MAX_COORDS */
#include "predecoder_internal.h"

#define LAYOUT_KEY "detector_coordinates"

const char *cudaq_predecoder__skip_ws(const char *s) {
  while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
    s++;
  return s;
}

/* predecoder_internal.h: one "[a, b, ...]" into v (at most
 * CUDAQ_DEM_MAX_COORDS numbers); the position after ']' or NULL. */
const char *cudaq_predecoder__parse_tuple(const char *s, double *v, size_t *n) {
  *n = 0;
  s = cudaq_predecoder__skip_ws(s);
  if (*s != '[')
    return NULL;
  s = cudaq_predecoder__skip_ws(s + 1);
  if (*s == ']')
    return s + 1;
  for (;;) {
    /* a JSON number: '-' or a digit first, then digits, '.', exponent */
    if (*s != '-' && (*s < '0' || *s > '9'))
      return NULL;
    char *end;
    double x = cudaq_dem_strtod(s, &end);
    if (end == s || !isfinite(x) || *n == CUDAQ_DEM_MAX_COORDS)
      return NULL;
    for (const char *c = s; c < end; c++)
      if (!strchr("0123456789+-.eE", *c))
        return NULL; /* hexadecimal, "inf", "nan" */
    v[(*n)++] = x;
    s = cudaq_predecoder__skip_ws(end);
    if (*s == ']')
      return s + 1;
    if (*s != ',')
      return NULL;
    s = cudaq_predecoder__skip_ws(s + 1);
  }
}

static void tuple_str(const double *v, size_t n, char *buf, size_t len) {
  size_t at = 0;
  buf[0] = '\0';
  for (size_t k = 0; k < n && at < len; k++)
    at += (size_t)snprintf(buf + at, len - at, "%s%g", k ? ", " : "", v[k]);
}

/* The task name of the model's `circuit` metadata ("the model's circuit"
 * where there is none), for messages. */
static void model_task(const cudaq_nn_model_t *model, char *buf, size_t len) {
  snprintf(buf, len, "its training circuit");
  const char *c = cudaq_nn_model_metadata(model, "circuit");
  const char *t = c ? strstr(c, "\"task\"") : NULL;
  if (t && (t = strchr(t + 6, '"'))) {
    const char *e = strchr(t + 1, '"');
    if (e && e - t - 1 < 80)
      snprintf(buf, len, "%.*s", (int)(e - t - 1), t + 1);
  }
}

cudaq_predecoder_status_t cudaq_predecoder_check_layout(const cudaq_nn_model_t *model,
                                                        const cudaq_mwpm_graph_t *graph,
                                                        int *checked,
                                                        cudaq_predecoder_error_t *err) {
  if (checked)
    *checked = 0;
  if (!model || !graph) {
    cudaq_predecoder__set_error(err, "%s is NULL", model ? "graph" : "model");
    return CUDAQ_PREDECODER_ERR_INVALID_ARG;
  }
  const char *s = cudaq_nn_model_metadata(model, LAYOUT_KEY);
  if (!s)
    return CUDAQ_PREDECODER_OK; /* the model records no layout */
  const uint32_t nd = cudaq_mwpm_graph_num_nodes(graph);
  uint32_t with = 0;
  for (uint32_t d = 0; d < nd; d++) {
    const double *c;
    size_t n;
    with += !cudaq_mwpm_graph_coords(graph, d, &c, &n) && n > 0;
  }
  char task[96];
  model_task(model, task, sizeof task);
  if (with == 0) { /* a model of another circuit with as many detectors would run unnoticed */
    cudaq_predecoder__set_error(err, "the DEM has no detector coordinates, so the model's detector layout "
                                "(%s) cannot be checked (a model of another circuit with as many "
                                "detectors would answer wrongly): use a DEM with coordinates or skip "
                                "the check (--skip_layout_check, check_layout=False)", task);
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  if (with < nd) {
    cudaq_predecoder__set_error(err, "the DEM gives coordinates to %u of its %u detectors: the model's "
                                "detector layout (%s) cannot be checked (--skip_layout_check; Python "
                                "check_layout=False)", with, nd, task);
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  s = cudaq_predecoder__skip_ws(s);
  if (*s != '[')
    goto malformed;
  s++;
  double off[CUDAQ_DEM_MAX_COORDS] = {0}; /* detector 0's shift; 0 past its coordinate count */
  uint32_t d = 0;
  for (;; d++) {
    s = cudaq_predecoder__skip_ws(s);
    if (*s == ']' && d == 0)
      break;
    double v[CUDAQ_DEM_MAX_COORDS];
    size_t n;
    if (!(s = cudaq_predecoder__parse_tuple(s, v, &n)))
      goto malformed;
    if (d < nd) {
      const double *c;
      size_t cn;
      cudaq_mwpm_graph_coords(graph, d, &c, &cn);
      int same = cn == n;
      for (size_t k = 0; same && k < n; k++) {
        if (d == 0)
          off[k] = c[k] - v[k];
        double want = v[k] + off[k];
        same = fabs(c[k] - want) <= 1e-6 * (1.0 + fabs(want));
      }
      if (!same) {
        char a[96], b[96];
        tuple_str(c, cn, a, sizeof a);
        tuple_str(v, n, b, sizeof b);
        cudaq_predecoder__set_error(err, "the DEM's detector layout is not the model's (%s): detector %u "
                                    "is at (%s) in the DEM, (%s) in the model%s", task, d, a, b,
                                    d ? " (a shift of the whole layout is allowed, not a change)" : "");
        return CUDAQ_PREDECODER_ERR_MODEL;
      }
    }
    s = cudaq_predecoder__skip_ws(s);
    if (*s == ']') {
      d++;
      break;
    }
    if (*s != ',')
      goto malformed;
    s++;
  }
  if (*cudaq_predecoder__skip_ws(s + 1) != '\0')
    goto malformed;
  if (d != nd) {
    cudaq_predecoder__set_error(err, "the model's layout (%s) has %u detectors, the DEM %u", task, d, nd);
    return CUDAQ_PREDECODER_ERR_MODEL;
  }
  if (checked)
    *checked = 1;
  return CUDAQ_PREDECODER_OK;
malformed:
  cudaq_predecoder__set_error(err, "model metadata '%s' is not a list of coordinate lists (of at most "
                              "%u numbers each)", LAYOUT_KEY, CUDAQ_DEM_MAX_COORDS);
  return CUDAQ_PREDECODER_ERR_MODEL;
}
