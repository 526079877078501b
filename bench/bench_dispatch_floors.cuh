/*
 * bench_dispatch_floors.cuh - the floor rows of bench_gpu_dispatch: a
 * persistent kernel and the host answering each other through mapped
 * memory with nothing else (pong), and what each piece of a dispatcher's
 * work adds (reads, release stores, the in-flight marker, several pollers,
 * the flag protocol in one warp, header completion in one warp). Included
 * by bench_gpu_dispatch.cu after its now_ns, report, CK and CQ.
 */
#ifndef BENCH_DISPATCH_FLOORS_CUH
#define BENCH_DISPATCH_FLOORS_CUH

/* ---- floor ----------------------------------------------------------------- */
/* The floor's kernel, plus what a dispatcher adds, one piece at a time:
 * Reads extra dependent reads of host memory after the flag (as a header
 * and then a payload read would be), Stores extra system-scope release
 * stores before the answer (as the in-flight marker and the RX clear are). */
/* Mark: a relaxed store to another host word (as the dispatchers' TX
 * in-flight marker), 1 after the reads, 2 before they are issued, 3 while
 * one read is in flight (issued, then the marker and the release stores,
 * then its value used: where the device-call kernels store them; Reads is
 * 1 then). Bare: volatile load and store, no release: the issue's bare
 * floor. */
template <bool Fence, int Reads = 0, int Stores = 0, int Mark = 0, bool Bare = false>
__global__ void pong(uint64_t *req, uint64_t *resp, uint64_t n) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> r(*req), s(*resp);
  volatile uint64_t *chain = req + 32; /* chain[0] == 0 (set by the host): each read's address depends on the last */
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> mark(req[128]);
  for (uint64_t i = 1; i <= n; i++) {
    for (;;) {
      if (Fence) __threadfence_system();
      if (Bare ? *(volatile uint64_t *)req == i : r.load(cuda::memory_order_acquire) == i) break;
    }
    if (Mark == 2) mark.store(i, cuda::memory_order_relaxed);
    uint64_t dep = 0;
    if (Mark == 3) {
      /* The read issued, then the marker and the release stores while it
       * is in flight; its value used after them. */
      const uint64_t v = chain[0];
      mark.store(i, cuda::memory_order_relaxed);
      for (int k = 0; k < Stores; ++k)
        cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(req[64 + 8 * k]).store(i, cuda::memory_order_release);
      dep = v;
    } else {
      for (int k = 0; k < Reads; ++k) dep = chain[dep + (uint64_t)k * 8];
      if (Mark == 1) mark.store(i, cuda::memory_order_relaxed);
      for (int k = 0; k < Stores; ++k)
        cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(req[64 + 8 * k]).store(i, cuda::memory_order_release);
    }
    if (Bare) *(volatile uint64_t *)resp = i + dep;
    else s.store(i + dep, cuda::memory_order_release);
  }
}

/* The end of a floor run: the kernel has answered its n requests and
 * exits; its stream and mapped page are freed and the row reported. */
static double floor_finish(cudaStream_t s, void *h, const char *name, std::vector<uint64_t> &lat) {
  CK(cudaStreamSynchronize(s));
  CK(cudaStreamDestroy(s));
  CK(cudaFreeHost(h));
  double p50;
  report(name, lat, &p50);
  return p50;
}

/* The floors' host side: a mapped page, the kernel launch(d, stream) started
 * on its device view, n round trips (the request word h[0] set to i, the
 * answer awaited in h[16]). Dirty: the host writes the lines the device
 * reads (chain[0..15]) right before the flag, as a producer writes a
 * request, instead of leaving them untouched since the start (clean in the
 * host's caches). */
template <typename Launch>
static double floor_rounds(uint64_t n, const char *name, bool dirty, Launch launch) {
  uint64_t *h, *d;
  CK(cudaHostAlloc(&h, 4096, cudaHostAllocMapped));
  memset(h, 0, 4096);
  CK(cudaHostGetDevicePointer(&d, h, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  launch(d, s);
  CK(cudaGetLastError());
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> req(h[0]), resp(h[16]);
  std::vector<uint64_t> lat(n);
  for (uint64_t i = 1; i <= n; i++) {
    uint64_t t0 = now_ns();
    if (dirty)
      for (int k = 0; k < 16; ++k) ((volatile uint64_t *)h)[32 + k] = 0; /* chain[]: same values, lines now dirty */
    req.store(i, cuda::memory_order_release);
    while (resp.load(cuda::memory_order_acquire) != i) {}
    lat[i - 1] = now_ns() - t0;
  }
  return floor_finish(s, h, name, lat);
}

template <bool Fence, int Reads = 0, int Stores = 0, int Mark = 0, bool Bare = false, bool Dirty = false>
static double run_floor(uint64_t n, const char *name) {
  return floor_rounds(n, name, Dirty, [n](uint64_t *d, cudaStream_t s) {
    pong<Fence, Reads, Stores, Mark, Bare><<<1, 1, 0, s>>>(d, d + 16, n);
  });
}

/* Several pollers: lane 0 of each of W warps polls the request word (fence
 * before each poll), each warp starting `stagger_ns` after the previous, so
 * up to W reads of the word are in flight at staggered times; the first warp
 * to see request i claims it in shared memory and answers. Shows whether
 * reads in flight together find a new value sooner than one poller. */
__device__ inline uint64_t floor_clock_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__global__ void pong_multi(uint64_t *req, uint64_t *resp, uint64_t n, uint32_t stagger_ns) {
  __shared__ unsigned long long claimed;
  if (threadIdx.x == 0) claimed = 0;
  __syncthreads();
  if ((threadIdx.x & 31u) != 0) return;
  const uint32_t w = threadIdx.x / 32u;
  const uint64_t t0 = floor_clock_ns();
  while (floor_clock_ns() - t0 < (uint64_t)w * stagger_ns) {
  }
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> r(*req), s(*resp);
  for (uint64_t i = 1; i <= n; i++) {
    for (;;) {
      if (*(volatile unsigned long long *)&claimed >= i) break; /* another warp answered i */
      __threadfence_system();
      if (r.load(cuda::memory_order_acquire) == i) {
        if (atomicCAS(&claimed, (unsigned long long)(i - 1), (unsigned long long)i) == i - 1)
          s.store(i, cuda::memory_order_release);
        break;
      }
    }
  }
}

static double run_floor_multi(uint64_t n, uint32_t warps, uint32_t stagger_ns, const char *name) {
  return floor_rounds(n, name, false, [=](uint64_t *d, cudaStream_t s) {
    pong_multi<<<1, 32 * warps, 0, s>>>(d, d + 16, n, stagger_ns);
  });
}

/* The device-call protocol with nothing else (one warp): lane 0 polls the
 * RX word (fence before each poll); the warp reads the request's 88 bytes
 * (header + 64-byte payload) that the host wrote before it; lane 0 stores
 * the in-flight marker and clears RX (release), after the read (Early 0) or
 * while it is in flight (Early 1); lanes 0-21 write the 88-byte response
 * (the request's words); lane 0 publishes the TX word (release). The host
 * checks the response's last word and clears TX. */
template <int Early>
__global__ void pong_proto(uint64_t *rx, uint64_t *tx, const uint32_t *req_data, uint32_t *resp_data, uint64_t n) {
  const uint32_t lane = threadIdx.x & 31u;
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> r(*rx), t(*tx);
  for (uint64_t i = 1; i <= n; i++) {
    uint32_t go = 0;
    while (!go) {
      if (lane == 0) {
        __threadfence_system();
        go = r.load(cuda::memory_order_acquire) != 0; /* pairs with the host's release of RX */
      }
      go = __shfl_sync(0xFFFFFFFFu, go, 0);
    }
    __syncwarp();
    const uint32_t v = lane < 22 ? req_data[lane] : 0u;
    if (Early && lane == 0) {
      t.store(CUDAQ_TX_FLAG_IN_FLIGHT, cuda::memory_order_relaxed);
      r.store(0, cuda::memory_order_release);
    }
    uint32_t w = __shfl_sync(0xFFFFFFFFu, v, 0); /* the "parse": lane 0's first word */
    if (!Early && lane == 0) {
      t.store(CUDAQ_TX_FLAG_IN_FLIGHT, cuda::memory_order_relaxed);
      r.store(0, cuda::memory_order_release);
    }
    if (lane < 22) resp_data[lane] = v + (w == 0xFFFFFFFFu);
    __syncwarp();
    if (lane == 0) t.store(i, cuda::memory_order_release); /* publishes the response; pairs with the host's acquire */
  }
}

/* The one-warp protocol floors' mapped page (host view h, device view d)
 * and stream: RX word at 0, TX word at 128, the request's line at 1024, the
 * response at 4096, each on lines of its own. */
static void floor_page(uint8_t **h, uint8_t **d, cudaStream_t *s) {
  CK(cudaHostAlloc((void **)h, 8192, cudaHostAllocMapped));
  memset(*h, 0, 8192);
  CK(cudaHostGetDevicePointer((void **)d, *h, 0));
  CK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
}

template <int Early>
static double run_floor_proto(uint64_t n, const char *name) {
  uint8_t *h, *d;
  cudaStream_t s;
  floor_page(&h, &d, &s);
  pong_proto<Early><<<1, 32, 0, s>>>((uint64_t *)d, (uint64_t *)(d + 128), (const uint32_t *)(d + 1024),
                                     (uint32_t *)(d + 4096), n);
  CK(cudaGetLastError());
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> rx(*(uint64_t *)h), tx(*(uint64_t *)(h + 128));
  volatile uint32_t *rq = (volatile uint32_t *)(h + 1024), *rs = (volatile uint32_t *)(h + 4096);
  std::vector<uint64_t> lat(n);
  for (uint64_t i = 1; i <= n; i++) {
    uint64_t t0 = now_ns();
    for (int k = 0; k < 22; ++k) rq[k] = (uint32_t)i + (uint32_t)k;
    rx.store(i, cuda::memory_order_release);
    while (tx.load(cuda::memory_order_acquire) != i) {}
    if (rs[21] != (uint32_t)i + 21u) {
      fprintf(stderr, "%s: response %llu holds %u\n", name, (unsigned long long)i, rs[21]);
      exit(1);
    }
    tx.store(0, cuda::memory_order_release);
    lat[i - 1] = now_ns() - t0;
  }
  return floor_finish(s, h, name, lat);
}

/* Header completion (CUDAQ_RX_COMPLETION_HEADER) alone, one
 * warp: the host writes the request's words 1-21 (word k = i + k) and then
 * word 0 (= i, the "magic", written last with a release), then RX. The
 * warp polls the request's 128-byte line (every lane one word, one load of
 * the warp) and the RX word together, fence before each poll; a line whose
 * word 0 is i is served without a dependent read. Its words are checked
 * against word 0 (a line seen half-written is counted: response word 22).
 * Clear: 0 = the magic word and RX cleared by relaxed stores before the
 * answer's release (one fence: the library's header completion, whose
 * producers tell a free slot by the magic word the consumer zeroes);
 * 1 = in-flight marker, magic clear, RX clear (release),
 * then the answer (release): two fences, the flag protocol's order. (The
 * marker and RX clear by a second warp while the first writes the answer
 * measured slower: 4.40 against 2.90 us, H200, 2026-11-29.) */
template <int Clear>
__global__ void pong_line(uint64_t *rx, uint64_t *tx, uint32_t *req_line, uint32_t *resp_data, uint64_t n) {
  const uint32_t lane = threadIdx.x & 31u;
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> r(*rx), t(*tx);
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> magic(req_line[0]);
  for (uint64_t i = 1; i <= n; i++) {
    uint32_t v = 0, rx_set = 0;
    for (;;) {
      __threadfence_system();
      v = ((volatile uint32_t *)req_line)[lane];
      const uint32_t f = lane == 0 && r.load(cuda::memory_order_acquire) != 0;
      rx_set = __shfl_sync(0xFFFFFFFFu, f, 0);
      if (__shfl_sync(0xFFFFFFFFu, v, 0) == (uint32_t)i) break;
    }
    const uint32_t v0 = __shfl_sync(0xFFFFFFFFu, v, 0);
    const uint32_t torn = __ballot_sync(0xFFFFFFFFu, lane < 22 && v != v0 + lane) != 0;
    if (Clear == 1 && lane == 0) {
      while (!rx_set && r.load(cuda::memory_order_acquire) == 0) {}
      t.store(CUDAQ_TX_FLAG_IN_FLIGHT, cuda::memory_order_relaxed);
      magic.store(0u, cuda::memory_order_relaxed);
      r.store(0, cuda::memory_order_release);
    }
    if (lane < 22) resp_data[lane] = v;
    if (lane == 22) resp_data[22] = torn;
    __syncwarp();
    if (lane == 0) {
      if (Clear == 0) {
        while (!rx_set && r.load(cuda::memory_order_acquire) == 0) {}
        magic.store(0u, cuda::memory_order_relaxed);
        r.store(0, cuda::memory_order_relaxed);
      }
      t.store(i, cuda::memory_order_release); /* publishes the response; pairs with the host's acquire */
    }
    __syncwarp();
  }
}

template <int Clear>
static double run_floor_line(uint64_t n, const char *name) {
  uint8_t *h, *d;
  cudaStream_t s;
  floor_page(&h, &d, &s);
  pong_line<Clear><<<1, 32, 0, s>>>((uint64_t *)d, (uint64_t *)(d + 128), (uint32_t *)(d + 1024),
                                    (uint32_t *)(d + 4096), n);
  CK(cudaGetLastError());
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> rx(*(uint64_t *)h), tx(*(uint64_t *)(h + 128));
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> magic(*(uint32_t *)(h + 1024));
  volatile uint32_t *rq = (volatile uint32_t *)(h + 1024), *rs = (volatile uint32_t *)(h + 4096);
  std::vector<uint64_t> lat(n);
  uint64_t torn = 0;
  for (uint64_t i = 1; i <= n; i++) {
    uint64_t t0 = now_ns();
    for (int k = 1; k < 22; ++k) rq[k] = (uint32_t)i + (uint32_t)k;
    magic.store((uint32_t)i, cuda::memory_order_release); /* the magic word, last */
    rx.store(i, cuda::memory_order_release);
    while (tx.load(cuda::memory_order_acquire) != i) {}
    torn += rs[22];
    if (rs[21] != (uint32_t)i + 21u && !rs[22]) {
      fprintf(stderr, "%s: response %llu holds %u\n", name, (unsigned long long)i, rs[21]);
      exit(1);
    }
    tx.store(0, cuda::memory_order_release);
    lat[i - 1] = now_ns() - t0;
  }
  double p50 = floor_finish(s, h, name, lat);
  printf("%-46s %llu of %llu lines seen half-written\n", "", (unsigned long long)torn, (unsigned long long)n);
  return p50;
}

#endif
