/*
 * gate.h - the gate of a pre-launched worker graph (pipeline gpu_prelaunch):
 * shared by the C pool (pool.h) and the CUDA side (gate.cu). No atomics
 * here, so that C++ (nvcc) can include it.
 */
#ifndef CUDAQ_SRC_PIPELINE_GATE_H
#define CUDAQ_SRC_PIPELINE_GATE_H

#include <stdint.h>

#include "cudaq/realtime/pipeline.h" /* cudaq_pipeline_gate_t */

/* The gate word, 64 bits in mapped memory (cudaq_pipeline_gate_word: ticket,
 * request size, slot): the dispatcher stores it once per request (R14 in
 * pool.c); a release without a request (stop) names slot
 * CUDAQ_PIPELINE_GATE_NO_SLOT, and the waiting graph then reads an empty
 * request (a zeroed header: magic 0, arg_len 0). The gate graph is
 * "gate kernel -> the worker's own graph", or the worker's graph alone when
 * its first kernel waits at the gate itself (waits_at_gate). Whichever
 * waits runs cudaq_pipeline_gate_wait (pipeline.h): until the word's ticket
 * reaches its own (cyclic >=; the device ticket counts the graph's runs),
 * then it copies the request of ring slot `slot` (header + arg_len bytes,
 * at most staging_bytes) into the device staging copy, which the device
 * mailbox names: the worker's graph reads its request from device memory.
 * In GPU-only mode a last node stores the completion word (instead of a
 * cuStreamWriteValue32 after the graph, which would wake as late as a copy
 * behind a gate). */

#endif
