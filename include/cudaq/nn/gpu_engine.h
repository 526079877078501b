/*
 * GPU engine for a loaded ONNX model (cudaq/nn/nn.h): FP32 or FP16 execution,
 * convolutions through cuDNN, the engine's own direct-convolution kernel or,
 * in FP16, its tensor-core implicit-GEMM kernel (chosen per layer by timing
 * the candidates at the first load, unless forced),
 * and the whole inference captured into one CUDA graph over fixed device
 * input and output buffers. A pipeline worker copies the payload into
 * cudaq_nn_gpu_input(..., 0), launches the graph (cudaq_nn_gpu_launch, or
 * the graph itself as a child node of its own graph) and reads the outputs.
 *
 * Bindings keep the element types the model declares (INT32, uint8 or
 * float); in FP16 mode float tensors are converted at the graph's edges.
 *
 * Engine cache: with options.plan_path set, the first create selects the
 * convolution algorithms and writes a plan file there; later creates read
 * it and skip the selection. A plan is used only when its model hash, GPU
 * (name, compute capability, UUID), CUDA runtime and cuDNN versions and
 * precision all match; otherwise it is rebuilt and rewritten.
 *
 * Built without CUDA, cudaq_nn_gpu_create returns CUDAQ_NN_ERR_NO_DEVICE.
 * One engine is used by one thread at a time (its graph has one set of
 * buffers); create several for concurrent workers.
 */
#ifndef CUDAQ_NN_GPU_ENGINE_H
#define CUDAQ_NN_GPU_ENGINE_H

#include <stddef.h>

#include "cudaq/nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaq_nn_precision {
  CUDAQ_NN_FP32 = 0,
  CUDAQ_NN_FP16 = 1
} cudaq_nn_precision_t;

typedef enum cudaq_nn_conv_impl {
  CUDAQ_NN_CONV_AUTO = 0,   /* time all per layer, keep the fastest */
  CUDAQ_NN_CONV_CUDNN = 1,  /* cuDNN, fastest algorithm found by cudnnFind */
  CUDAQ_NN_CONV_OWN = 2,    /* the engine's direct convolution kernel */
  CUDAQ_NN_CONV_TC = 3,     /* FP16 tensor-core implicit GEMM (fastest tile shape) where it
                               applies (FP16, stride 1, constant weights, <= 32 taps); the
                               AUTO choice between cuDNN and own elsewhere (so in FP32 too) */
  CUDAQ_NN_CONV_CL = 4,     /* FP16 channels-last tensor-core implicit GEMM (fastest tile and
                               split) wherever it applies (FP16, constant weights), with
                               NDHWC activations between convolutions that all run it; the
                               AUTO choice between cuDNN and own elsewhere. AUTO also times
                               it, per layer and per chain of NDHWC-joined layers */
  CUDAQ_NN_CONV_STACK = 5   /* as CL, and every chain of such layers that the persistent
                               stack kernel takes (FP16, kernel dims 1 or 3, "same" padding,
                               stride 1) runs as that one cooperative kernel, all its layers
                               with grid barriers between them. AUTO also times it, per chain.
                               Its grid (one CTA per SM) must be resident at once: a persistent
                               kernel that holds SMs' resources (a device-call dispatcher) can
                               delay it until they free; CUDAQ_NN_STACK=0 rules it out */
} cudaq_nn_conv_impl_t;

typedef enum cudaq_nn_plan_state {
  CUDAQ_NN_PLAN_NONE = 0,    /* no plan_path: selected, not saved */
  CUDAQ_NN_PLAN_HIT = 1,     /* read a matching plan, no selection */
  CUDAQ_NN_PLAN_BUILT = 2,   /* no plan file: selected and written */
  CUDAQ_NN_PLAN_REBUILT = 3  /* a plan existed but did not match: rebuilt */
} cudaq_nn_plan_state_t;

typedef struct cudaq_nn_gpu_options {
  cudaq_nn_precision_t precision;
  cudaq_nn_conv_impl_t conv_impl;
  const char *plan_path;   /* engine cache file, or NULL */
  int device;              /* CUDA device ordinal */
  int tune_iterations;     /* timed launches per candidate (default 20) */
  int concurrent;          /* engines that will run inferences at the same time on this device
                              (default 1). At 1 the plan is the fastest single inference; at
                              N >= 2 a plan that occupies few SMs (the narrow network as one
                              thread-block cluster) counts its time divided by the number of
                              its copies that can run at once (at most N), as sustained
                              throughput does, against the others' whole time: slower alone,
                              but N of them share the GPU instead of queueing behind each
                              other. Part of the plan's key. */
} cudaq_nn_gpu_options_t;

typedef struct cudaq_nn_gpu cudaq_nn_gpu_t;

/* Defaults: FP32, AUTO, no plan, device 0, 20 iterations. Returns
 * CUDAQ_NN_OK or CUDAQ_NN_ERR_INVALID_ARG (NULL). */
cudaq_nn_status_t cudaq_nn_gpu_options_init(cudaq_nn_gpu_options_t *opts);

/* Writes the conventional plan path next to a model file into out:
 * "dir/name.onnx" -> "dir/name.fp32.plan" (or .fp16.plan). Returns
 * CUDAQ_NN_OK or CUDAQ_NN_ERR_INVALID_ARG (NULL, out too small). */
cudaq_nn_status_t cudaq_nn_plan_path(const char *model_path, cudaq_nn_precision_t precision,
                                     char *out, size_t out_len);

/* Builds the engine: device buffers for every tensor, weights uploaded (as
 * FP16 in FP16 mode), convolution algorithms selected or read from the
 * plan, the inference captured into a CUDA graph and instantiated. The
 * model must outlive the engine. opts NULL: defaults. Returns CUDAQ_NN_OK;
 * CUDAQ_NN_ERR_INVALID_ARG; CUDAQ_NN_ERR_NO_DEVICE (no device, or no CUDA in
 * this build); CUDAQ_NN_ERR_CUDA (err names the call); CUDAQ_NN_ERR_IO (the
 * plan cannot be written); CUDAQ_NN_ERR_NO_MEMORY. err may be NULL. */
cudaq_nn_status_t cudaq_nn_gpu_create(const cudaq_nn_model_t *model,
                                      const cudaq_nn_gpu_options_t *opts, cudaq_nn_gpu_t **out,
                                      cudaq_nn_error_t *err);

/* Frees the engine (NULL is ignored). */
void cudaq_nn_gpu_destroy(cudaq_nn_gpu_t *gpu);

/* Device buffer of input / output `index` (declared type and shape, the
 * binding's size_bytes), or NULL for a bad index. Fixed for the engine's
 * life: the graph reads and writes exactly these. */
void *cudaq_nn_gpu_input(const cudaq_nn_gpu_t *gpu, size_t index);
void *cudaq_nn_gpu_output(const cudaq_nn_gpu_t *gpu, size_t index);

/* The instantiated graph (a cudaGraphExec_t) and the graph it was
 * instantiated from (a cudaGraph_t, for use as a child graph node). */
void *cudaq_nn_gpu_graph_exec(const cudaq_nn_gpu_t *gpu);
void *cudaq_nn_gpu_graph(const cudaq_nn_gpu_t *gpu);

/* Device memory the engine allocated and holds, in bytes: every tensor
 * buffer, packed weights, the device program's state and the cuDNN
 * workspace (what cudaMalloc gave it). Not counted: the CUDA context,
 * cuDNN's own handle state and the instantiated graph. 0 for NULL. */
size_t cudaq_nn_gpu_device_bytes(const cudaq_nn_gpu_t *gpu);

/* Launches the inference graph on stream (a cudaStream_t; NULL: the legacy
 * default stream). Allocates nothing. Returns CUDAQ_NN_OK,
 * CUDAQ_NN_ERR_INVALID_ARG, CUDAQ_NN_ERR_CUDA. */
cudaq_nn_status_t cudaq_nn_gpu_launch(cudaq_nn_gpu_t *gpu, void *stream);

/* Records the inference's kernels into stream (a cudaStream_t, normally one
 * the caller is capturing into a graph of its own), instead of the graph as
 * one child node: the kernels keep their programmatic dependent launch
 * (PDL) attributes, so the first one may start while the caller's kernel
 * before it is still running and a kernel the caller launches after them
 * with PDL may start during the last one. Every engine kernel neither reads
 * nor writes a tensor before its griddepcontrol.wait (which returns once
 * the kernel before has completed and its stores are visible); a caller's
 * kernel launched after them with PDL must do the same (call
 * cudaq_nn_pdl_wait, below, before it reads an output). Launched outside a
 * capture it runs the inference as cudaq_nn_gpu_launch does, kernel by
 * kernel. Allocates nothing; not concurrently with another call on this
 * engine. Returns CUDAQ_NN_OK,
 * CUDAQ_NN_ERR_INVALID_ARG (gpu NULL), CUDAQ_NN_ERR_CUDA (err names the
 * call). */
cudaq_nn_status_t cudaq_nn_gpu_enqueue(cudaq_nn_gpu_t *gpu, void *stream, cudaq_nn_error_t *err);

/* 1 when the engine launches its kernels with PDL (the current device has
 * compute capability >= 9.0 and CUDAQ_NN_PDL is not "0"; decided once per
 * process): a caller's kernels around cudaq_nn_gpu_enqueue follow it. 0
 * without CUDA. */
int cudaq_nn_pdl_enabled(void);

/* Convenience for tests and tools: copies the inputs in, launches, copies
 * the outputs out and waits. Sizes must equal the bindings' size_bytes.
 * Returns CUDAQ_NN_OK, CUDAQ_NN_ERR_INVALID_ARG, CUDAQ_NN_ERR_CUDA. */
cudaq_nn_status_t cudaq_nn_gpu_run(cudaq_nn_gpu_t *gpu, const void *const *inputs,
                                   const size_t *input_sizes, void *const *outputs,
                                   const size_t *output_sizes, cudaq_nn_error_t *err);

/* What happened to the plan at create. */
cudaq_nn_plan_state_t cudaq_nn_gpu_plan_state(const cudaq_nn_gpu_t *gpu);

/* Writes a one-line-per-convolution description of the choices (cuDNN
 * algorithm, own kernel or tensor-core tile configuration; the best measured
 * time of each, -1 where not measured) into buf. Returns CUDAQ_NN_OK or
 * CUDAQ_NN_ERR_INVALID_ARG. */
cudaq_nn_status_t cudaq_nn_gpu_describe(const cudaq_nn_gpu_t *gpu, char *buf, size_t len);

/* ---- the model as a device function (extension, issues 11 and 12) ------ */

/* A device program runs the engine's inference inside a kernel of the
 * caller's, with no launch: the persistent cooperative dispatch kernel
 * calls it as a DEVICE_CALL handler (cudaq/nn/device_program.cuh). It is
 * the engine's own plan (input copy, the convolutions as one stack, the
 * fused tail, conversions), each step run by the whole grid with a grid
 * barrier between steps. Opaque; lives in device memory owned by the
 * engine. */
typedef struct cudaq_nn_device_program cudaq_nn_device_program_t;

typedef struct cudaq_nn_device_program_info {
  const cudaq_nn_device_program_t *program; /* device pointer, for cudaq_nn_device_program_call */
  unsigned threads_per_block; /* every block of the calling grid must have exactly this many */
  size_t smem_bytes;          /* dynamic shared memory each block lends the call (16-byte aligned) */
  unsigned useful_blocks;     /* blocks beyond this only wait at the barriers */
  size_t input_bytes;         /* input 0 (INT32, the predecoder's events) */
  size_t output_bytes;        /* every output, concatenated in output order */
} cudaq_nn_device_program_info_t;

/* Builds (once; later calls return the same program) the device program of
 * an engine created with precision FP16 and conv_impl CUDAQ_NN_CONV_STACK,
 * with its convolutions planned anew to use at most smem_limit bytes of
 * shared memory per block (0: 160 KiB), so that the calling kernel's own
 * shared memory fits beside them. The model must have one INT32 input, its
 * convolutions must form one stack (a chain of 3x3x3 / 1x1x1 "same"
 * layers), and every other step must be a copy, a conversion or the fused
 * predecoder tail. The program shares the engine's buffers, and a kernel
 * serving it holds most of the SMs' shared memory: never launch the
 * engine's graph while such a kernel runs (the graph's stack kernel would
 * wait for it). Returns
 * CUDAQ_NN_OK; CUDAQ_NN_ERR_INVALID_ARG (NULL); CUDAQ_NN_ERR_UNSUPPORTED with
 * err naming what does not fit; CUDAQ_NN_ERR_CUDA; CUDAQ_NN_ERR_NO_MEMORY. */
cudaq_nn_status_t cudaq_nn_gpu_device_program(cudaq_nn_gpu_t *gpu, size_t smem_limit,
                                              cudaq_nn_device_program_info_t *out, cudaq_nn_error_t *err);

#ifdef __cplusplus
}
#endif

/* ---- device side (CUDA code) --------------------------------------------- */
#if defined(__CUDACC__)
/* Programmatic dependent launch (PDL, compute capability 9.0) for a caller's
 * kernels around cudaq_nn_gpu_enqueue, and the engine's own (one home):
 * - cudaq_nn_pdl_launch_dependents: the kernel launched after this one with
 *   PDL may be scheduled once every block of this one has called it (or
 *   exited);
 * - cudaq_nn_pdl_wait: returns once the kernel before this one (launched
 *   with PDL) has completed and its stores are visible; call it before
 *   reading anything that kernel wrote.
 * Both are no-ops below sm_90 and in a kernel launched without PDL. */
static __device__ __forceinline__ void cudaq_nn_pdl_launch_dependents(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void cudaq_nn_pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
#endif /* __CUDACC__ */

#endif /* CUDAQ_NN_GPU_ENGINE_H */
