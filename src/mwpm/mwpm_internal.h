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
  /* edge_adj[2i], edge_adj[2i+1] are edge i's adjacency positions (the
   * second UINT32_MAX for a boundary edge). */
  uint32_t *edge_adj;              /* 2 * num_edges */
  /* per_shot_weights: decoders keep their own weights
   * (cudaq_mwpm_decode_weighted). */
  int per_shot;
  /* Correlated matching (correlated.c), only with enable_correlations: the
   * rules of causal edge i are corr_rules[corr_start[i] .. corr_start[i+1]). */
  int has_corr;
  uint32_t *corr_start;            /* num_edges + 1 */
  struct cudaq_mwpm__corr_rule *corr_rules;
  size_t num_corr_rules;
};

/* A reweighting rule: edge `edge` weighs at most w (even integer, scaled as
 * the graph's) / wf (the double weight) while the causal edge is in the
 * first pass's correction. */
typedef struct cudaq_mwpm__corr_rule {
  uint32_t edge;
  int32_t w;
  double wf;
} cudaq_mwpm__corr_rule_t;

/* Per-decoder weights, for correlated matching and for per-shot weights
 * (cudaq_mwpm_decode_weighted): the decoder's own copy of the weights (the
 * flooder reads these), the edges reweighted (restored from the graph before
 * the next decode), and correlated matching's scratch. All sized at
 * creation. */
typedef struct cudaq_mwpm__corr {
  cudaq_mwpm__adj_t *adj;
  double *adj_wf;
  uint32_t *dirty;      /* edges whose weights differ from the graph's */
  size_t ndirty;
  uint32_t *pass1;      /* distinct edges of the first pass's correction */
  size_t npass1;
  uint8_t *edge_mark;   /* per edge: 1 in pass1, 2 dirty */
  uint32_t *stamp;      /* per edge: the per-shot-weights call that last set it */
  uint32_t epoch;       /* that call's number */
  uint32_t *path;       /* one pair's path (num_nodes + 1) */
  uint32_t *list;       /* dense input as a list (num_nodes) */
  int armed;            /* the second pass runs on the lowered weights */
  /* Mapped per-shot weights (shot_weights.c, cudaq_mwpm_decode_mapped): a
   * node's adjacency weights are read from `values` when the matcher first
   * looks at it in a shot (node_stamp != node_epoch), so a shot costs the
   * nodes it reaches, not the graph. */
  uint32_t *adj_slot;   /* per adjacency entry: its value's index, or UINT32_MAX (graph weight) */
  size_t num_values;    /* the map's value count (0: no map) */
  const float *values;  /* the current mapped shot's values, NULL outside one (the flooder's test) */
  uint32_t *node_stamp; /* per node: the mapped shot that last read its weights */
  uint32_t node_epoch;
  uint32_t *node_list;  /* nodes whose weights differ from the graph's (restored at the next plain decode) */
  uint8_t *node_in;     /* per node: in node_list */
  size_t nnode_list;
  double wcap;          /* per-shot weights clamp here (shot_weights.c) */
  int bad_value;        /* a value read this shot was NaN or infinite */
} cudaq_mwpm__corr_t;

/* correlated.c: builds the rules of g from dem (g built from dem); frees
 * them with the graph; per-decoder state. */
cudaq_mwpm_status_t cudaq_mwpm__corr_build(cudaq_mwpm_graph_t *g, const cudaq_dem_t *dem,
                                           cudaq_mwpm_error_t *err);
void cudaq_mwpm__corr_free_graph(cudaq_mwpm_graph_t *g);
cudaq_mwpm__corr_t *cudaq_mwpm__corr_create(const cudaq_mwpm_graph_t *g);
void cudaq_mwpm__corr_destroy(cudaq_mwpm__corr_t *c);
/* Called at the start of every decode: restores the graph's weights unless
 * the correlated second pass or a per-shot decode is running. */
void cudaq_mwpm__corr_before_decode(cudaq_mwpm__corr_t *c, const cudaq_mwpm_graph_t *g);
/* Edge f's weights in the decoder's copy back to the graph's; f no longer
 * dirty (the caller drops it from the list). */
void cudaq_mwpm__restore_edge(cudaq_mwpm__corr_t *c, const cudaq_mwpm_graph_t *g, uint32_t f);
/* Every dirty edge restored (cudaq_mwpm__restore_edge), the list emptied. */
void cudaq_mwpm__restore_dirty(cudaq_mwpm__corr_t *c, const cudaq_mwpm_graph_t *g);
/* shot_weights.c: the mapped weights' nodes back to the graph's weights and
 * no mapped shot current; frees the map's arrays. */
void cudaq_mwpm__mapped_restore(cudaq_mwpm__corr_t *c, const cudaq_mwpm_graph_t *g);
void cudaq_mwpm__mapped_free(cudaq_mwpm__corr_t *c);
/* Node x's adjacency weights from the current mapped shot's values
 * (decoder_internal.h's weights_at calls it once per node and shot). */
void cudaq_mwpm__mapped_read(cudaq_mwpm__corr_t *c, const cudaq_mwpm_graph_t *g, int32_t x);

/* decoder.c hooks for correlated.c: the decoder's correlation state (NULL
 * without correlations), and a shortest path a -> b (b < 0: the boundary)
 * on the decoder's current weights, edge indices appended to out. */
cudaq_mwpm__corr_t *cudaq_mwpm__decoder_corr(cudaq_mwpm_decoder_t *d);
const cudaq_mwpm_graph_t *cudaq_mwpm__decoder_graph(const cudaq_mwpm_decoder_t *d);
cudaq_mwpm_status_t cudaq_mwpm__decoder_path(cudaq_mwpm_decoder_t *d, int32_t a, int32_t b,
                                             uint32_t *out, size_t cap, size_t *n);

void cudaq_mwpm__set_error(cudaq_mwpm_error_t *err, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int cudaq_mwpm__grow(void **ptr, size_t *cap, size_t need, size_t elem);
int cudaq_mwpm__read_file(const char *path, char **out, size_t *len);
/* Gaps between two growing regions found odd (always 0 when weights are even). */
uint64_t cudaq_mwpm__parity_violations(const cudaq_mwpm_decoder_t *d);

#endif
