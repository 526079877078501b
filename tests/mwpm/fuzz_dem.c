/* libFuzzer target (CUDAQ_BUILD_FUZZERS=ON, clang): DEM text in, parse, and
 * when it parses and is small, build the graph and decode a few shots whose
 * events come from the input bytes. Nothing may crash, leak or hang. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cudaq/qec/dem.h"
#include "cudaq/qec/mwpm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cudaq_dem_t *dem = NULL;
  cudaq_mwpm_error_t err;
  if (cudaq_dem_parse((const char *)data, size, &dem, &err) != CUDAQ_MWPM_OK)
    return 0;
  cudaq_mwpm_graph_t *g = NULL;
  if (dem->num_detectors <= 4096 && cudaq_mwpm_graph_from_dem(dem, NULL, &g, NULL) == CUDAQ_MWPM_OK) {
    cudaq_mwpm_decoder_t *d = NULL;
    uint32_t n = cudaq_mwpm_graph_num_nodes(g);
    if (n && cudaq_mwpm_decoder_create(g, &d) == CUDAQ_MWPM_OK) {
      uint32_t ev[64];
      for (size_t shot = 0; shot < 4; shot++) {
        size_t k = 0;
        for (size_t i = shot; i < size && k < 64; i += 5)
          ev[k++] = (uint32_t)(data[i] * 31u + i) % n;
        cudaq_mwpm_result_t r;
        cudaq_mwpm_decode(d, ev, k, &r);
        size_t ne;
        cudaq_mwpm_decoder_edges(d, NULL, 0, &ne);
      }
      cudaq_mwpm_decoder_destroy(d);
    }
    cudaq_mwpm_graph_destroy(g);
  }
  cudaq_dem_destroy(dem);
  return 0;
}
