/* The device program (cudaq_nn_gpu_device_program, gpu_engine.h): the
 * layout shared by its builder (gpu_devprog_build.cu, in cudaq_nn) and its
 * interpreter (gpu_devprog.cu, in the relocatable-code library
 * cudaq_nn_device). Lives in device memory. */
#ifndef CUDAQ_NN_GPU_DEVPROG_H
#define CUDAQ_NN_GPU_DEVPROG_H

#include "cudaq/nn/gpu_engine.h"
#include "gpu_kernels.cuh"

#define NNK_DEVPROG_MAX_STEPS 24
#define NNK_DEVPROG_MAX_OUT 4
#define NNK_DEVPROG_THREADS 256 /* the stack's and the tail's block size */
#define NNK_DEVPROG_DEFAULT_SMEM (160u * 1024u)

/* One step of the engine's plan, each run by the whole grid. */
enum { DP_ELEMENTWISE = 1, DP_FUSED, DP_MOVE, DP_CONVERT, DP_STACK, DP_TAIL };
struct nnk_devprog_step {
  int kind;
  nnk_elementwise ew; /* DP_ELEMENTWISE */
  nnk_fused fz;       /* DP_FUSED */
  nnk_move mv;        /* DP_MOVE */
  nnk_tail tl;        /* DP_TAIL */
  const void *cin;    /* DP_CONVERT: n elements of cin_dt at cin to cout_dt at cout */
  void *cout;
  int cin_dt, cout_dt;
  int64_t n;
};

struct cudaq_nn_device_program {
  int n_steps;
  int half; /* the engine's float element type: __half (1) or float (0) */
  nnk_devprog_step step[NNK_DEVPROG_MAX_STEPS];
  nnk_stack stack; /* DP_STACK: planned for the program's shared memory, its own sum buffers */
  int32_t *in;     /* the engine's input 0 */
  uint32_t in_words;
  int n_out;
  const uint32_t *out[NNK_DEVPROG_MAX_OUT]; /* the engine's outputs, 4-byte words */
  uint32_t out_words[NNK_DEVPROG_MAX_OUT];
  uint32_t out_bytes;
  unsigned *bad; /* device word: nonzero when a thread saw an input other than 0 / 1 in the current call */
  /* NULL, or (CUDAQ_NN_DEVPROG_PROF=1 at build) the last call's GPU clock
   * stamps (ns) of block 0's thread 0: [0] entry, [1] input copied and
   * checked, [2 + k] step k's barrier passed, [2 + n_steps] outputs written
   * (cudaq_nn_gpu_describe prints the differences). */
  unsigned long long *prof;
};
#define NNK_DEVPROG_PROF_SLOTS (NNK_DEVPROG_MAX_STEPS + 3)

#endif
