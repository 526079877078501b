/*
 * cudaq-udp-serve - a decoder as a UDP service: the pipeline in CPU-only
 * mode on an external ring, fed by a UDP bridge (udp.h, TX_EXTERNAL: the
 * pipeline's completion handler sends each response).
 *
 *   cudaq-udp-serve --dem FILE [--model FILE.onnx|local|none] [--port P]
 *                   [--bind ADDR] [--workers N] [--slots N] [--seconds S]
 *                   [--rx-core C] [--busy-poll US] [--rcvbuf BYTES]
 *                   [--counters FILE]
 *   cudaq-udp-serve --echo ...     (answers each payload with itself)
 *
 * Function "qec_decode" (cudaq_fnv1a_hash): payload = the shot's detection
 * events, bit-packed LSB-first, ceil(num_detectors / 8) bytes; result = the
 * logical prediction's observable mask, 8 bytes little-endian. Each pipeline
 * worker decodes with its own qec-realtime CPU worker (qrt_worker.h): the
 * predecoder (--model: an ONNX model on the CPU executor, the rule-based
 * local predecoder, or none, the default), then MWPM on the residual; the
 * prediction is the predecoder's frame XOR MWPM. A request the worker
 * refuses (wrong payload size, a padding bit set) or fails on is answered
 * CUDAQ_RPC_ERR_RESULT_TOO_LARGE (the CPU stage's only way to return an
 * error status) and counted by the pipeline.
 * Runs until SIGINT / SIGTERM or --seconds; then prints the bridge's and the
 * pipeline's counters (and writes them as key=value lines to --counters).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudaq/qec/dem.h"
#include "cudaq/qec/mwpm.h"
#include "cudaq/realtime/pipeline.h"
#include "cudaq/realtime/udp.h"
#include "qrt_worker.h"

typedef struct {
  int echo;
  qrt_worker_t *w[CUDAQ_PIPELINE_MAX_WORKERS];
  cudaq_udp_bridge_t *bridge;
} server_t;

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { (void)sig; g_stop = 1; }

static size_t cpu_stage(void *user, const cudaq_cpu_stage_context_t *ctx) {
  server_t *s = user;
  if (s->echo) {
    size_t n = ctx->request_size;
    if (n > ctx->max_response_size) return ctx->max_response_size + 1;
    memmove(ctx->response_buffer, ctx->request, n);
    return n ? n : 1; /* 0 would mean "not ready" */
  }
  if (ctx->max_response_size < 8) return ctx->max_response_size + 1;
  qrt_response_t r;
  if (qrt_worker_decode(s->w[ctx->worker_id], ctx->request, ctx->request_size, &r) != QRT_OK)
    return ctx->max_response_size + 1;
  memcpy(ctx->response_buffer, &r.prediction, 8); /* little-endian hosts only (wire format) */
  return 8;
}

static void on_complete(void *user, const cudaq_completion_t *c) {
  server_t *s = user;
  (void)cudaq_udp_bridge_send_response(s->bridge, (uint32_t)c->slot); /* failures are counted */
}

static void write_counters(FILE *f, const cudaq_udp_counters_t *u, const cudaq_pipeline_stats_t *p) {
#define W(x) fprintf(f, #x "=%llu\n", (unsigned long long)u->x)
  W(rx_datagrams); W(rx_batches); W(accepted); W(drop_short); W(drop_bad_magic); W(err_oversize);
  W(err_arg_len); W(err_unknown_function); W(drop_ring_full); W(tx_responses);
  W(tx_error_replies); W(tx_errors); W(rx_errors); W(unanswered_at_stop);
#undef W
  fprintf(f, "pipeline_dispatched=%llu\npipeline_completed=%llu\npipeline_errors=%llu\n"
             "pipeline_dropped=%llu\n",
          (unsigned long long)p->dispatched, (unsigned long long)p->completed,
          (unsigned long long)p->errors, (unsigned long long)p->dropped);
}

static int usage(void) {
  fprintf(stderr, "usage: cudaq-udp-serve (--dem FILE [--model FILE.onnx|local|none] "
                  "[--skip_layout_check] [--predecoder_weights auto|on|off] | --echo) "
                  "[--port P] [--bind ADDR] "
                  "[--workers N] [--slots N] [--seconds S] [--rx-core C] [--busy-poll US] "
                  "[--rcvbuf BYTES] [--counters FILE]\n");
  return 2;
}

int main(int argc, char **argv) {
  static server_t s;
  const char *dem_path = NULL, *bind_addr = NULL, *counters_path = NULL, *model = "none";
  const char *weights_flag = NULL; /* --predecoder_weights (qec-decode's rule: cudaq_predecoder_weights_flag) */
  int port = 0, workers = 1, slots = 64, rx_core = -1, busy_poll = 0, rcvbuf = 4 << 20;
  int check_layout = 1; /* --skip_layout_check: the ONNX model's detector layout is not compared */
  double seconds = 0;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--echo")) { s.echo = 1; continue; }
    if (!strcmp(a, "--skip_layout_check")) { check_layout = 0; continue; }
    if (!v) return usage();
    if (!strcmp(a, "--dem")) dem_path = v;
    else if (!strcmp(a, "--model")) model = v;
    else if (!strcmp(a, "--predecoder_weights")) weights_flag = v;
    else if (!strcmp(a, "--port")) port = atoi(v);
    else if (!strcmp(a, "--bind")) bind_addr = v;
    else if (!strcmp(a, "--workers")) workers = atoi(v);
    else if (!strcmp(a, "--slots")) slots = atoi(v);
    else if (!strcmp(a, "--seconds")) seconds = atof(v);
    else if (!strcmp(a, "--rx-core")) rx_core = atoi(v);
    else if (!strcmp(a, "--busy-poll")) busy_poll = atoi(v);
    else if (!strcmp(a, "--rcvbuf")) rcvbuf = atoi(v);
    else if (!strcmp(a, "--counters")) counters_path = v;
    else return usage();
    ++i;
  }
  if (!s.echo && !dem_path) return usage();
  if (workers < 1 || workers > CUDAQ_PIPELINE_MAX_WORKERS || slots < 1) return usage();

  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_graph_t *graph = NULL;
  if (!check_layout && (s.echo || qrt_pd_kind_of(model) != QRT_PD_ONNX)) {
    fprintf(stderr, "cudaq-udp-serve: --skip_layout_check is for an ONNX --model\n");
    return 2;
  }
  cudaq_predecoder_weights_t weights = CUDAQ_PREDECODER_WEIGHTS_AUTO;
  if (cudaq_predecoder_weights_flag(weights_flag, 0, &weights)) {
    fprintf(stderr, "cudaq-udp-serve: --predecoder_weights is auto, on or off, not '%s'\n", weights_flag);
    return 2;
  }
  if (weights_flag && (s.echo || qrt_pd_kind_of(model) != QRT_PD_ONNX)) {
    fprintf(stderr, "cudaq-udp-serve: --predecoder_weights is for an ONNX --model\n");
    return 2;
  }
  if (!s.echo) {
    cudaq_mwpm_error_t err;
    cudaq_mwpm_graph_options_t go;
    cudaq_mwpm_graph_options_init(&go);
    /* an ONNX model with edge logits: MWPM with its per-shot weights (weighted matching) */
    go.per_shot_weights = qrt_pd_kind_of(model) == QRT_PD_ONNX && weights != CUDAQ_PREDECODER_WEIGHTS_OFF;
    if (cudaq_dem_parse_file(dem_path, &dem, &err) != CUDAQ_MWPM_OK ||
        cudaq_mwpm_graph_from_dem(dem, &go, &graph, &err) != CUDAQ_MWPM_OK) {
      fprintf(stderr, "cudaq-udp-serve: %s: line %zu: %s\n", dem_path, err.line, err.message);
      return 1;
    }
    const qrt_pd_kind_t kind = qrt_pd_kind_of(model);
    for (int w = 0; w < workers; ++w) {
      char msg[512];
      if (qrt_worker_create(graph, kind, model, check_layout, QRT_PAYLOAD_BITS, weights, &s.w[w], msg,
                            sizeof msg)) {
        fprintf(stderr, "cudaq-udp-serve: %s\n", msg);
        return 1;
      }
    }
  }

  const uint32_t slot_size = 2048;
  cudaq_ringbuffer_t ring;
  cudaq_pipeline_config_t pc;
  cudaq_udp_config_t uc;
  cudaq_pipeline_t *p = NULL;
  const uint32_t fid = cudaq_fnv1a_hash(s.echo ? "echo" : "qec_decode");
  if (cudaq_host_ringbuffer_alloc(&ring, (uint32_t)slots, slot_size, CUDAQ_RING_ALLOC_HOST) ||
      cudaq_pipeline_config_init(&pc))
    goto fail;
  pc.num_workers = workers;
  pc.num_slots = slots;
  pc.slot_size = slot_size;
  pc.external_ringbuffer = &ring;
  pc.idle_yield = 1; /* small machines: more spinning threads than cores */
  cudaq_udp_config_init(&uc);
  uc.bind_addr = bind_addr;
  uc.port = (uint16_t)port;
  uc.ring = &ring;
  uc.num_slots = (uint32_t)slots;
  uc.tx_mode = CUDAQ_UDP_TX_EXTERNAL;
  uc.rx_core = rx_core;
  uc.busy_poll_us = busy_poll;
  uc.rcvbuf_bytes = rcvbuf;
  uc.function_ids = &fid;
  uc.num_function_ids = 1;
  if (cudaq_udp_bridge_create(&uc, &s.bridge) || cudaq_pipeline_create(&pc, &p) ||
      cudaq_pipeline_set_cpu_stage(p, cpu_stage, &s) ||
      cudaq_pipeline_set_completion_handler(p, on_complete, &s) || cudaq_pipeline_start(p) ||
      cudaq_udp_bridge_start(s.bridge))
    goto fail;
  uint16_t bound = 0;
  int rb = 0, sb = 0;
  cudaq_udp_bridge_port(s.bridge, &bound);
  cudaq_udp_bridge_socket_buffers(s.bridge, &rb, &sb);
  printf("cudaq-udp-serve: %s%s%s on port %u (function 0x%08x), %d workers, %d slots, rcvbuf %d\n",
         s.echo ? "echo" : "MWPM, predecoder ", s.echo ? "" : model,
         !s.echo && qrt_worker_weighted(s.w[0]) ? " (weighted matching)" : "", bound, fid, workers, slots, rb);
  fflush(stdout);

  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (!g_stop) {
    struct timespec nap = {0, 20000000};
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (seconds > 0 && (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 >= seconds)
      break;
  }
  /* Bridge first (nothing new enters the ring), then the pipeline drains,
   * its completion handler still sending through the open socket. */
  cudaq_udp_bridge_stop(s.bridge);
  cudaq_pipeline_stop(p);
  cudaq_udp_counters_t uco;
  cudaq_pipeline_stats_t ps;
  cudaq_udp_bridge_counters(s.bridge, &uco);
  cudaq_pipeline_stats(p, &ps);
  write_counters(stdout, &uco, &ps);
  if (counters_path) {
    FILE *f = fopen(counters_path, "w");
    if (f) {
      write_counters(f, &uco, &ps);
      fclose(f);
    }
  }
  cudaq_pipeline_destroy(p);
  cudaq_udp_bridge_destroy(s.bridge);
  cudaq_host_ringbuffer_free(&ring);
  for (int w = 0; w < workers; ++w) qrt_worker_destroy(s.w[w]);
  cudaq_mwpm_graph_destroy(graph);
  cudaq_dem_destroy(dem);
  return 0;
fail:
  fprintf(stderr, "cudaq-udp-serve: %s\n", cudaq_last_error());
  return 1;
}
