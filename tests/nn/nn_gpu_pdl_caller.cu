/* A caller's graph around cudaq_nn_gpu_enqueue, as the realtime app builds
 * it (src/realtime_app/qrt_gpu.cu): a kernel that writes the engine's input,
 * the engine's kernels, a kernel launched with PDL that reads an output,
 * captured from one stream (test_nn_gpu's check_graph_replay, mode 2).
 *
 * The kernel before lets its dependents launch at once and then waits ~20
 * us before it copies the input in, so an engine kernel that read its input
 * before griddepcontrol.wait would see the previous round's values; the
 * kernel after reads the output only after its own wait. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "cudaq/nn/gpu_engine.h"

namespace {

__global__ void k_copy_in_late(const unsigned char *src, unsigned char *dst, size_t n) {
  cudaq_nn_pdl_launch_dependents();
  if (threadIdx.x == 0) {
    unsigned long long t0 = 0, t = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < 20000); /* 20 us */
  }
  __syncthreads();
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

__global__ void k_copy_out(const unsigned char *src, unsigned char *dst, size_t n) {
  cudaq_nn_pdl_wait();
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

extern "C" int nn_test_capture_between(cudaq_nn_gpu_t *g, void *stream, const void *stage, size_t in_bytes,
                                       void *copy, size_t out_bytes, void **exec, char *msg, size_t msg_len) {
  cudaStream_t s = (cudaStream_t)stream;
  *exec = NULL;
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    snprintf(msg, msg_len, "cudaStreamBeginCapture");
    return 1;
  }
  k_copy_in_late<<<1, 256, 0, s>>>((const unsigned char *)stage, (unsigned char *)cudaq_nn_gpu_input(g, 0), in_bytes);
  cudaq_nn_error_t err;
  err.message[0] = '\0';
  const cudaq_nn_status_t st = cudaq_nn_gpu_enqueue(g, s, &err);
  cudaLaunchAttribute pdl;
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(256);
  cfg.stream = s;
  cfg.attrs = &pdl;
  cfg.numAttrs = 1;
  const cudaError_t le = cudaLaunchKernelEx(&cfg, k_copy_out, (const unsigned char *)cudaq_nn_gpu_output(g, 0),
                                            (unsigned char *)copy, out_bytes);
  cudaGraph_t graph = NULL;
  const cudaError_t ce = cudaStreamEndCapture(s, &graph);
  cudaGraphExec_t x = NULL;
  const cudaError_t ie = st == CUDAQ_NN_OK && le == cudaSuccess && ce == cudaSuccess
                             ? cudaGraphInstantiate(&x, graph, 0)
                             : cudaErrorUnknown;
  if (graph) cudaGraphDestroy(graph);
  if (st != CUDAQ_NN_OK || le != cudaSuccess || ce != cudaSuccess || ie != cudaSuccess) {
    snprintf(msg, msg_len, "enqueue %s (%s); launch %s; capture %s; instantiate %s", cudaq_nn_status_str(st),
             err.message, cudaGetErrorString(le), cudaGetErrorString(ce), cudaGetErrorString(ie));
    return 1;
  }
  *exec = x;
  return 0;
}
