/*
 * qrt_nvtx.h - NVTX ranges for qec-realtime's threads, so that an Nsight
 * Systems timeline shows each request's send (FPGA thread), CPU stage
 * (predecoder and/or MWPM) and completion (consumer) beside the GPU work.
 * NVTX 3 is header-only; without an attached tool a range is a call
 * through a no-op function pointer (no allocation, no system call). Builds
 * without CUDA compile the ranges away.
 */
#ifndef QRT_NVTX_H
#define QRT_NVTX_H

#ifdef QRT_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#define QRT_RANGE_PUSH(name) nvtxRangePushA(name)
#define QRT_RANGE_POP() nvtxRangePop()
#else
#define QRT_RANGE_PUSH(name) ((void)0)
#define QRT_RANGE_POP() ((void)0)
#endif

#endif
