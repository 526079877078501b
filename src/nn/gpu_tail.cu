/* The predecoder tail kernel (issue 12): a threshold chain read through the
 * index maps of one or two matrix products, with their parity epilogues, as
 * one small kernel (the operation: nnk_tail in gpu_kernels.cuh; where it
 * applies: nng_plan_tails in gpu_fuse.cu).
 *
 * Why its own kernel: the generic steps it replaces (the chain's kernel and
 * the paired products with interpreted epilogues, gpu_kernels.cu) ran
 * ~14 us at d = 13 on the H100 for a few thousand additions, most of it the
 * generic interpreter's code being fetched. Here every operation is compiled
 * in: a thread's work is a handful of loads, adds and one store.
 *
 * Exactness: the planner admits only integer-valued operands whose sums stay
 * below 2^24, so every partial sum is an exact float and the lanes may add in
 * any order; the result is then rounded to the products' element type and
 * cast as the generic steps do, which makes the outputs bit-identical. */
#include "gpu_tail.cuh"

namespace {

template <typename T>
__global__ void __launch_bounds__(NNK_TAIL_BLOCK) k_tail(nnk_tail q) {
  nnk_pdl_launch_dependents();
  /* Each product by name (a dynamic index into the parameters would copy
   * them to local memory). */
  if (q.n > 1 && blockIdx.x >= q.p[0].blocks) tail_part<T>(q, q.p[1], blockIdx.x - q.p[0].blocks, q.p[1].blocks);
  else tail_part<T>(q, q.p[0], blockIdx.x, q.p[0].blocks);
}

}  // namespace

cudaError_t nnk_launch_tail(const nnk_tail &q, int half, cudaStream_t s) {
  const unsigned blocks = q.p[0].blocks + (q.n > 1 ? q.p[1].blocks : 0);
  const dim3 grid(blocks), block(NNK_TAIL_BLOCK);
  return half ? nnk_launch_ex(k_tail<__half>, grid, block, 0, s, 1, q) : nnk_launch_ex(k_tail<float>, grid, block, 0, s, 1, q);
}
