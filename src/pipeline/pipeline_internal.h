/* pipeline_internal.h - test hooks of the pipeline (not exported). */
#ifndef CUDAQ_SRC_PIPELINE_INTERNAL_H
#define CUDAQ_SRC_PIPELINE_INTERNAL_H

#include "pool.h"

/* Replaces the launch ops (before start): tests use it to drive the
 * dispatcher with an emulated GPU stage. Returns CUDAQ_OK or
 * CUDAQ_ERR_INVALID_ARG (NULL, incomplete ops, or a started pipeline). */
cudaq_status_t cudaq__pipeline_set_launch_ops(cudaq_pipeline_t *p, const cudaq__launch_ops_t *ops);

/* Host view of worker w's ready flag (tests and the GPU emulation). */
_Atomic int *cudaq__pipeline_ready_flag(cudaq_pipeline_t *p, int w);

#endif
