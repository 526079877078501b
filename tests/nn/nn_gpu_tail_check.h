/* The shipped predecoders on the GPU engine with the tail kernel
 * (nn_gpu_tail_check.c), run by test_nn_gpu --shipped-tail. */
#ifndef CUDAQ_NN_GPU_TAIL_CHECK_H
#define CUDAQ_NN_GPU_TAIL_CHECK_H

/* Checks models[0 .. n_models) under dir; returns 0 when all pass, else 1. */
int nn_gpu_tail_check(const char *dir, int n_models, char **models);

#endif
