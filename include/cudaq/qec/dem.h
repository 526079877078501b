/*
 * Detector error models (stim's DEM text format), reduced to the graph-like
 * errors a matching decoder needs.
 *
 * Supported: error(p) with D#/L# targets and '^' separators,
 * detector(coords) D#, logical_observable L#, shift_detectors(offsets) N,
 * nested repeat K { ... }, optional [tag]s after an instruction name, and
 * '#' comments. Instruction names are case-insensitive, as in stim.
 *
 * The parser never crashes on bad input: every problem is reported as a
 * status with the 1-based line number and a message.
 */
#ifndef CUDAQ_QEC_DEM_H
#define CUDAQ_QEC_DEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Statuses shared by the DEM parser, the matching graph, the decoder and the
 * sample readers. */
typedef enum cudaq_mwpm_status {
  CUDAQ_MWPM_OK = 0,
  CUDAQ_MWPM_ERR_INVALID_ARG = -1,   /* NULL pointer or bad option */
  CUDAQ_MWPM_ERR_PARSE = -2,         /* syntax or semantic error in a DEM */
  CUDAQ_MWPM_ERR_NOT_GRAPHLIKE = -3, /* an error component has > 2 detectors */
  CUDAQ_MWPM_ERR_NO_MEMORY = -4,
  CUDAQ_MWPM_ERR_IO = -5,            /* a file could not be opened or read */
  CUDAQ_MWPM_ERR_TOO_LARGE = -6,     /* over a documented limit */
  CUDAQ_MWPM_ERR_NO_SOLUTION = -7,   /* no set of edges has these events as boundary */
  CUDAQ_MWPM_ERR_OUT_OF_RANGE = -8,  /* detector index >= number of detectors */
  CUDAQ_MWPM_ERR_FORMAT = -9,        /* malformed sample data */
  CUDAQ_MWPM_EOF = 1                 /* sample readers: no more shots */
} cudaq_mwpm_status_t;

/* Where and why something failed. line is 1-based, 0 when not tied to a line. */
typedef struct cudaq_mwpm_error {
  size_t line;
  char message[256];
} cudaq_mwpm_error_t;

/* Limits of the parser (bad or hostile input gets CUDAQ_MWPM_ERR_TOO_LARGE). */
#define CUDAQ_DEM_MAX_DETECTORS (1u << 24)
#define CUDAQ_DEM_MAX_OBSERVABLES 64u
#define CUDAQ_DEM_MAX_EXPANDED_INSTRUCTIONS 10000000ull
#define CUDAQ_DEM_MAX_COORDS 16u

/* One graph-like component of an error: detectors u and v (v = -1 for a
 * single-detector component, which connects u to the boundary), the mask of
 * observables it flips, its probability, the DEM line it came from, and the
 * error it belongs to (the index of the error instruction as executed, after
 * repeats): the components of one error ('^'-separated) are consecutive in
 * edges and share `error`; correlated matching reads this. */
typedef struct cudaq_dem_edge {
  int32_t u;
  int32_t v;
  uint64_t obs_mask;
  double p;
  size_t line;
  size_t error;
} cudaq_dem_edge_t;

/* A parsed, flattened model. All arrays are owned by the model (read-only for
 * the caller). Coordinates of detector i are coords[coord_start[i] ..
 * coord_start[i+1]), absolute (shift_detectors offsets applied). */
typedef struct cudaq_dem {
  uint32_t num_detectors;
  uint32_t num_observables;
  cudaq_dem_edge_t *edges;
  size_t num_edges;
  size_t num_errors;             /* error instructions executed (after repeats) */
  size_t num_undetectable;       /* components with no detector (ignored) */
  double *coords;
  uint32_t *coord_start;         /* num_detectors + 1 entries */
} cudaq_dem_t;

/* Parses DEM text (len bytes, need not be NUL-terminated). On success *out
 * is a new model to free with cudaq_dem_destroy. err may be NULL.
 * Returns CUDAQ_MWPM_OK; CUDAQ_MWPM_ERR_INVALID_ARG (text or out NULL);
 * CUDAQ_MWPM_ERR_PARSE (err names the line and the problem);
 * CUDAQ_MWPM_ERR_NOT_GRAPHLIKE (a component with more than two detectors);
 * CUDAQ_MWPM_ERR_TOO_LARGE (over a CUDAQ_DEM_MAX_* limit);
 * CUDAQ_MWPM_ERR_NO_MEMORY. */
cudaq_mwpm_status_t cudaq_dem_parse(const char *text, size_t len, cudaq_dem_t **out,
                                    cudaq_mwpm_error_t *err);

/* Reads and parses a DEM file. Returns the statuses of cudaq_dem_parse and
 * CUDAQ_MWPM_ERR_IO (file cannot be read). */
cudaq_mwpm_status_t cudaq_dem_parse_file(const char *path, cudaq_dem_t **out,
                                         cudaq_mwpm_error_t *err);

/* Frees a model (NULL is ignored). */
void cudaq_dem_destroy(cudaq_dem_t *dem);

/* Extension: strtod in the "C" locale whatever the calling thread's or the
 * process's LC_NUMERIC (a host application that sets a comma-decimal locale
 * would otherwise read "0.125" as 0). The DEM parser and the predecoder's
 * layout check read their numbers with it. */
double cudaq_dem_strtod(const char *s, char **end);

/* A constant string naming a status. */
const char *cudaq_mwpm_status_str(cudaq_mwpm_status_t status);

#ifdef __cplusplus
}
#endif
#endif
