/*
 * Readers and writers for stim's sample formats: 01, b8 and dets.
 *
 * A record holds num_dets detector bits followed by num_obs observable bits
 * (observables appended to detection events, or an observables-only file
 * with num_dets = 0). In the dets format, D# tokens are detectors and L#
 * tokens observables; a token names a set bit, so one listed twice is set
 * (stim's reader), and the detector list the reader returns has no
 * duplicates.
 */
#ifndef CUDAQ_QEC_SAMPLES_H
#define CUDAQ_QEC_SAMPLES_H

#include <stdint.h>
#include <stdio.h>

#include "cudaq/qec/dem.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaq_sample_format {
  CUDAQ_SAMPLE_01 = 0,
  CUDAQ_SAMPLE_B8 = 1,
  CUDAQ_SAMPLE_DETS = 2
} cudaq_sample_format_t;

/* Maps "01", "b8" or "dets" to a format. Returns CUDAQ_MWPM_OK or
 * CUDAQ_MWPM_ERR_INVALID_ARG (NULL or unknown name). */
cudaq_mwpm_status_t cudaq_sample_format_parse(const char *name, cudaq_sample_format_t *out);

typedef struct cudaq_sample_reader cudaq_sample_reader_t;

/* Wraps an open stream (not closed by the reader). num_obs <= 64. Returns
 * CUDAQ_MWPM_OK; CUDAQ_MWPM_ERR_INVALID_ARG; CUDAQ_MWPM_ERR_NO_MEMORY. */
cudaq_mwpm_status_t cudaq_sample_reader_create(FILE *f, cudaq_sample_format_t fmt,
                                               uint32_t num_dets, uint32_t num_obs,
                                               cudaq_sample_reader_t **out);

/* Reads the next record: the indices of its set detector bits (at most
 * num_dets of them) into events, their count into *num_events, and its
 * observable bits into *obs. Returns CUDAQ_MWPM_OK; CUDAQ_MWPM_EOF (no more
 * records); CUDAQ_MWPM_ERR_FORMAT (err says which record and why: bad
 * character, short record, index out of range, a b8 padding bit set);
 * CUDAQ_MWPM_ERR_IO;
 * CUDAQ_MWPM_ERR_INVALID_ARG. err may be NULL. */
cudaq_mwpm_status_t cudaq_sample_reader_next(cudaq_sample_reader_t *r, uint32_t *events,
                                             size_t *num_events, uint64_t *obs,
                                             cudaq_mwpm_error_t *err);

/* Frees a reader (NULL ignored). */
void cudaq_sample_reader_destroy(cudaq_sample_reader_t *r);

/* Judges, before reading it, whether the file at `path` can hold records of
 * `bits` bits in format fmt: b8, its size is a whole number of records;
 * 01, its first record has `bits` characters. Returns 1 where it cannot,
 * with *found the file's size in bytes (b8) or its first record's length
 * (01); 0 where it can or this cannot tell (path NULL, not a regular file,
 * empty, unreadable, dets). The readers alone can only say that a record
 * is short or long, somewhere in the file. */
int cudaq_sample_file_mismatch(const char *path, cudaq_sample_format_t fmt, uint64_t bits,
                               uint64_t *found);

/* The check both command-line tools make before reading a sample file: can
 * the regular file at `path` hold records of num_dets detector bits followed
 * by num_obs observable bits (num_dets = 0: an observables-only file) in
 * format fmt? Not where: b8, the file is 01 text (only '0', '1', '\n' bytes,
 * every line of one length: the common mistake of reading a 01 file as b8,
 * whatever its size) or its size is not a whole number of records; 01, its
 * first record has another width (cudaq_sample_file_mismatch). Returns 1
 * with a message in msg (cap bytes; the path, the expected and the found
 * widths, and format_flag, e.g. "--in_format", as the likely fix); 0 where
 * the file fits or this cannot tell (path NULL or "-", not a regular file,
 * empty, dets). b8 records of another width that happen to divide the size
 * and leave no padding bit set cannot be told apart from good ones. */
int cudaq_sample_file_check(const char *path, cudaq_sample_format_t fmt, uint32_t num_dets,
                            uint32_t num_obs, const char *format_flag, char *msg, size_t cap);

/* Opens a file named by a command-line flag, as both tools do: path NULL or
 * "-" gives dflt (stdin / stdout; NULL where the flag takes no stream); a
 * directory is refused (fopen opens one for reading, and its reads fail).
 * Returns the stream, or NULL with "cannot open FLAG 'PATH': <the system's
 * reason>" (or "cannot read ... Is a directory", or "FLAG cannot be '-'")
 * in msg (cap bytes). */
FILE *cudaq_sample_open(const char *path, const char *mode, FILE *dflt, const char *flag,
                        char *msg, size_t cap);

/* The tools' rule for their outputs: --out (out_path) and --json
 * (json_path) must not name a file the run reads, ins[0..n) = {flag, path}
 * (--dem, --in, --obs_in, the model; a NULL path is skipped), nor each
 * other: opening an output truncates it before the inputs are read (or
 * overwrites them after). Two paths clash when they name one existing
 * regular file (same device and inode: also through a link or another
 * spelling of the path) or, where either does not exist yet, when they are
 * the same string; "-" and non-regular files (/dev/stdout) never clash.
 * Returns 1 with "FLAG 'PATH' is the same file as FLAG: ..." for the first
 * clash in msg (cap bytes), 0 when there is none. */
int cudaq_sample_outputs_clobber(const char *out_path, const char *json_path, const char *const ins[][2],
                                 size_t n, char *msg, size_t cap);

/* The tools' rule for the true observables: from --obs_in or appended to the
 * detection events (--in_includes_appended_observables), never both (one
 * would be ignored). Returns the message for the conflict, or NULL. */
const char *cudaq_sample_obs_flags_conflict(int appended, int obs_in);

/* Writes one record of num_obs observable bits. Returns CUDAQ_MWPM_OK;
 * CUDAQ_MWPM_ERR_IO; CUDAQ_MWPM_ERR_INVALID_ARG. */
cudaq_mwpm_status_t cudaq_sample_write_obs(FILE *f, cudaq_sample_format_t fmt, uint64_t obs,
                                           uint32_t num_obs);

#ifdef __cplusplus
}
#endif
#endif
