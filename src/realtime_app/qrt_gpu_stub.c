/* qec-realtime's GPU stage in a build without CUDA (or without the NN
 * engine): the GPU modes are refused at start with a sentence. */
#include <stdio.h>

#include "qrt_gpu.h"

int qrt_gpu_stage_create(const qrt_gpu_config_t *cfg, qrt_gpu_stage_t **out, char *msg,
                         size_t msg_len) {
  (void)cfg;
  *out = NULL;
  snprintf(msg, msg_len, "this build has no CUDA (the GPU modes need it; --mode cpu runs without)");
  return 1;
}

int qrt_gpu_factory(void *user, int worker_id, cudaq_gpu_worker_resources_t *r) {
  (void)user;
  (void)worker_id;
  (void)r;
  return 1;
}

size_t qrt_gpu_stage_device_bytes(const qrt_gpu_stage_t *st) {
  (void)st;
  return 0;
}

const char *qrt_gpu_stage_device_name(const qrt_gpu_stage_t *st) {
  (void)st;
  return "";
}

const char *qrt_gpu_stage_describe(const qrt_gpu_stage_t *st) {
  (void)st;
  return "";
}

void qrt_gpu_stage_destroy(qrt_gpu_stage_t *st) { (void)st; }
