/* Internal declarations of the MWPM library (not installed). */
#ifndef CUDAQ_MWPM_INTERNAL_H
#define CUDAQ_MWPM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cudaq/qec/dem.h"
#include "cudaq/qec/mwpm.h"

/* Immutable matching graph in compressed-sparse-row form. adj[].to is -1 for
 * the boundary. Integer weights are even (so that every event of the sparse
 * blossom algorithm happens at an integer time) and non-negative: edges of
 * negative weight are stored with |w| and listed in neg_edges, and the
 * decoder folds them into each shot. */
/* One adjacency entry: the neighbour (-1: boundary) and the even integer
 * weight (at most 2^24), packed so the inner loops read one stream. */
typedef struct cudaq_mwpm__adj {
  int32_t to;
  int32_t w;
} cudaq_mwpm__adj_t;

struct cudaq_mwpm_graph {
  uint32_t num_nodes;
  uint32_t num_observables;
  uint32_t *adj_start;  /* num_nodes + 1 */
  cudaq_mwpm__adj_t *adj;
  double *adj_wf;       /* |weight| as a double */
  uint64_t *adj_obs;
  uint32_t *adj_edge;   /* index into edges */
  cudaq_mwpm_edge_t *edges;
  size_t num_edges;
  uint32_t *neg_edges;
  size_t num_neg_edges;
  double neg_weight;    /* sum of the negative weights */
  uint64_t neg_obs;     /* xor of their observables */
  double scale;         /* integer weight = 2 * llround(|w| * scale) */
  double *coords;
  uint32_t *coord_start;
};

void cudaq_mwpm__set_error(cudaq_mwpm_error_t *err, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int cudaq_mwpm__grow(void **ptr, size_t *cap, size_t need, size_t elem);
int cudaq_mwpm__read_file(const char *path, char **out, size_t *len);
/* Gaps between two growing regions found odd (always 0 when weights are even). */
uint64_t cudaq_mwpm__parity_violations(const cudaq_mwpm_decoder_t *d);

#endif
