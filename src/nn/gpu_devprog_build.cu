/* The device program's builder (cudaq_nn_gpu_device_program, gpu_engine.h;
 * the layout: gpu_devprog.h; the interpreter: gpu_devprog.cu). It copies
 * the engine's plan step by step into device memory; the convolutions,
 * which the engine runs as one cooperative stack kernel, are planned again
 * for the shared memory the caller lends, over the same packed weights and
 * with sum buffers of their own (the stack zeroes its buffers for its next
 * run, so two plans must not share them). */
#include "gpu_devprog.h"
#include "gpu_engine_internal.h"

static const char *step_name(int kind) {
  switch (kind) {
    case ST_ELEMENTWISE: return "elementwise";
    case ST_MOVE: return "copy";
    case ST_CONV: return "convolution";
    case ST_GEMM: return "matrix product";
    case ST_CONVERT: return "conversion";
    case ST_FUSED: return "fused elementwise";
    case ST_TAIL: return "tail";
    default: return "?";
  }
}

static const char *node_name(const cudaq_nn_gpu *g, int node) {
  return node >= 0 && (size_t)node < g->m->n_nodes && g->m->nodes[node].name ? g->m->nodes[node].name : "?";
}

/* The stack of convolution stack_id planned for smem_limit bytes, over the
 * engine's weights and buffers, with sum buffers of its own. */
static cudaq_nn_status_t plan_stack(cudaq_nn_gpu *g, int stack_id, size_t smem_limit, nnk_stack *s, size_t *smem,
                                    cudaq_nn_error_t *err) {
  const stack_state *st = &g->stacks[stack_id];
  const nnk_conv *layers[NNK_STACK_MAX_LAYERS];
  for (int l = 0; l < st->L; l++) layers[l] = &g->convs[st->conv[l]].p;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g->opts.device));
  size_t acc_floats = 0;
  if (!nnk_stack_plan(layers, st->L, sms, 0, 0, smem_limit, s, smem, &acc_floats)) {
    nn__set_error(err, "the convolutions do not fit a stack in %zu bytes of shared memory per block", smem_limit);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  s->x = st->s.x;
  s->y = st->s.y;
  for (int l = 0; l < st->L; l++) {
    s->layer[l].w = st->s.layer[l].w;
    s->layer[l].b = st->s.layer[l].b;
    const int a = s->layer[l].abuf;
    if (!s->acc[a]) TRY(nng_dalloc(g, acc_floats * sizeof(float), (void **)&s->acc[a], err));
  }
  s->prof = NULL;
  return CUDAQ_NN_OK;
}

/* Appends d to the device program's steps. */
static cudaq_nn_status_t push_step(cudaq_nn_device_program *hp, const nnk_devprog_step *d, cudaq_nn_error_t *err) {
  if (hp->n_steps == NNK_DEVPROG_MAX_STEPS) {
    nn__set_error(err, "more than %d steps", NNK_DEVPROG_MAX_STEPS);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  hp->step[hp->n_steps++] = *d;
  return CUDAQ_NN_OK;
}

cudaq_nn_status_t cudaq_nn_gpu_device_program(cudaq_nn_gpu_t *g, size_t smem_limit,
                                              cudaq_nn_device_program_info_t *out, cudaq_nn_error_t *err) {
  if (!g || !out) {
    nn__set_error(err, "NULL argument");
    return CUDAQ_NN_ERR_INVALID_ARG;
  }
  if (g->devprog_host) {
    *out = g->devprog_info;
    return CUDAQ_NN_OK;
  }
  if (!g->half || g->opts.conv_impl != CUDAQ_NN_CONV_STACK) {
    nn__set_error(err, "a device program needs an engine created with FP16 and conv_impl CUDAQ_NN_CONV_STACK");
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  const cudaq_nn_model_t *m = g->m;
  if (m->n_inputs != 1 || m->values[m->inputs[0]].dtype != CUDAQ_NN_INT32) {
    nn__set_error(err, "a device program takes one INT32 input (the model has %zu inputs)", m->n_inputs);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  if (m->n_outputs < 1 || m->n_outputs > NNK_DEVPROG_MAX_OUT) {
    nn__set_error(err, "a device program has 1 to %d outputs (the model has %zu)", NNK_DEVPROG_MAX_OUT, m->n_outputs);
    return CUDAQ_NN_ERR_UNSUPPORTED;
  }
  if (smem_limit == 0) smem_limit = NNK_DEVPROG_DEFAULT_SMEM;
  cudaq_nn_device_program *hp = (cudaq_nn_device_program *)calloc(1, sizeof *hp);
  if (!hp) return CUDAQ_NN_ERR_NO_MEMORY;
  cudaq_nn_status_t rc = CUDAQ_NN_OK;
  size_t smem = 0;
  int stack_id = -1;
  for (int i = 0; i < g->n_steps && rc == CUDAQ_NN_OK; i++) {
    const step *s = &g->steps[i];
    nnk_devprog_step d;
    memset(&d, 0, sizeof d);
    switch (s->kind) {
      case ST_ELEMENTWISE: d.kind = DP_ELEMENTWISE; d.ew = s->ew; break;
      case ST_FUSED: if (s->fz.n) { d.kind = DP_FUSED; d.fz = s->fz; } break;
      case ST_MOVE: if (s->mv.n) { d.kind = DP_MOVE; d.mv = s->mv; } break;
      case ST_TAIL: d.kind = DP_TAIL; d.tl = s->tl; break;
      case ST_CONVERT:
        d.kind = DP_CONVERT;
        d.cin = s->cin; d.cin_dt = s->cin_dt; d.cout = s->cout; d.cout_dt = s->cout_dt; d.n = s->n;
        break;
      case ST_CONV: {
        const conv_state *c = &g->convs[s->conv];
        if (c->impl != IMPL_STACK || c->stack < 0) {
          nn__set_error(err, "convolution %s does not run in a stack (its shape does not fit one)", node_name(g, s->node));
          rc = CUDAQ_NN_ERR_UNSUPPORTED;
          break;
        }
        if (c->stack == stack_id) break; /* a later member: the stack step runs it */
        if (stack_id >= 0) {
          nn__set_error(err, "the convolutions form more than one stack (%s starts another)", node_name(g, s->node));
          rc = CUDAQ_NN_ERR_UNSUPPORTED;
          break;
        }
        stack_id = c->stack;
        rc = plan_stack(g, stack_id, smem_limit, &hp->stack, &smem, err);
        if (rc == CUDAQ_NN_OK && g->stacks[stack_id].fold_mv.n) {
          /* the copy the cluster kernel reads itself (its step is gone): the
           * device program's stack reads the copy's output */
          nnk_devprog_step mv;
          memset(&mv, 0, sizeof mv);
          mv.kind = DP_MOVE;
          mv.mv = g->stacks[stack_id].fold_mv;
          rc = push_step(hp, &mv, err);
        }
        d.kind = DP_STACK;
        break;
      }
      default:
        nn__set_error(err, "step %d (%s, node %s) has no device form", i, step_name(s->kind), node_name(g, s->node));
        rc = CUDAQ_NN_ERR_UNSUPPORTED;
        break;
    }
    if (rc != CUDAQ_NN_OK || !d.kind) continue;
    rc = push_step(hp, &d, err);
  }
  if (rc == CUDAQ_NN_OK && hp->n_steps == 0) {
    /* The call's input check relies on a grid barrier after it (each step ends with one). */
    nn__set_error(err, "the model computes nothing on the GPU (its outputs are its input or constants)");
    rc = CUDAQ_NN_ERR_UNSUPPORTED;
  }
  cudaq_nn_device_program_info_t info;
  memset(&info, 0, sizeof info);
  if (rc == CUDAQ_NN_OK) {
    hp->half = g->half;
    const nn_value_t *iv = &m->values[m->inputs[0]];
    hp->in = (int32_t *)g->dev_in[0];
    hp->in_words = (uint32_t)iv->n;
    hp->n_out = (int)m->n_outputs;
    for (size_t k = 0; k < m->n_outputs && rc == CUDAQ_NN_OK; k++) {
      const nn_value_t *ov = &m->values[m->outputs[k]];
      const size_t bytes = ov->n * cudaq_nn_dtype_size(ov->dtype);
      if (bytes % 4 || bytes > UINT32_MAX - hp->out_bytes) {
        nn__set_error(err, "output %zu is %zu bytes, not whole 4-byte words", k, bytes);
        rc = CUDAQ_NN_ERR_UNSUPPORTED;
        break;
      }
      hp->out[k] = (const uint32_t *)g->dev_out[k];
      hp->out_words[k] = (uint32_t)(bytes / 4);
      hp->out_bytes += (uint32_t)bytes;
    }
    info.threads_per_block = NNK_DEVPROG_THREADS;
    info.smem_bytes = (smem + 15) & ~(size_t)15;
    info.useful_blocks = stack_id >= 0 ? (unsigned)hp->stack.grid : 1u;
    info.input_bytes = (size_t)hp->in_words * 4;
    info.output_bytes = hp->out_bytes;
    for (int k = 0; k < hp->n_steps; k++)
      if (hp->step[k].kind == DP_TAIL) {
        const nnk_tail *t = &hp->step[k].tl;
        const unsigned b = t->p[0].blocks + (t->n > 1 ? t->p[1].blocks : 0u);
        if (b > info.useful_blocks) info.useful_blocks = b;
      }
  }
  if (rc == CUDAQ_NN_OK) rc = nng_dalloc(g, sizeof(unsigned), (void **)&hp->bad, err);
  if (rc == CUDAQ_NN_OK && getenv("CUDAQ_NN_DEVPROG_PROF"))
    rc = nng_dalloc(g, NNK_DEVPROG_PROF_SLOTS * sizeof(unsigned long long), (void **)&hp->prof, err);
  void *dp = NULL;
  if (rc == CUDAQ_NN_OK) rc = nng_dalloc(g, sizeof *hp, &dp, err);
  if (rc == CUDAQ_NN_OK) {
    cudaError_t e = cudaMemcpy(dp, hp, sizeof *hp, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      nn__set_error(err, "cudaMemcpy (device program) failed: %s", cudaGetErrorString(e));
      rc = CUDAQ_NN_ERR_CUDA;
    }
  }
  if (rc != CUDAQ_NN_OK) {
    free(hp);
    return rc;
  }
  info.program = (const cudaq_nn_device_program_t *)dp;
  g->devprog_host = hp;
  g->devprog_info = info;
  *out = info;
  return CUDAQ_NN_OK;
}

/* Bytes snprintf wrote into len (its return w), clamped as the buffer holds them. */
static size_t written(int w, size_t len) { return w < 0 ? 0 : (size_t)w < len ? (size_t)w : len - 1; }

size_t nng_describe_devprog(const cudaq_nn_gpu *g, char *buf, size_t len) {
  const cudaq_nn_device_program *hp = g->devprog_host;
  if (!hp || len == 0) return 0;
  const cudaq_nn_device_program_info_t *i = &g->devprog_info;
  size_t used = written(snprintf(buf, len, "device program: %d steps, %u threads x up to %u useful blocks, %zu B smem per "
                                           "block\n", hp->n_steps, i->threads_per_block, i->useful_blocks, i->smem_bytes),
                        len);
  if (!hp->prof) return used;
  unsigned long long t[NNK_DEVPROG_PROF_SLOTS];
  if (cudaMemcpy(t, hp->prof, sizeof t, cudaMemcpyDeviceToHost) != cudaSuccess || t[0] == 0) return used;
  used += written(snprintf(buf + used, len - used, "  last call (us): input %.2f", (t[1] - t[0]) / 1e3), len - used);
  static const char *const names[] = {"?", "elementwise", "fused", "copy", "conversion", "stack", "tail"};
  for (int k = 0; k <= hp->n_steps && used + 1 < len; k++) {
    const double us = (t[2 + k] - t[1 + k]) / 1e3;
    if (k < hp->n_steps) {
      const int kind = hp->step[k].kind;
      used += written(snprintf(buf + used, len - used, ", %s %.2f", names[kind <= DP_TAIL ? kind : 0], us), len - used);
    } else {
      used += written(snprintf(buf + used, len - used, ", outputs %.2f\n", us), len - used);
    }
  }
  return used;
}
