/*
 * Parser for stim's detector error model text format.
 *
 * Two passes: the text is parsed into a flat list of instructions (a repeat
 * block's body follows the repeat instruction), then the list is executed,
 * expanding repeats, into graph-like edges and detector coordinates.
 */
#define _POSIX_C_SOURCE 200809L /* newlocale, uselocale */
#include "cudaq/qec/dem.h"

#include <ctype.h>
#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mwpm_internal.h"

/* The "C" locale, made once (newlocale allocates). */
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale = (locale_t)0;
static void make_c_locale(void) { c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

double cudaq_dem_strtod(const char *s, char **end) {
  pthread_once(&c_locale_once, make_c_locale);
  if (!c_locale)
    return strtod(s, end); /* newlocale failed: the thread's own locale */
  locale_t old = uselocale(c_locale);
  double v = strtod(s, end);
  uselocale(old);
  return v;
}

enum { OP_ERROR, OP_DETECTOR, OP_OBSERVABLE, OP_SHIFT, OP_REPEAT };

enum { T_DET, T_OBS, T_SEP, T_NUM };

typedef struct target {
  int kind;
  uint64_t value;
} target_t;

typedef struct instr {
  int op;
  size_t line;
  size_t arg0, nargs;    /* into args */
  size_t tgt0, ntgts;    /* into tgts */
  size_t body_len;       /* repeat: number of instructions in the body */
  uint64_t repeat_count;
} instr_t;

typedef struct parser {
  const char *text;
  size_t len;
  size_t line;
  cudaq_mwpm_error_t *err;
  instr_t *ins;
  size_t nins, cap_ins;
  double *args;
  size_t nargs, cap_args;
  target_t *tgts;
  size_t ntgts, cap_tgts;
} parser_t;

typedef struct exec_state {
  cudaq_dem_t *dem;
  size_t cap_edges;
  uint64_t det_offset;
  double coord_offset[CUDAQ_DEM_MAX_COORDS];
  size_t ncoord_offset;
  uint64_t work;
  /* detector coordinates as (detector, start, count) triples before CSR. */
  struct coord_decl { uint32_t det, start, count; } *cd;
  size_t ncd, cap_cd;
  double *cval;
  size_t ncval, cap_cval;
  uint64_t max_det_plus1;
  uint32_t max_obs_plus1;
  cudaq_mwpm_error_t *err;
} exec_state_t;

const char *cudaq_mwpm_status_str(cudaq_mwpm_status_t status) {
  switch (status) {
  case CUDAQ_MWPM_OK: return "ok";
  case CUDAQ_MWPM_ERR_INVALID_ARG: return "invalid argument";
  case CUDAQ_MWPM_ERR_PARSE: return "parse error";
  case CUDAQ_MWPM_ERR_NOT_GRAPHLIKE: return "error is not graph-like";
  case CUDAQ_MWPM_ERR_NO_MEMORY: return "out of memory";
  case CUDAQ_MWPM_ERR_IO: return "i/o error";
  case CUDAQ_MWPM_ERR_TOO_LARGE: return "over a size limit";
  case CUDAQ_MWPM_ERR_NO_SOLUTION: return "no matching has these detection events as boundary";
  case CUDAQ_MWPM_ERR_OUT_OF_RANGE: return "detector index out of range";
  case CUDAQ_MWPM_ERR_FORMAT: return "malformed sample data";
  case CUDAQ_MWPM_EOF: return "end of file";
  }
  return "unknown status";
}

void cudaq_mwpm__set_error(cudaq_mwpm_error_t *err, size_t line, const char *fmt, ...) {
  if (!err)
    return;
  err->line = line;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
}

int cudaq_mwpm__grow(void **ptr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return 0;
  size_t ncap = *cap ? *cap : 16;
  while (ncap < need) {
    if (ncap > SIZE_MAX / 2 / elem)
      return -1;
    ncap *= 2;
  }
  void *p = realloc(*ptr, ncap * elem);
  if (!p)
    return -1;
  *ptr = p;
  *cap = ncap;
  return 0;
}

#define GROW(ptr, cap, need) cudaq_mwpm__grow((void **)&(ptr), &(cap), (need), sizeof *(ptr))

/* ---------------------------------------------------------------- parsing */

static int perr(parser_t *ps, const char *fmt, const char *detail) {
  char msg[200];
  snprintf(msg, sizeof msg, fmt, detail ? detail : "");
  cudaq_mwpm__set_error(ps->err, ps->line, "%s", msg);
  return CUDAQ_MWPM_ERR_PARSE;
}

static int is_hspace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Copies at most 40 printable characters of [p, e) into buf, for messages. */
static const char *snippet(const char *p, const char *e, char *buf, size_t n) {
  size_t k = 0;
  while (p < e && k + 1 < n && k < 40) {
    char c = *p++;
    buf[k++] = (c >= 32 && c < 127) ? c : '?';
  }
  buf[k] = 0;
  return buf;
}

static int parse_uint(const char **pp, const char *e, uint64_t *out) {
  const char *p = *pp;
  if (p >= e || !isdigit((unsigned char)*p))
    return -1;
  uint64_t v = 0;
  while (p < e && isdigit((unsigned char)*p)) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10)
      return -2;
    v = v * 10 + d;
    p++;
  }
  *pp = p;
  *out = v;
  return 0;
}

/* Parses one line [p, e) (comment already stripped) into an instruction.
 * depth_stack tracks open repeat blocks. */
static int parse_line(parser_t *ps, const char *p, const char *e, size_t *stack, size_t *depth) {
  char buf[64];
  while (p < e && is_hspace(*p))
    p++;
  while (e > p && is_hspace(e[-1]))
    e--;
  if (p == e)
    return 0;
  if (*p == '}') {
    p++;
    while (p < e && is_hspace(*p))
      p++;
    if (p != e)
      return perr(ps, "unexpected text after '}': '%s'", snippet(p, e, buf, sizeof buf));
    if (*depth == 0)
      return perr(ps, "'}' without an open repeat block%s", NULL);
    size_t at = stack[--(*depth)];
    ps->ins[at].body_len = ps->nins - at - 1;
    return 0;
  }
  const char *name = p;
  while (p < e && (isalnum((unsigned char)*p) || *p == '_'))
    p++;
  size_t nlen = (size_t)(p - name);
  if (nlen == 0)
    return perr(ps, "expected an instruction name, got '%s'", snippet(name, e, buf, sizeof buf));
  int op;
  char lname[32];
  if (nlen >= sizeof lname)
    return perr(ps, "unknown instruction '%s'", snippet(name, name + nlen, buf, sizeof buf));
  for (size_t i = 0; i < nlen; i++)
    lname[i] = (char)tolower((unsigned char)name[i]);
  lname[nlen] = 0;
  if (!strcmp(lname, "error"))
    op = OP_ERROR;
  else if (!strcmp(lname, "detector"))
    op = OP_DETECTOR;
  else if (!strcmp(lname, "logical_observable"))
    op = OP_OBSERVABLE;
  else if (!strcmp(lname, "shift_detectors"))
    op = OP_SHIFT;
  else if (!strcmp(lname, "repeat"))
    op = OP_REPEAT;
  else
    return perr(ps, "unknown instruction '%s'", snippet(name, name + nlen, buf, sizeof buf));

  if (GROW(ps->ins, ps->cap_ins, ps->nins + 1))
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  instr_t *in = &ps->ins[ps->nins];
  memset(in, 0, sizeof *in);
  in->op = op;
  in->line = ps->line;
  in->arg0 = ps->nargs;
  in->tgt0 = ps->ntgts;

  /* Optional tag: [anything but ']' and newline]. */
  if (p < e && *p == '[') {
    const char *q = memchr(p, ']', (size_t)(e - p));
    if (!q)
      return perr(ps, "unterminated tag '['%s", NULL);
    p = q + 1;
  }
  /* Optional parenthesised arguments. */
  if (p < e && *p == '(') {
    p++;
    for (;;) {
      while (p < e && is_hspace(*p))
        p++;
      if (p < e && *p == ')' && in->nargs == 0) {
        p++;
        break;
      }
      char num[64];
      size_t k = 0;
      while (p < e && k + 1 < sizeof num && *p != ',' && *p != ')' && !is_hspace(*p))
        num[k++] = *p++;
      num[k] = 0;
      if (k == 0)
        return perr(ps, "expected a number in the argument list%s", NULL);
      char *end = NULL;
      errno = 0;
      double v = cudaq_dem_strtod(num, &end);
      if (*end != 0 || !isfinite(v))
        return perr(ps, "bad number '%s' in the argument list", num);
      if (GROW(ps->args, ps->cap_args, ps->nargs + 1))
        return CUDAQ_MWPM_ERR_NO_MEMORY;
      ps->args[ps->nargs++] = v;
      in->nargs++;
      while (p < e && is_hspace(*p))
        p++;
      if (p < e && *p == ',') {
        p++;
        continue;
      }
      if (p < e && *p == ')') {
        p++;
        break;
      }
      return perr(ps, "expected ',' or ')' in the argument list%s", NULL);
    }
  }
  if (p < e && !is_hspace(*p) && !(op == OP_REPEAT && *p == '{'))
    return perr(ps, "expected a space after the instruction, got '%s'", snippet(p, e, buf, sizeof buf));
  /* Targets. */
  int open_brace = 0;
  for (;;) {
    while (p < e && is_hspace(*p))
      p++;
    if (p >= e)
      break;
    if (open_brace)
      return perr(ps, "unexpected text after '{': '%s'", snippet(p, e, buf, sizeof buf));
    target_t t;
    const char *tok = p;
    if (*p == '{') {
      if (op != OP_REPEAT)
        return perr(ps, "'{' is only allowed after repeat%s", NULL);
      open_brace = 1;
      p++;
      continue;
    }
    if (*p == '^') {
      t.kind = T_SEP;
      t.value = 0;
      p++;
    } else {
      if (*p == 'D' || *p == 'd') {
        t.kind = T_DET;
        p++;
      } else if (*p == 'L' || *p == 'l') {
        t.kind = T_OBS;
        p++;
      } else {
        t.kind = T_NUM;
      }
      int r = parse_uint(&p, e, &t.value);
      if (r == -2)
        return perr(ps, "number too large in target '%s'", snippet(tok, e, buf, 24));
      if (r)
        return perr(ps, "bad target '%s'", snippet(tok, e, buf, 24));
    }
    if (p < e && !is_hspace(*p) && !(op == OP_REPEAT && *p == '{'))
      return perr(ps, "bad target '%s'", snippet(tok, e, buf, 24));
    if (GROW(ps->tgts, ps->cap_tgts, ps->ntgts + 1))
      return CUDAQ_MWPM_ERR_NO_MEMORY;
    ps->tgts[ps->ntgts++] = t;
    in->ntgts++;
  }
  /* No arithmetic on a NULL array (an instruction without targets or
   * arguments before any was stored): undefined behaviour in C. */
  target_t *tg = ps->tgts ? ps->tgts + in->tgt0 : NULL;
  double *ar = ps->args ? ps->args + in->arg0 : NULL;
  switch (op) {
  case OP_ERROR:
    if (in->nargs != 1)
      return perr(ps, "error takes exactly one probability argument%s", NULL);
    if (!(ar[0] >= 0.0 && ar[0] <= 1.0))
      return perr(ps, "error probability must be in [0, 1]%s", NULL);
    for (size_t i = 0; i < in->ntgts; i++) {
      if (tg[i].kind == T_NUM)
        return perr(ps, "error targets must be D#, L# or ^%s", NULL);
      if (tg[i].kind == T_SEP && (i == 0 || i + 1 == in->ntgts || tg[i - 1].kind == T_SEP))
        return perr(ps, "misplaced '^' separator in error%s", NULL);
    }
    break;
  case OP_DETECTOR:
    if (in->ntgts == 0)
      return perr(ps, "detector needs at least one D# target%s", NULL);
    if (in->nargs > CUDAQ_DEM_MAX_COORDS)
      return perr(ps, "too many detector coordinates%s", NULL);
    for (size_t i = 0; i < in->ntgts; i++)
      if (tg[i].kind != T_DET)
        return perr(ps, "detector targets must be D#%s", NULL);
    break;
  case OP_OBSERVABLE:
    if (in->nargs != 0)
      return perr(ps, "logical_observable takes no arguments%s", NULL);
    if (in->ntgts == 0)
      return perr(ps, "logical_observable needs at least one L# target%s", NULL);
    for (size_t i = 0; i < in->ntgts; i++)
      if (tg[i].kind != T_OBS)
        return perr(ps, "logical_observable targets must be L#%s", NULL);
    break;
  case OP_SHIFT:
    if (in->ntgts != 1 || tg[0].kind != T_NUM)
      return perr(ps, "shift_detectors needs exactly one integer target%s", NULL);
    if (in->nargs > CUDAQ_DEM_MAX_COORDS)
      return perr(ps, "too many coordinate offsets%s", NULL);
    break;
  case OP_REPEAT:
    if (in->nargs != 0)
      return perr(ps, "repeat takes no parenthesised arguments%s", NULL);
    if (in->ntgts != 1 || tg[0].kind != T_NUM)
      return perr(ps, "repeat needs exactly one integer count%s", NULL);
    if (!open_brace)
      return perr(ps, "repeat needs '{' at the end of its line%s", NULL);
    in->repeat_count = tg[0].value;
    if (*depth >= 64)
      return perr(ps, "repeat blocks nested too deeply%s", NULL);
    stack[(*depth)++] = ps->nins;
    break;
  }
  ps->nins++;
  return 0;
}

static int parse_all(parser_t *ps) {
  size_t stack[64];
  size_t depth = 0;
  const char *p = ps->text, *end = ps->text + ps->len;
  ps->line = 0;
  while (p < end) {
    ps->line++;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    const char *hash = memchr(p, '#', (size_t)(le - p));
    const char *ce = hash ? hash : le;
    for (const char *q = p; q < ce; q++)
      if (*q == 0)
        return perr(ps, "NUL byte in the text%s", NULL);
    int r = parse_line(ps, p, ce, stack, &depth);
    if (r)
      return r;
    p = nl ? nl + 1 : end;
  }
  if (depth) {
    ps->line = ps->ins[stack[depth - 1]].line;
    return perr(ps, "repeat block is never closed with '}'%s", NULL);
  }
  return 0;
}

/* -------------------------------------------------------------- execution */

static int xerr(exec_state_t *st, size_t line, int status, const char *msg) {
  cudaq_mwpm__set_error(st->err, line, "%s", msg);
  return status;
}

/* Detectors one component may list before cancellation is decided (a
 * component left with more than two is refused as not graph-like; one that
 * lists more than this many distinct detectors at once is refused too). */
#define DEM_COMPONENT_MAX 32

static int add_edge(exec_state_t *st, const instr_t *in, double p, const uint64_t *dets, int nd,
                    uint64_t obs) {
  cudaq_dem_t *dem = st->dem;
  if (nd == 0) {
    dem->num_undetectable++;
    return 0;
  }
  if (nd > 2) {
    char msg[200], count[32];
    if (nd > DEM_COMPONENT_MAX)
      snprintf(count, sizeof count, "more than %d", DEM_COMPONENT_MAX);
    else
      snprintf(count, sizeof count, "%d", nd);
    snprintf(msg, sizeof msg,
             "error is not graph-like: a component has %s detectors (decompose it with '^' into "
             "components of at most two)",
             count);
    return xerr(st, in->line, CUDAQ_MWPM_ERR_NOT_GRAPHLIKE, msg);
  }
  if (GROW(dem->edges, st->cap_edges, dem->num_edges + 1))
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  cudaq_dem_edge_t *ed = &dem->edges[dem->num_edges++];
  ed->u = (int32_t)dets[0];
  ed->v = nd == 2 ? (int32_t)dets[1] : -1;
  ed->obs_mask = obs;
  ed->p = p;
  ed->line = in->line;
  ed->error = dem->num_errors - 1; /* exec_range counted this error first */
  return 0;
}

static int exec_error(exec_state_t *st, const instr_t *in, const target_t *tg, double p) {
  uint64_t dets[DEM_COMPONENT_MAX];
  int nd = 0, over = 0;
  uint64_t obs = 0;
  for (size_t i = 0; i <= in->ntgts; i++) {
    if (i == in->ntgts || tg[i].kind == T_SEP) {
      int r = add_edge(st, in, p, dets, over ? DEM_COMPONENT_MAX + 1 : nd, obs);
      if (r)
        return r;
      nd = 0;
      over = 0;
      obs = 0;
      continue;
    }
    if (tg[i].kind == T_OBS) {
      if (tg[i].value >= CUDAQ_DEM_MAX_OBSERVABLES)
        return xerr(st, in->line, CUDAQ_MWPM_ERR_TOO_LARGE,
                    "observable index over the limit of 64 observables");
      obs ^= 1ull << tg[i].value;
      if (tg[i].value + 1 > st->max_obs_plus1)
        st->max_obs_plus1 = (uint32_t)tg[i].value + 1;
      continue;
    }
    uint64_t d = tg[i].value + st->det_offset;
    if (tg[i].value >= CUDAQ_DEM_MAX_DETECTORS || d >= CUDAQ_DEM_MAX_DETECTORS)
      return xerr(st, in->line, CUDAQ_MWPM_ERR_TOO_LARGE, "detector index over the limit");
    if (d + 1 > st->max_det_plus1)
      st->max_det_plus1 = d + 1;
    /* A detector listed twice in one component cancels (symmetric
     * difference): D0 D1 D2 D2 is the edge D0 D1. */
    int found = -1;
    for (int k = 0; k < nd; k++)
      if (dets[k] == d)
        found = k;
    if (found >= 0) {
      dets[found] = dets[nd - 1];
      nd--;
    } else if (nd < DEM_COMPONENT_MAX) {
      dets[nd++] = d;
    } else {
      over = 1;
    }
  }
  return 0;
}

static int exec_detector(exec_state_t *st, const instr_t *in, const target_t *tg,
                         const double *ar) {
  for (size_t i = 0; i < in->ntgts; i++) {
    uint64_t d = tg[i].value + st->det_offset;
    if (tg[i].value >= CUDAQ_DEM_MAX_DETECTORS || d >= CUDAQ_DEM_MAX_DETECTORS)
      return xerr(st, in->line, CUDAQ_MWPM_ERR_TOO_LARGE, "detector index over the limit");
    if (d + 1 > st->max_det_plus1)
      st->max_det_plus1 = d + 1;
    if (in->nargs == 0)
      continue;
    if (GROW(st->cd, st->cap_cd, st->ncd + 1) || GROW(st->cval, st->cap_cval, st->ncval + in->nargs))
      return CUDAQ_MWPM_ERR_NO_MEMORY;
    if (st->ncval + in->nargs >= UINT32_MAX)
      return xerr(st, in->line, CUDAQ_MWPM_ERR_TOO_LARGE, "too many detector coordinates");
    st->cd[st->ncd].det = (uint32_t)d;
    st->cd[st->ncd].start = (uint32_t)st->ncval;
    st->cd[st->ncd].count = (uint32_t)in->nargs;
    st->ncd++;
    for (size_t k = 0; k < in->nargs; k++)
      st->cval[st->ncval++] = ar[k] + (k < st->ncoord_offset ? st->coord_offset[k] : 0.0);
  }
  return 0;
}

static int exec_range(exec_state_t *st, const parser_t *ps, size_t first, size_t count) {
  for (size_t i = first; i < first + count; i++) {
    const instr_t *in = &ps->ins[i];
    const target_t *tg = ps->tgts ? ps->tgts + in->tgt0 : NULL; /* see above: no NULL arithmetic */
    const double *ar = ps->args ? ps->args + in->arg0 : NULL;
    if (++st->work > CUDAQ_DEM_MAX_EXPANDED_INSTRUCTIONS)
      return xerr(st, in->line, CUDAQ_MWPM_ERR_TOO_LARGE,
                  "model too large after expanding repeat blocks");
    int r = 0;
    switch (in->op) {
    case OP_ERROR:
      st->dem->num_errors++;
      r = exec_error(st, in, tg, ar[0]);
      break;
    case OP_DETECTOR:
      r = exec_detector(st, in, tg, ar);
      break;
    case OP_OBSERVABLE:
      for (size_t k = 0; k < in->ntgts; k++) {
        if (tg[k].value >= CUDAQ_DEM_MAX_OBSERVABLES)
          return xerr(st, in->line, CUDAQ_MWPM_ERR_TOO_LARGE,
                      "observable index over the limit of 64 observables");
        if (tg[k].value + 1 > st->max_obs_plus1)
          st->max_obs_plus1 = (uint32_t)tg[k].value + 1;
      }
      break;
    case OP_SHIFT:
      st->det_offset += tg[0].value;
      if (tg[0].value >= CUDAQ_DEM_MAX_DETECTORS || st->det_offset >= CUDAQ_DEM_MAX_DETECTORS)
        return xerr(st, in->line, CUDAQ_MWPM_ERR_TOO_LARGE, "detector offset over the limit");
      for (size_t k = 0; k < in->nargs; k++)
        st->coord_offset[k] += ar[k];
      if (in->nargs > st->ncoord_offset)
        st->ncoord_offset = in->nargs;
      break;
    case OP_REPEAT:
      for (uint64_t k = 0; k < in->repeat_count; k++) {
        r = exec_range(st, ps, i + 1, in->body_len);
        if (r)
          return r;
        if (in->body_len == 0 && ++st->work > CUDAQ_DEM_MAX_EXPANDED_INSTRUCTIONS)
          return xerr(st, in->line, CUDAQ_MWPM_ERR_TOO_LARGE,
                      "model too large after expanding repeat blocks");
      }
      i += in->body_len;
      break;
    }
    if (r)
      return r;
  }
  return 0;
}

static int build_coords(exec_state_t *st) {
  cudaq_dem_t *dem = st->dem;
  uint32_t n = dem->num_detectors;
  dem->coord_start = calloc((size_t)n + 1, sizeof *dem->coord_start);
  if (!dem->coord_start)
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  /* The last declaration of a detector's coordinates wins. */
  uint32_t *last = malloc(((size_t)n + 1) * sizeof *last);
  if (!last)
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  for (uint32_t i = 0; i < n; i++)
    last[i] = UINT32_MAX;
  for (size_t k = 0; k < st->ncd; k++)
    last[st->cd[k].det] = (uint32_t)k;
  size_t total = 0;
  for (uint32_t i = 0; i < n; i++) {
    dem->coord_start[i] = (uint32_t)total;
    if (last[i] != UINT32_MAX)
      total += st->cd[last[i]].count;
  }
  dem->coord_start[n] = (uint32_t)total;
  dem->coords = malloc((total ? total : 1) * sizeof *dem->coords);
  if (!dem->coords) {
    free(last);
    return CUDAQ_MWPM_ERR_NO_MEMORY;
  }
  for (uint32_t i = 0; i < n; i++)
    if (last[i] != UINT32_MAX)
      memcpy(dem->coords + dem->coord_start[i], st->cval + st->cd[last[i]].start,
             st->cd[last[i]].count * sizeof(double));
  free(last);
  return 0;
}

cudaq_mwpm_status_t cudaq_dem_parse(const char *text, size_t len, cudaq_dem_t **out,
                                    cudaq_mwpm_error_t *err) {
  if (err) {
    err->line = 0;
    err->message[0] = 0;
  }
  if (!out || (!text && len))
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  *out = NULL;
  parser_t ps;
  memset(&ps, 0, sizeof ps);
  ps.text = text;
  ps.len = len;
  ps.err = err;
  exec_state_t st;
  memset(&st, 0, sizeof st);
  st.err = err;
  int r = parse_all(&ps);
  if (r == CUDAQ_MWPM_ERR_NO_MEMORY)
    cudaq_mwpm__set_error(err, ps.line, "out of memory");
  if (!r) {
    st.dem = calloc(1, sizeof *st.dem);
    if (!st.dem)
      r = CUDAQ_MWPM_ERR_NO_MEMORY;
  }
  if (!r)
    r = exec_range(&st, &ps, 0, ps.nins);
  if (!r) {
    st.dem->num_detectors = (uint32_t)st.max_det_plus1;
    st.dem->num_observables = st.max_obs_plus1;
    r = build_coords(&st);
  }
  free(ps.ins);
  free(ps.args);
  free(ps.tgts);
  free(st.cd);
  free(st.cval);
  if (r) {
    cudaq_dem_destroy(st.dem);
    return (cudaq_mwpm_status_t)r;
  }
  *out = st.dem;
  return CUDAQ_MWPM_OK;
}

cudaq_mwpm_status_t cudaq_dem_parse_file(const char *path, cudaq_dem_t **out,
                                         cudaq_mwpm_error_t *err) {
  if (!path || !out)
    return CUDAQ_MWPM_ERR_INVALID_ARG;
  char *buf = NULL;
  size_t len = 0;
  int r = cudaq_mwpm__read_file(path, &buf, &len);
  if (r) {
    cudaq_mwpm__set_error(err, 0, "cannot read '%s'", path);
    return (cudaq_mwpm_status_t)r;
  }
  r = cudaq_dem_parse(buf, len, out, err);
  free(buf);
  return (cudaq_mwpm_status_t)r;
}

int cudaq_mwpm__read_file(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return CUDAQ_MWPM_ERR_IO;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (GROW(buf, cap, n + 65536)) {
      free(buf);
      fclose(f);
      return CUDAQ_MWPM_ERR_NO_MEMORY;
    }
    size_t k = fread(buf + n, 1, cap - n, f);
    n += k;
    if (k == 0)
      break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return CUDAQ_MWPM_ERR_IO;
  }
  *out = buf;
  *len = n;
  return 0;
}

void cudaq_dem_destroy(cudaq_dem_t *dem) {
  if (!dem)
    return;
  free(dem->edges);
  free(dem->coords);
  free(dem->coord_start);
  free(dem);
}
