// test_header_cxx.cpp - the public headers compile as C++17 and the pure
// wire helpers are constexpr there (function ids at compile time).
#include "cudaq/realtime/cudaq_realtime.h"
#include "cudaq/realtime/rpc_wire_format.h"
#include "cudaq/realtime/pipeline.h"

#include <cstdio>
#include <type_traits>

constexpr uint32_t kMockDecode = cudaq_fnv1a_hash("mock_decode");
static_assert(cudaq_fnv1a_hash("") == 0x811c9dc5u, "FNV-1a offset basis");
static_assert(cudaq_fnv1a_hash("a") == 0xe40c292cu, "FNV-1a of 'a'");
static_assert(cudaq_bitpacked_size(10) == 2, "10 bits in 2 bytes");
static_assert(sizeof(cudaq_rpc_header_t) == 24 && std::is_trivially_copyable<cudaq_rpc_header_t>::value,
              "header is a 24-byte POD");
static_assert(sizeof(cudaq_function_entry_t) >= sizeof(cudaq_handler_schema_t) + 8, "entry holds a schema");

static int echo(const void *, void *, uint32_t, uint32_t, uint32_t *len) { *len = 0; return 0; }

int main() {
  cudaq_function_entry_t e{};
  e.handler.host_fn = &echo;
  e.function_id = kMockDecode;
  e.dispatch_mode = CUDAQ_DISPATCH_HOST_CALL;
  cudaq_dispatcher_config_t c{};
  if (cudaq_dispatcher_config_init(&c) != CUDAQ_OK || c.threads_per_block != 32) return 1;
  if (e.handler.host_fn != &echo) return 1;
  std::printf("C++17 header check: mock_decode id 0x%08x\n", e.function_id);
  return 0;
}
