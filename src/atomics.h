/*
 * atomics.h - the one place host code touches shared memory words.
 *
 * Built on <stdatomic.h> (DESIGN.md: C11 atomics on the host, no volatile
 * for synchronization). The published API hands us `volatile uint64_t *`
 * flag arrays and a `volatile int *` shutdown flag; these helpers view such a
 * word as the corresponding _Atomic object. That is sound on every target we
 * build for because the lock-free _Atomic types have the size and alignment
 * of the plain types (checked below), so the atomic instructions operate on
 * exactly the caller's word.
 *
 * Every call site names its pairing: "Rn publishes X; pairs with An in Y".
 */
#ifndef CUDAQ_SRC_ATOMICS_H
#define CUDAQ_SRC_ATOMICS_H

#include <stdatomic.h>
#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

_Static_assert(sizeof(_Atomic uint64_t) == sizeof(uint64_t), "atomic u64 layout");
_Static_assert(_Alignof(_Atomic uint64_t) == _Alignof(uint64_t), "atomic u64 alignment");
_Static_assert(sizeof(_Atomic int) == sizeof(int), "atomic int layout");
_Static_assert(sizeof(_Atomic uint32_t) == sizeof(uint32_t), "atomic u32 layout");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "int atomics must be lock-free");

#define CUDAQ__A64(p) ((_Atomic uint64_t *)(uintptr_t)(p))
#define CUDAQ__AINT(p) ((_Atomic int *)(uintptr_t)(p))

static inline uint64_t cudaq__load_acquire_u64(const volatile uint64_t *p) {
  return atomic_load_explicit(CUDAQ__A64(p), memory_order_acquire);
}
static inline uint64_t cudaq__load_relaxed_u64(const volatile uint64_t *p) {
  return atomic_load_explicit(CUDAQ__A64(p), memory_order_relaxed);
}
static inline void cudaq__store_release_u64(volatile uint64_t *p, uint64_t v) {
  atomic_store_explicit(CUDAQ__A64(p), v, memory_order_release);
}
static inline void cudaq__store_relaxed_u64(volatile uint64_t *p, uint64_t v) {
  atomic_store_explicit(CUDAQ__A64(p), v, memory_order_relaxed);
}
static inline uint32_t cudaq__load_acquire_u32(const volatile uint32_t *p) {
  return atomic_load_explicit((_Atomic uint32_t *)(uintptr_t)(p), memory_order_acquire);
}
static inline void cudaq__store_release_u32(volatile uint32_t *p, uint32_t v) {
  atomic_store_explicit((_Atomic uint32_t *)(uintptr_t)(p), v, memory_order_release);
}
static inline int cudaq__load_acquire_int(const volatile int *p) {
  return atomic_load_explicit(CUDAQ__AINT(p), memory_order_acquire);
}
static inline void cudaq__store_release_int(volatile int *p, int v) {
  atomic_store_explicit(CUDAQ__AINT(p), v, memory_order_release);
}

/* Single-writer counter bump: one thread writes the counter (others only
 * read it, relaxed), so a relaxed load + store is enough and avoids a
 * locked read-modify-write. */
static inline void cudaq__bump_single_writer(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* Spin-wait hint: lets the sibling hyperthread run and saves power without
 * giving up the core (no syscall). */
static inline void cudaq__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#else
  atomic_signal_fence(memory_order_seq_cst);
#endif
}

#endif /* CUDAQ_SRC_ATOMICS_H */
