/* qec-realtime: flags, modes and presets (qrt_app.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qrt_app.h"

void qrt_usage(FILE *f) {
  fputs(
      "usage: qec-realtime --dem FILE --in FILE [options]\n"
      "Streams a stim shot file through the realtime pipeline as RPC decoding requests (an\n"
      "emulated FPGA), decodes each (a neural predecoder on the GPU or the CPU, then MWPM on CPU\n"
      "workers), and reports latency percentiles, throughput, detection density and the\n"
      "logical error rate, beside MWPM alone on the same shots.\n"
      "\n"
      "input (PyMatching's flags):\n"
      "  --dem FILE                 detector error model (stim)\n"
      "  --in FILE                  detection events, one shot per record ('-': stdin)\n"
      "  --in_format 01|b8|dets     (default 01)\n"
      "  --in_includes_appended_observables\n"
      "  --obs_in FILE              true observables (for the logical error rate)\n"
      "  --obs_in_format 01|b8|dets (default 01)\n"
      "decoder:\n"
      "  --mode cpu|hybrid|passthrough\n"
      "                             cpu: CPU workers run the predecoder (CPU executor) and\n"
      "                             MWPM, no GPU needed (default); hybrid: per worker a CUDA\n"
      "                             graph copies the request from the ring, runs the predecoder\n"
      "                             on the GPU engine and compacts the residual into mapped\n"
      "                             memory, then the worker's CPU thread runs MWPM on it;\n"
      "                             passthrough: the same graph without inference (the spec's\n"
      "                             SKIP_TRT), MWPM on the raw events\n"
      "  --model PATH|local|none    ONNX predecoder (models/README.md contract), the rule-based\n"
      "                             local predecoder (cpu mode) or none (MWPM alone, cpu mode);\n"
      "                             default: the preset's model, else none\n"
      "  --enable_correlations      two-pass correlated matching (PyMatching's\n"
      "                             enable_correlations) in the workers' MWPM and in the MWPM-alone\n"
      "                             comparison; the lowest logical error rate, ~3x MWPM's time\n"
      "  --predecoder_weights auto|on|off\n"
      "                             an ONNX model with edge logits (models/README.md, \"Weighted\n"
      "                             matching\"): MWPM on the residual of threshold 0 with the\n"
      "                             network's per-shot edge weights, as qec-decode; auto\n"
      "                             (default): where the model has them, unless\n"
      "                             --enable_correlations; on: a model without them is refused;\n"
      "                             off: the model's thresholded residual on the DEM's weights\n"
      "  --skip_layout_check        run an ONNX model without comparing the detector layout it\n"
      "                             records with the DEM's coordinates (needed for a DEM\n"
      "                             without coordinates; you vouch that the model fits)\n"
      "  --precision fp16|fp32      GPU engine precision (hybrid only; default fp16)\n"
      "  --plan_dir DIR             cache the GPU engine's plan in DIR (hybrid only)\n"
      "  --gpu_plan throughput|latency\n"
      "                             how each worker's GPU engine picks its kernels (hybrid\n"
      "                             only): throughput (default) plans for --workers\n"
      "                             inferences at once (a narrow model as one 16-SM cluster,\n"
      "                             eight side by side: slower alone, more requests/s);\n"
      "                             latency: the fastest single inference\n"
      "  --preset d5|d7|d9|d13|d21|d31|d5-fast|d7-fast|d9-fast|d13-fast\n"
      "                             the shipped model for that distance (models/: Z basis for\n"
      "                             d5..d13 and d31, X for d21; -fast: the 4 x 32-channel model,\n"
      "                             less gain, several times the throughput); give\n"
      "                             --dem/--in/--obs_in for its circuit (without --dem: prints\n"
      "                             how to make them)\n"
      "  --workers N                pipeline workers, each with its own predecoder (or GPU\n"
      "                             graph and engine) and MWPM decoder (default 2)\n"
      "  --slots N                  ring slots (queue depth, default 32)\n"
      "  --pin C                    pin the dispatcher to CPU C, the consumer to C+1, the\n"
      "                             workers to C+2.. and the FPGA thread after them\n"
      "                             (default: no pinning)\n"
      "  --prelaunch N              GPU modes: up to N workers' graphs wait on the GPU behind\n"
      "                             a gate that a request opens (no CUDA call on its path;\n"
      "                             0: launched on arrival; default " QRT_XSTR(QRT_DEFAULT_PRELAUNCH) " in the GPU\n"
      "                             modes, 0 with --fail_launch_every)\n"
      "  --prelaunch_max M          with --prelaunch N: up to M graphs wait while requests keep\n"
      "                             finding none waiting (near saturation), N otherwise (each\n"
      "                             waiting kernel holds an SM; default " QRT_XSTR(QRT_DEFAULT_PRELAUNCH_MAX) ", 0: no boost)\n"
      "  --self_gate 0|1            with --prelaunch: 1 (default) the graph's first kernel waits\n"
      "                             at the gate itself; 0 the pipeline's gate kernel waits in\n"
      "                             front of the graph (one kernel more)\n"
      "  --payload int32|bits       request payload: one INT32 per detector (the spec's layout,\n"
      "                             default) or bit-packed (the wire format's BIT_PACKED)\n"
      "load:\n"
      "  --requests N               requests to send, looping over the shot file\n"
      "                             (default, and 0: one per shot)\n"
      "  --duration_s S             send for S seconds instead (at most --requests, default\n"
      "                             4,000,000; 0 = not set: --requests counts)\n"
      "  --interval_us U            one request every U us, at most 1,000,000 (0 = flat out,\n"
      "                             default)\n"
      "  --timeout_ms T             wait at most T ms after the last send for the answers\n"
      "                             (default 10000); later ones count as timed out (exit 3)\n"
      "  --idle_yield 0|1           idle threads sched_yield() (default: 1 when the threads\n"
      "                             outnumber the CPUs)\n"
      "output:\n"
      "  --out FILE                 predictions, one record per request in request order (0\n"
      "                             for a request answered with an error or timed out)\n"
      "  --out_format 01|b8|dets    (default 01)\n"
      "  --json FILE                the report as JSON (tools/realtime/plot_latency.py draws\n"
      "                             its latency histogram)\n"
      "  --compare_mwpm 0|1         also decode the sent shots with MWPM alone, after the run\n"
      "                             (default 1 when the true observables are known)\n"
      "  --progress_s S             a progress line on stderr every S seconds while sending\n"
      "                             (default 10, 0 = none)\n"
      "testing:\n"
      "  --corrupt_every K          every K-th request carries a bad payload (alternately a\n"
      "                             bad value, in the first or the last detector, or a set\n"
      "                             padding bit; and a length 1 byte / 4 bytes short)\n"
      "  --fail_launch_every K      GPU modes: every K-th graph launch fails (cudaErrorLaunch-\n"
      "                             Failure, not launched): that request is answered with the\n"
      "                             RPC error status and counted\n"
      "  --help\n"
      "exit status: 0 all answered in time with a prediction, 1 start-up or I/O failure, 2 bad\n"
      "flags, 3 a request timed out, lost or duplicated, 4 some answered with an error status\n",
      f);
}

static int parse_u64(const char *flag, const char *v, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (!*v || *end || v[0] == '-' || errno == ERANGE) {
    fprintf(stderr, "qec-realtime: %s '%s' is not a non-negative integer\n", flag, v);
    return 1;
  }
  *out = x;
  return 0;
}

static int parse_double(const char *flag, const char *v, double *out) {
  char *end = NULL;
  double x = strtod(v, &end);
  if (!*v || *end || !isfinite(x) || x < 0) {
    fprintf(stderr, "qec-realtime: %s '%s' is not a non-negative number\n", flag, v);
    return 1;
  }
  *out = x;
  return 0;
}

int qrt_parse_args(int argc, char **argv, opts_t *o) {
  memset(o, 0, sizeof *o);
  o->in_format = o->obs_in_format = o->out_format = "01";
  o->mode_name = "cpu";
  o->fp16 = 1;
  o->compare_mwpm = -1;
  o->workers = 2;
  o->self_gate = -1; /* not given: 1 where graphs are pre-launched (qrt_check_mode_and_preset) */
  o->prelaunch = -1; /* not given: QRT_DEFAULT_PRELAUNCH in the GPU modes (qrt_check_mode_and_preset) */
  o->prelaunch_max = -1; /* not given: QRT_DEFAULT_PRELAUNCH_MAX where graphs are pre-launched */
  o->slots = 32;
  o->idle_yield = -1;
  o->pin = -1;
  o->timeout_ms = 10000;
  o->progress_s = 10;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--in_includes_appended_observables")) {
      o->appended = 1;
      continue;
    }
    if (!strcmp(a, "--enable_correlations")) {
      o->correlations = 1;
      continue;
    }
    if (!strcmp(a, "--skip_layout_check")) {
      o->skip_layout_check = 1;
      continue;
    }
    static const char *const valued[] = {
        "--dem", "--in", "--in_format", "--obs_in", "--obs_in_format", "--out", "--out_format",
        "--json", "--model", "--mode", "--preset", "--workers", "--slots", "--requests",
        "--duration_s", "--interval_us", "--timeout_ms", "--idle_yield", "--corrupt_every",
        "--fail_launch_every", "--progress_s", "--pin", "--payload", "--precision", "--plan_dir", "--compare_mwpm",
        "--prelaunch", "--prelaunch_max", "--gpu_plan", "--self_gate", "--predecoder_weights", NULL};
    int known = 0;
    for (int k = 0; valued[k]; k++)
      known |= !strcmp(a, valued[k]);
    if (!known) {
      fprintf(stderr, "qec-realtime: unknown argument '%s' (--help lists them)\n", a);
      return 1;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "qec-realtime: %s needs a value\n", a);
      return 1;
    }
    const char *v = argv[++i];
    uint64_t u = 0;
    if (!strcmp(a, "--dem")) o->dem = v;
    else if (!strcmp(a, "--in")) o->in = v;
    else if (!strcmp(a, "--in_format")) o->in_format = v;
    else if (!strcmp(a, "--obs_in")) o->obs_in = v;
    else if (!strcmp(a, "--obs_in_format")) o->obs_in_format = v;
    else if (!strcmp(a, "--out")) o->out = v;
    else if (!strcmp(a, "--out_format")) o->out_format = v;
    else if (!strcmp(a, "--json")) o->json = v;
    else if (!strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "--mode")) o->mode_name = v;
    else if (!strcmp(a, "--predecoder_weights")) o->weights_flag = v;
    else if (!strcmp(a, "--plan_dir")) {
      o->plan_dir = v;
      o->gpu_engine_flag = a;
    }
    else if (!strcmp(a, "--payload")) {
      if (strcmp(v, "int32") && strcmp(v, "bits")) {
        fprintf(stderr, "qec-realtime: --payload is int32 or bits, not '%s'\n", v);
        return 1;
      }
      o->payload = strcmp(v, "bits") ? QRT_PAYLOAD_INT32 : QRT_PAYLOAD_BITS;
    } else if (!strcmp(a, "--precision")) {
      if (strcmp(v, "fp16") && strcmp(v, "fp32")) {
        fprintf(stderr, "qec-realtime: --precision is fp16 or fp32, not '%s'\n", v);
        return 1;
      }
      o->fp16 = !strcmp(v, "fp16");
      o->gpu_engine_flag = a;
    }
    else if (!strcmp(a, "--gpu_plan")) {
      if (strcmp(v, "throughput") && strcmp(v, "latency")) {
        fprintf(stderr, "qec-realtime: --gpu_plan is throughput or latency, not '%s'\n", v);
        return 1;
      }
      o->gpu_plan_latency = !strcmp(v, "latency");
      o->gpu_engine_flag = a;
    }
    else if (!strcmp(a, "--preset")) o->preset = v;
    else if (!strcmp(a, "--requests")) { if (parse_u64(a, v, &o->requests)) return 1; }
    else if (!strcmp(a, "--timeout_ms")) { if (parse_u64(a, v, &o->timeout_ms)) return 1; }
    else if (!strcmp(a, "--corrupt_every")) { if (parse_u64(a, v, &o->corrupt_every)) return 1; }
    else if (!strcmp(a, "--fail_launch_every")) { if (parse_u64(a, v, &o->fail_launch_every)) return 1; }
    else if (!strcmp(a, "--duration_s")) { if (parse_double(a, v, &o->duration_s)) return 1; }
    else if (!strcmp(a, "--interval_us")) { if (parse_double(a, v, &o->interval_us)) return 1; }
    else if (!strcmp(a, "--progress_s")) { if (parse_double(a, v, &o->progress_s)) return 1; }
    else {
      if (parse_u64(a, v, &u)) return 1;
      if (!strcmp(a, "--workers")) {
        if (u < 1 || u > CUDAQ_PIPELINE_MAX_WORKERS) {
          fprintf(stderr, "qec-realtime: --workers is 1..%d\n", CUDAQ_PIPELINE_MAX_WORKERS);
          return 1;
        }
        o->workers = (int)u;
      } else if (!strcmp(a, "--slots")) {
        if (u < 1 || u > 65536) {
          fprintf(stderr, "qec-realtime: --slots is 1..65536\n");
          return 1;
        }
        o->slots = (int)u;
      } else if (!strcmp(a, "--pin")) {
        if (u > 4095) {
          fprintf(stderr, "qec-realtime: --pin is a CPU number\n");
          return 1;
        }
        o->pin = (int)u;
      } else if (!strcmp(a, "--prelaunch") || !strcmp(a, "--prelaunch_max")) {
        if (u > CUDAQ_PIPELINE_MAX_WORKERS) {
          fprintf(stderr, "qec-realtime: %s is 0..%d\n", a, CUDAQ_PIPELINE_MAX_WORKERS);
          return 1;
        }
        if (!strcmp(a, "--prelaunch"))
          o->prelaunch = (int)u;
        else
          o->prelaunch_max = (int)u;
      } else { /* --idle_yield, --compare_mwpm, --self_gate */
        if (u > 1) {
          fprintf(stderr, "qec-realtime: %s is 0 or 1\n", a);
          return 1;
        }
        if (!strcmp(a, "--idle_yield"))
          o->idle_yield = (int)u;
        else if (!strcmp(a, "--self_gate"))
          o->self_gate = (int)u;
        else
          o->compare_mwpm = (int)u;
      }
    }
  }
  return 0;
}

/* The shipped models of the presets (models/manifest.json). */
static const struct {
  const char *name, *file;
} presets[] = {{"d5", "predecoder_d5_z.onnx"},        {"d7", "predecoder_d7_z.onnx"},
               {"d9", "predecoder_d9_z.onnx"},        {"d13", "predecoder_d13_z.onnx"},
               {"d21", "predecoder_d21_x.onnx"},      {"d31", "predecoder_d31_z.onnx"},
               {"d5-fast", "predecoder_d5_z_fast.onnx"}, {"d7-fast", "predecoder_d7_z_fast.onnx"},
               {"d9-fast", "predecoder_d9_z_fast.onnx"}, {"d13-fast", "predecoder_d13_z_fast.onnx"}};

int qrt_check_mode_and_preset(opts_t *o) {
  if (!strcmp(o->mode_name, "cpu"))
    o->mode = QRT_MODE_CPU;
  else if (!strcmp(o->mode_name, "hybrid") || !strcmp(o->mode_name, "gpu"))
    o->mode = QRT_MODE_HYBRID;
  else if (!strcmp(o->mode_name, "passthrough"))
    o->mode = QRT_MODE_PASSTHROUGH;
  else if (!strcmp(o->mode_name, "device_call")) {
    fprintf(stderr, "qec-realtime: --mode device_call (the predecoder as a DEVICE_CALL handler "
                    "inside the persistent dispatch kernel) is not offered: measured 1.6x (d = 7) to "
                    "3.4x (d = 13) slower than the predecoder's graph launched from the dispatcher "
                    "(bench/results/nn-device-call-h200-2026-11-27.md); the library has it "
                    "(cudaq_nn_gpu_device_program, cudaq/nn/device_program.cuh, "
                    "bench/nn/bench_nn_device_call); use --mode hybrid\n");
    return 2;
  } else {
    fprintf(stderr, "qec-realtime: --mode is cpu, hybrid or passthrough, not '%s'\n",
            o->mode_name);
    return 2;
  }
  if (o->preset) {
    const char *file = NULL;
    for (size_t k = 0; k < sizeof presets / sizeof presets[0]; k++)
      if (!strcmp(o->preset, presets[k].name))
        file = presets[k].file;
    if (!file) {
      fprintf(stderr,
              "qec-realtime: --preset is d5, d7, d9, d13, d21 or d31 (or d5-fast .. d13-fast), "
              "not '%s'\n",
              o->preset);
      return 2;
    }
    static char model[4096];
    snprintf(model, sizeof model, "%s/models/%s", QRT_SOURCE_DIR, file);
    if (!o->model && o->mode != QRT_MODE_PASSTHROUGH)
      o->model = model;
    if (!o->dem) {
      fprintf(stderr,
              "qec-realtime: --preset %s needs the shots of its model's circuit. Make them with\n"
              "  %s/.venv/bin/python %s/tools/predecoder/reference_eval.py shots \\\n"
              "      --manifest %s/models/manifest.json --model %s \\\n"
              "      --shots 10000 --seed 1 --out %s_shots\n"
              "then run\n"
              "  qec-realtime --preset %s --dem %s_shots/circuit.dem --in %s_shots/shots.b8 \\\n"
              "      --in_format b8 --obs_in %s_shots/obs.01\n",
              o->preset, QRT_SOURCE_DIR, QRT_SOURCE_DIR, QRT_SOURCE_DIR, model, o->preset,
              o->preset, o->preset, o->preset, o->preset);
      return 2;
    }
  }
  if (o->mode == QRT_MODE_HYBRID && qrt_pd_kind_of(o->model) != QRT_PD_ONNX) {
    fprintf(stderr, "qec-realtime: --mode hybrid runs an ONNX model on the GPU: give --model "
                    "PATH or --preset (passthrough runs MWPM alone behind the GPU copies)\n");
    return 2;
  }
  if (o->mode == QRT_MODE_PASSTHROUGH && qrt_pd_kind_of(o->model) != QRT_PD_NONE) {
    fprintf(stderr, "qec-realtime: --mode passthrough runs no predecoder: drop --model '%s'\n",
            o->model);
    return 2;
  }
  if (o->fail_launch_every && o->mode == QRT_MODE_CPU) {
    fprintf(stderr, "qec-realtime: --fail_launch_every fails GPU graph launches: it needs --mode "
                    "hybrid or passthrough\n");
    return 2;
  }
  if (o->prelaunch < 0) /* not given */
    o->prelaunch = o->mode != QRT_MODE_CPU && !o->fail_launch_every ? QRT_DEFAULT_PRELAUNCH : 0;
  if (o->prelaunch && o->mode == QRT_MODE_CPU) {
    fprintf(stderr, "qec-realtime: --prelaunch pre-launches GPU graphs: it needs --mode hybrid or "
                    "passthrough\n");
    return 2;
  }
  if (o->prelaunch && o->fail_launch_every) {
    fprintf(stderr, "qec-realtime: --prelaunch and --fail_launch_every do not combine (a failed "
                    "pre-launch is retried on arrival, not answered with an error)\n");
    return 2;
  }
  if (o->self_gate >= 0 && !o->prelaunch) {
    fprintf(stderr, "qec-realtime: --self_gate chooses how pre-launched graphs wait at their gate: "
                    "it needs --prelaunch N >= 1 (GPU modes; %s)\n",
            o->mode == QRT_MODE_CPU ? "--mode cpu has no graphs" : "--prelaunch is 0 here");
    return 2;
  }
  if (o->self_gate < 0)
    o->self_gate = 1;
  if (o->prelaunch_max >= 0 && !o->prelaunch) {
    fprintf(stderr, "qec-realtime: --prelaunch_max lets more pre-launched graphs wait near saturation: "
                    "it needs --prelaunch N >= 1\n");
    return 2;
  }
  if (o->prelaunch_max > 0 && o->prelaunch_max < o->prelaunch) {
    fprintf(stderr, "qec-realtime: --prelaunch_max %d is below --prelaunch %d (0: no boost)\n", o->prelaunch_max,
            o->prelaunch);
    return 2;
  }
  if (o->prelaunch_max < 0) /* not given */
    o->prelaunch_max = o->prelaunch && QRT_DEFAULT_PRELAUNCH_MAX > o->prelaunch ? QRT_DEFAULT_PRELAUNCH_MAX : 0;
  switch (cudaq_predecoder_weights_flag(o->weights_flag, o->correlations, &o->weights)) {
    case -1:
      fprintf(stderr, "qec-realtime: --predecoder_weights is auto, on or off, not '%s'\n", o->weights_flag);
      return 2;
    case -2: /* correlated matching reweights the DEM's edges itself */
      fprintf(stderr, "qec-realtime: --enable_correlations does not combine with --predecoder_weights on\n");
      return 2;
  }
  if (o->weights_flag && (qrt_pd_kind_of(o->model) != QRT_PD_ONNX || o->mode == QRT_MODE_PASSTHROUGH)) {
    fprintf(stderr, "qec-realtime: --predecoder_weights is for ONNX models (--model PATH or a preset's) in "
                    "--mode cpu or hybrid\n");
    return 2;
  }
  if (o->skip_layout_check && qrt_pd_kind_of(o->model) != QRT_PD_ONNX) {
    fprintf(stderr, "qec-realtime: --skip_layout_check is for ONNX models (--model PATH or a "
                    "preset's)\n");
    return 2;
  }
  if (o->gpu_engine_flag && o->mode != QRT_MODE_HYBRID) {
    fprintf(stderr, "qec-realtime: %s sets the GPU engine: it needs --mode hybrid (the CPU "
                    "executor runs FP32 and keeps no plan)\n", o->gpu_engine_flag);
    return 2;
  }
  const char *conflict = cudaq_sample_obs_flags_conflict(o->appended, o->obs_in != NULL);
  if (conflict) {
    fprintf(stderr, "qec-realtime: %s\n", conflict);
    return 2;
  }
  if (o->in && o->obs_in && !strcmp(o->in, "-") && !strcmp(o->obs_in, "-")) {
    fprintf(stderr, "qec-realtime: --in and --obs_in cannot both be '-' (stdin)\n");
    return 2;
  }
  if (!o->dem || !o->in) {
    fprintf(stderr, "qec-realtime: --dem and --in are required (--help lists the flags)\n");
    return 2;
  }
  /* --out and --json are opened (truncated) before the inputs are read: an
   * input named again as an output would be destroyed (cudaq/qec/samples.h). */
  const char *model = qrt_pd_kind_of(o->model) == QRT_PD_ONNX ? o->model : NULL;
  const char *const ins[][2] = {{"--dem", o->dem}, {"--in", o->in}, {"--obs_in", o->obs_in}, {"--model", model}};
  char clash[1024];
  if (cudaq_sample_outputs_clobber(o->out, o->json, ins, 4, clash, sizeof clash)) {
    fprintf(stderr, "qec-realtime: %s\n", clash);
    return 2;
  }
  const struct {
    const char *flag, *name;
    cudaq_sample_format_t *out;
  } fmts[] = {{"--in_format", o->in_format, &o->in_fmt},
              {"--obs_in_format", o->obs_in_format, &o->obs_fmt},
              {"--out_format", o->out_format, &o->out_fmt}};
  for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++)
    if (cudaq_sample_format_parse(fmts[k].name, fmts[k].out)) {
      fprintf(stderr, "qec-realtime: %s is 01, b8 or dets, not '%s'\n", fmts[k].flag, fmts[k].name);
      return 2;
    }
  if (o->interval_us > 1e6) {
    fprintf(stderr, "qec-realtime: --interval_us %g: at most 1,000,000 (one request a second)\n",
            o->interval_us);
    return 2;
  }
  if (o->duration_s > 0 && o->interval_us > 0 && o->duration_s * 1e6 / o->interval_us > 4e9) {
    fprintf(stderr, "qec-realtime: --duration_s / --interval_us asks for too many requests\n");
    return 2;
  }
  return 0;
}

/* ---- the shot file ------------------------------------------------------ */
