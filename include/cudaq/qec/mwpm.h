/*
 * Exact minimum-weight perfect matching (MWPM) decoder.
 *
 * A matching graph (detectors plus one boundary) is built once, from a
 * detector error model or from explicit edges, and is immutable afterwards:
 * any number of threads may share it. Each thread creates its own decoder
 * (a small state sized from the graph at creation); decoding a shot then
 * allocates nothing, takes no lock and makes no system call.
 *
 * The decoder implements the sparse blossom algorithm (regions growing on the
 * detector graph, events on a priority queue, Edmonds' blossoms). Weights are
 * discretised to even integers with about 2^24 levels up to the largest edge
 * weight, so the solution is an exact minimum for the discretised weights;
 * the weight reported is the sum of the original (double) weights of the
 * edges used, which is within (edges used) x (max weight) x 2^-24 of the
 * exact minimum.
 */
#ifndef CUDAQ_QEC_MWPM_H
#define CUDAQ_QEC_MWPM_H

#include <stddef.h>
#include <stdint.h>

#include "cudaq/qec/dem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDAQ_MWPM_BOUNDARY (-1)

/* How parallel edges (same two endpoints) are merged. */
typedef enum cudaq_mwpm_merge {
  /* Independent errors: p = p1 (1 - p2) + p2 (1 - p1); the observables of
   * the first edge are kept. */
  CUDAQ_MWPM_MERGE_INDEPENDENT = 0,
  /* Keep the edge with the smallest weight (and its observables). */
  CUDAQ_MWPM_MERGE_SMALLEST_WEIGHT = 1
} cudaq_mwpm_merge_t;

typedef struct cudaq_mwpm_graph_options {
  cudaq_mwpm_merge_t merge;
  /* Non-zero: keep the correlation structure of the DEM's decomposed errors
   * ('^') for cudaq_mwpm_decode_correlated (PyMatching 2.4's
   * enable_correlations=True at load time). The edges and weights are those
   * of the plain graph. Default 0. */
  int enable_correlations;
  /* Non-zero: every decoder made from the graph keeps its own copy of the
   * weights (memory, per decoder: 16 bytes per edge end and about 13 per
   * edge), so that cudaq_mwpm_decode_weighted and cudaq_mwpm_decode_mapped
   * can replace edges' weights for one shot. Default 0. */
  int per_shot_weights;
} cudaq_mwpm_graph_options_t;

/* An edge given to or read from a graph: v = CUDAQ_MWPM_BOUNDARY connects u
 * to the boundary. */
typedef struct cudaq_mwpm_edge {
  int32_t u;
  int32_t v;
  double weight;
  uint64_t obs_mask;
} cudaq_mwpm_edge_t;

typedef struct cudaq_mwpm_graph cudaq_mwpm_graph_t;
typedef struct cudaq_mwpm_decoder cudaq_mwpm_decoder_t;

/* One matched pair of detection events (b = CUDAQ_MWPM_BOUNDARY when a is
 * matched to the boundary). */
typedef struct cudaq_mwpm_pair {
  int32_t a;
  int32_t b;
} cudaq_mwpm_pair_t;

typedef struct cudaq_mwpm_result {
  uint64_t obs_mask;   /* observables flipped by the correction */
  double weight;       /* total weight of the edges of the correction */
  size_t num_pairs;    /* matched pairs, see cudaq_mwpm_decoder_pairs */
} cudaq_mwpm_result_t;

/* Sets the default options (independent merge, no correlations, no per-shot
 * weights). Returns CUDAQ_MWPM_OK or
 * CUDAQ_MWPM_ERR_INVALID_ARG (opts NULL). */
cudaq_mwpm_status_t cudaq_mwpm_graph_options_init(cudaq_mwpm_graph_options_t *opts);

/* Builds the matching graph of a parsed model: nodes are its detectors plus
 * the boundary, weight ln((1-p)/p), parallel edges merged as opts says
 * (opts NULL: defaults), detector coordinates copied. Errors of probability
 * 0 add no edge. With opts->enable_correlations, also the reweighting rules
 * of correlated matching (see cudaq_mwpm_decode_correlated): for every pair
 * of components e, f of one decomposed error, when e is in the first pass's
 * correction, f's weight becomes at most ln((1-q)/q) with
 * q = min(0.5, P(e and f) / P(e)), the probabilities XOR-combined over all
 * errors (as PyMatching 2.4 does). Returns CUDAQ_MWPM_OK;
 * CUDAQ_MWPM_ERR_INVALID_ARG (dem or out NULL, bad merge option; with
 * correlations, an error of probability > 0.5, which err names);
 * CUDAQ_MWPM_ERR_NO_MEMORY. err may be NULL. */
cudaq_mwpm_status_t cudaq_mwpm_graph_from_dem(const cudaq_dem_t *dem,
                                              const cudaq_mwpm_graph_options_t *opts,
                                              cudaq_mwpm_graph_t **out, cudaq_mwpm_error_t *err);

/* Builds a graph from explicit weighted edges (weights may be negative; a
 * NaN or infinite weight is refused). opts->enable_correlations is refused
 * here (edges carry no decomposition; CUDAQ_MWPM_ERR_INVALID_ARG). Returns CUDAQ_MWPM_OK;
 * CUDAQ_MWPM_ERR_INVALID_ARG (NULL pointers, an endpoint out of range, a
 * self-loop, a non-finite weight, bad option); CUDAQ_MWPM_ERR_TOO_LARGE
 * (num_nodes over CUDAQ_DEM_MAX_DETECTORS); CUDAQ_MWPM_ERR_NO_MEMORY. */
cudaq_mwpm_status_t cudaq_mwpm_graph_from_edges(uint32_t num_nodes, uint32_t num_observables,
                                                const cudaq_mwpm_edge_t *edges, size_t num_edges,
                                                const cudaq_mwpm_graph_options_t *opts,
                                                cudaq_mwpm_graph_t **out);

/* Frees a graph (NULL ignored). Every decoder made from it must be destroyed
 * first. */
void cudaq_mwpm_graph_destroy(cudaq_mwpm_graph_t *graph);

/* Read-only queries (thread-safe). A NULL graph gives 0. */
uint32_t cudaq_mwpm_graph_num_nodes(const cudaq_mwpm_graph_t *graph);
uint32_t cudaq_mwpm_graph_num_observables(const cudaq_mwpm_graph_t *graph);
size_t cudaq_mwpm_graph_num_edges(const cudaq_mwpm_graph_t *graph);

/* Non-zero when the graph was built with enable_correlations; and the
 * number of its reweighting rules (pairs causal edge -> affected edge that
 * can lower a weight). A NULL graph gives 0. */
int cudaq_mwpm_graph_has_correlations(const cudaq_mwpm_graph_t *graph);
size_t cudaq_mwpm_graph_num_correlation_rules(const cudaq_mwpm_graph_t *graph);

/* Copies merged edge i out. Returns CUDAQ_MWPM_OK or
 * CUDAQ_MWPM_ERR_INVALID_ARG (NULL, i out of range). */
cudaq_mwpm_status_t cudaq_mwpm_graph_edge(const cudaq_mwpm_graph_t *graph, size_t i,
                                          cudaq_mwpm_edge_t *out);

/* The index of the merged edge between nodes u and v (either may be
 * CUDAQ_MWPM_BOUNDARY; order does not matter) in *index. Not for the hot
 * path (it scans u's adjacency). Returns CUDAQ_MWPM_OK;
 * CUDAQ_MWPM_ERR_INVALID_ARG (NULL, a node out of range, u == v, both the
 * boundary); CUDAQ_MWPM_ERR_OUT_OF_RANGE (no such edge). */
cudaq_mwpm_status_t cudaq_mwpm_graph_find_edge(const cudaq_mwpm_graph_t *graph, int32_t u,
                                               int32_t v, size_t *index);

/* Coordinates of detector d: *coords points into the graph (valid while it
 * lives), *n may be 0. Returns CUDAQ_MWPM_OK or CUDAQ_MWPM_ERR_INVALID_ARG. */
cudaq_mwpm_status_t cudaq_mwpm_graph_coords(const cudaq_mwpm_graph_t *graph, uint32_t d,
                                            const double **coords, size_t *n);

/* Creates one thread's decoder state for a graph (all memory for decoding is
 * allocated here). Returns CUDAQ_MWPM_OK; CUDAQ_MWPM_ERR_INVALID_ARG;
 * CUDAQ_MWPM_ERR_NO_MEMORY. */
cudaq_mwpm_status_t cudaq_mwpm_decoder_create(const cudaq_mwpm_graph_t *graph,
                                              cudaq_mwpm_decoder_t **out);

/* Frees a decoder (NULL ignored). */
void cudaq_mwpm_decoder_destroy(cudaq_mwpm_decoder_t *dec);

/* Decodes one shot given as a list of detectors with a detection event (a
 * detector listed twice cancels). Hot path: no allocation after warm-up (the
 * event queue may grow during the first shots), no lock, no system call.
 * Returns CUDAQ_MWPM_OK; CUDAQ_MWPM_ERR_INVALID_ARG (NULL dec or res, NULL
 * events with num_events > 0); CUDAQ_MWPM_ERR_OUT_OF_RANGE (a detector index
 * >= the number of nodes); CUDAQ_MWPM_ERR_NO_SOLUTION (some component of the
 * graph without a boundary holds an odd number of events);
 * CUDAQ_MWPM_ERR_NO_MEMORY (the event queue could not grow). */
cudaq_mwpm_status_t cudaq_mwpm_decode(cudaq_mwpm_decoder_t *dec, const uint32_t *events,
                                      size_t num_events, cudaq_mwpm_result_t *res);

/* The same with one byte per detector (non-zero = detection event). Returns
 * the statuses of cudaq_mwpm_decode. */
cudaq_mwpm_status_t cudaq_mwpm_decode_dense(cudaq_mwpm_decoder_t *dec, const uint8_t *dets,
                                            cudaq_mwpm_result_t *res);

/* Two-pass correlated matching (PyMatching 2.4's decode with
 * enable_correlations=True; arXiv:1310.0863): decodes once, finds the edges
 * of that correction (a shortest path per matched pair), lowers the weight of
 * every edge correlated with one of them (the graph's rules: an edge's weight
 * is the smallest of its own and the rules' weights), decodes again on the
 * lowered weights and reports that second decode (obs_mask, pairs; weight is
 * the sum of the lowered weights used). The decoder's private copy of the
 * weights is changed, never the shared graph; the lowered weights stay until
 * the decoder's next decode (so cudaq_mwpm_decoder_edges sees them).
 * Allocates nothing per shot. The graph must have been built with
 * enable_correlations. Returns the statuses of cudaq_mwpm_decode, and
 * CUDAQ_MWPM_ERR_INVALID_ARG for a graph without correlations. */
cudaq_mwpm_status_t cudaq_mwpm_decode_correlated(cudaq_mwpm_decoder_t *dec, const uint32_t *events,
                                                 size_t num_events, cudaq_mwpm_result_t *res);

/* The same with one byte per detector (non-zero = detection event). */
cudaq_mwpm_status_t cudaq_mwpm_decode_dense_correlated(cudaq_mwpm_decoder_t *dec,
                                                       const uint8_t *dets,
                                                       cudaq_mwpm_result_t *res);

/* Decodes one shot with per-shot weights: edge edges[i] (an index for
 * cudaq_mwpm_graph_edge) weighs weights[i] for this shot, every other edge
 * its graph weight. For soft information from a predecoder: an edge's
 * weight ln((1-q)/q) from the probability q that it fired given the
 * syndrome (a weight is >= 0: fold an edge with q > 1/2 into the shot
 * first, as the predecoders' residual does). Weights above 16x the graph's
 * largest are clamped to that. The weights are set in the decoder's own copy
 * (never the shared graph) and stay until its next decode
 * (cudaq_mwpm_decoder_edges sees them); the result's weight sums the
 * per-shot weights of the correction. An edge listed twice takes its last
 * weight. Hot path: allocates nothing; O(num_weights) to set the weights,
 * and the next decode of this decoder restores them. The graph must have
 * been built with per_shot_weights. Returns the statuses of
 * cudaq_mwpm_decode, and CUDAQ_MWPM_ERR_INVALID_ARG (a graph without
 * per_shot_weights, NULL edges or weights with num_weights > 0, a negative,
 * NaN or infinite weight, an edge whose graph weight is negative);
 * CUDAQ_MWPM_ERR_OUT_OF_RANGE (an edge index >= the number of edges). Both
 * are reported before any weight changes. Not combined with correlated
 * matching. */
cudaq_mwpm_status_t cudaq_mwpm_decode_weighted(cudaq_mwpm_decoder_t *dec, const uint32_t *events,
                                               size_t num_events, const uint32_t *edges,
                                               const double *weights, size_t num_weights,
                                               cudaq_mwpm_result_t *res);

/* Per-shot weights read where the matching needs them (for a graph built
 * with per_shot_weights). cudaq_mwpm_decoder_set_weight_map, once (setup:
 * allocates; calling it again replaces the map, num = 0 removes it): from
 * then on, in cudaq_mwpm_decode_mapped, edge edges[i] weighs
 * |values[slots[i]]| for the shot, every edge not listed its graph weight.
 * Setting a map ends the current mapped shot (cudaq_mwpm_decoder_edges then
 * follows the graph's weights). Returns CUDAQ_MWPM_OK;
 * CUDAQ_MWPM_ERR_INVALID_ARG (dec NULL or its graph without
 * per_shot_weights, NULL arrays with num > 0, an edge listed twice, an edge
 * whose graph weight is negative, num_values above UINT32_MAX);
 * CUDAQ_MWPM_ERR_OUT_OF_RANGE (an edge index >= the number of edges, a slot
 * >= num_values); CUDAQ_MWPM_ERR_NO_MEMORY. On an error the old map stays. */
cudaq_mwpm_status_t cudaq_mwpm_decoder_set_weight_map(cudaq_mwpm_decoder_t *dec, const uint32_t *edges,
                                                      const uint32_t *slots, size_t num,
                                                      size_t num_values);

/* Decodes one shot with the map's per-shot weights taken from values
 * (num_values floats, as set in the map): the weights of cudaq_mwpm_decode_weighted
 * (clamped and discretised the same way, so the two give the same matching
 * for the same weights), but a value is read only when the matching reaches
 * one of its edge's ends, so a shot with few events costs the part of the
 * graph its regions reach, not one write per edge. The sign of a value is
 * ignored: a signed log-odds (a predecoder's edge logit) whose positive
 * edges the caller has already applied to the events (the residual of
 * threshold 0) gives its magnitude as the weight. values must stay
 * unchanged until the next decode with dec (cudaq_mwpm_decoder_edges reads
 * them for the correction's paths). Hot path: allocates nothing. Returns
 * the statuses of cudaq_mwpm_decode, and CUDAQ_MWPM_ERR_INVALID_ARG (no map,
 * a NULL pointer, or a NaN or infinite value on an edge the matching
 * reached: the result is then not set to anything meaningful). */
cudaq_mwpm_status_t cudaq_mwpm_decode_mapped(cudaq_mwpm_decoder_t *dec, const uint32_t *events,
                                             size_t num_events, const float *values,
                                             cudaq_mwpm_result_t *res);

/* One row of a shot array as the list of its detection events: dense (one
 * byte per detector, non-zero = event) or packed (little-endian bits, as
 * numpy's packbits(bitorder='little') and stim's b8; padding bits past the
 * last detector are ignored). events needs room for num_dets entries.
 * Returns the number of events. */
size_t cudaq_mwpm_shot_events(const uint8_t *row, uint32_t num_dets, int packed, uint32_t *events);

/* Writes a prediction (observable bits obs) as one row: dense (one byte per
 * observable) or packed (little-endian bits, ceil(num_obs / 8) bytes). */
void cudaq_mwpm_write_prediction(uint8_t *row, uint64_t obs, uint32_t num_obs, int packed);

/* Flags of cudaq_mwpm_decode_batch (OR them). */
enum {
  /* Shots are bit-packed: ceil(num_nodes / 8) bytes per shot, detector d in
   * bit d % 8 of byte d / 8 (numpy's packbits(bitorder='little'), stim's b8);
   * padding bits past the last detector are ignored. Without it: num_nodes
   * bytes per shot, non-zero = detection event (as cudaq_mwpm_decode_dense). */
  CUDAQ_MWPM_BATCH_PACKED_SHOTS = 1,
  /* Predictions are bit-packed: ceil(num_observables / 8) bytes per shot,
   * little-endian bits. Without it: num_observables bytes of 0/1 per shot. */
  CUDAQ_MWPM_BATCH_PACKED_PREDICTIONS = 2,
  /* Two-pass correlated matching (cudaq_mwpm_decode_correlated). */
  CUDAQ_MWPM_BATCH_CORRELATED = 4
};

/* Decodes num_shots shots with one call on num_decoders threads: decoder i
 * (all made from the same graph, by the caller, once) is used by thread i
 * only; the calling thread is thread 0 and num_decoders - 1 threads are
 * started for the call and joined before it returns. Shots are handed out in
 * blocks of 64 from a shared counter, so the threads share the work whatever
 * the shots' costs. Row s of `shots` is shot s (layout per flags); row s of
 * `preds` receives its predicted observables; weights (may be NULL) receives
 * each shot's matching weight. The results are those of decoding the shots
 * one by one on one decoder (cudaq_mwpm_decode / _correlated), whatever
 * num_decoders. Not for the realtime hot path: it allocates its scratch and
 * starts threads per call. On a failure the status is that of the first
 * failing shot (the smallest index, as a one-thread loop would report),
 * *bad_shot (may be NULL) is its index, and the rows of the shots before it
 * are written (later rows are unspecified). Returns CUDAQ_MWPM_OK; the
 * statuses of cudaq_mwpm_decode (CUDAQ_MWPM_ERR_INVALID_ARG also for NULL
 * pointers, num_decoders 0 or over CUDAQ_MWPM_BATCH_MAX_THREADS, decoders of
 * different graphs, unknown flags, CUDAQ_MWPM_BATCH_CORRELATED on a graph
 * without correlations); CUDAQ_MWPM_ERR_NO_MEMORY; CUDAQ_MWPM_ERR_IO (a
 * thread could not be started). */
#define CUDAQ_MWPM_BATCH_MAX_THREADS 256
cudaq_mwpm_status_t cudaq_mwpm_decode_batch(cudaq_mwpm_decoder_t *const *decoders,
                                            size_t num_decoders, const uint8_t *shots,
                                            size_t num_shots, unsigned flags, uint8_t *preds,
                                            double *weights, size_t *bad_shot);

/* The graph a decoder was made from (NULL for NULL). */
const cudaq_mwpm_graph_t *cudaq_mwpm_decoder_graph(const cudaq_mwpm_decoder_t *dec);

/* The matched pairs of the last successful decode (*pairs points into the
 * decoder, valid until its next decode). Returns CUDAQ_MWPM_OK or
 * CUDAQ_MWPM_ERR_INVALID_ARG. */
cudaq_mwpm_status_t cudaq_mwpm_decoder_pairs(const cudaq_mwpm_decoder_t *dec,
                                             const cudaq_mwpm_pair_t **pairs, size_t *num_pairs);

/* The edges (indices for cudaq_mwpm_graph_edge) of the last successful
 * decode's correction: a shortest path for each matched pair, found on
 * request (not on the hot path; it runs Dijkstra searches). Writes up to cap
 * indices and the full count to *num_edges. Returns CUDAQ_MWPM_OK;
 * CUDAQ_MWPM_ERR_INVALID_ARG; CUDAQ_MWPM_ERR_TOO_LARGE (cap too small: *num_edges
 * says how many are needed). */
cudaq_mwpm_status_t cudaq_mwpm_decoder_edges(cudaq_mwpm_decoder_t *dec, uint32_t *edges,
                                             size_t cap, size_t *num_edges);

#ifdef __cplusplus
}
#endif
#endif
