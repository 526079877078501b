/*
 * pipeline.pml - the slot lifecycle and the ready-flag state machine of the
 * host dispatcher with a dynamic worker pool (host-dispatcher-worker-pool.md
 * sections 2, 4.2, 6.1, 7, 9, 13), as implemented in src/pipeline/pool.c and
 * src/pipeline/pipeline.c (GPU + CPU mode). Checked by spin for lost and
 * doubly-harvested requests:
 *   - the consumer asserts that it harvests each request id at most once
 *     and never a slot without a request;
 *   - when nothing can move any more (timeout), every request must have been
 *     harvested exactly once (a lost request leaves the system stuck).
 * Each memory access is one atomic step (sequential consistency); the C11
 * acquire/release pairs of the implementation are what makes that model
 * hold on the hardware.
 *
 * Mutations (spin -DMUT=n), each a real ordering bug that spin must reject
 * (tools/spin/check.sh checks that it does):
 * MUTATIONS: 1 2 3
 *   1  the reference order: IN_FLIGHT stored after the launch, so a fast
 *      job's response is overwritten by the marker (lost request)
 *   2  consumer clears TX before resetting slot_request (spec 7.2 reversed)
 *   3  worker returns itself to idle_mask before ready = 0 (release_job
 *      after the idle bit): the next job's ready = 1 is clobbered
 */
#ifndef MUT
#define MUT 0
#endif
#define NSLOTS 2
#define NW 2
#define NREQ 4

#define EMPTY 0
#define INFL 1  /* 0xEEEE... */
#define RESP 2  /* response address */
#define ERR 3   /* 0xDEAD | err */

byte rx[NSLOTS];          /* 0 or 1 (request written) */
byte tx[NSLOTS];
short slot_req[NSLOTS];   /* request id in the slot, -1 none */
bool idle[NW];            /* idle_mask bits */
byte tag[NW];             /* inflight_slot_tags */
byte ready[NW];           /* 0 idle, 1 ready, 2 processing */
bool launched[NW];        /* the worker's graph runs */
byte harvested[NREQ];
byte nharvested;

proctype producer() {
  byte rid = 0, s;
  do
  :: rid < NREQ ->
     s = rid % NSLOTS;
     (rx[s] == 0 && tx[s] == 0);   /* reuse only when both flags are 0 (spec 9) */
     slot_req[s] = rid;
     rx[s] = 1;                    /* R1 */
     rid++
  :: else -> break
  od
}

proctype dispatcher() {
  byte cur = 0, w;
  bool fail;
end_wait:
  do
  :: rx[cur] != 0 ->
     /* bit-scan allocation of an idle worker; blocks (spins) while none is
      * free, without advancing (spec 13) */
     atomic {
       if
       :: idle[0] -> w = 0
       :: idle[1] -> w = 1
       fi;
       idle[w] = 0
     }
     tag[w] = cur;
#if MUT != 1
     tx[cur] = INFL;               /* R7: before the launch */
#endif
     if
     :: fail = false
     :: fail = true                /* cudaGraphLaunch may fail */
     fi;
     if
     :: !fail ->
        launched[w] = 1;
#if MUT == 1
        tx[cur] = INFL             /* the reference order: after the launch */
#endif
     :: fail ->
        tx[cur] = ERR;             /* R9, then the worker goes back */
        idle[w] = 1
     fi;
     rx[cur] = 0;                  /* R3 */
     cur = (cur + 1) % NSLOTS
  od
}

/* The GPU: the graph's last kernel stores 1 into the ready flag. */
proctype gpu(byte w) {
end_wait:
  do
  :: launched[w] -> launched[w] = 0; ready[w] = 1
  od
}

/* The CPU worker: claims by CAS(1 -> 2), answers the origin slot, then
 * release_job (ready = 0) and the idle bit (spec 6.3). */
proctype worker(byte w) {
  byte s;
end_wait:
  do
  :: atomic { ready[w] == 1 -> ready[w] = 2 }   /* A8: CAS, CPU only */
     s = tag[w];
     tx[s] = RESP;                               /* R2 */
#if MUT == 3
     idle[w] = 1;
     ready[w] = 0
#else
     ready[w] = 0;                               /* R11 */
     idle[w] = 1                                 /* R6 */
#endif
  od
}

/* Out-of-order consumer: harvests any slot with a response or an error
 * marker, ignoring IN_FLIGHT (spec 7, 9). */
inline harvest(s) {
  r = slot_req[s];
  assert(r >= 0);                  /* a request is in the slot */
  assert(harvested[r] == 0);       /* not harvested before */
  harvested[r]++;
  nharvested++;
#if MUT == 2
  tx[s] = 0;                       /* spec 7.2 reversed */
  slot_req[s] = -1
#else
  slot_req[s] = -1;                /* spec 7.2 */
  tx[s] = 0                        /* R5 */
#endif
}

proctype consumer() {
  short r;
end_wait:
  do
  :: tx[0] == RESP || tx[0] == ERR -> harvest(0)
  :: tx[1] == RESP || tx[1] == ERR -> harvest(1)
  :: nharvested == NREQ -> break
  od
}

/* Nothing can move: every request must have been harvested exactly once. */
proctype lost_check() {
  timeout -> assert(nharvested == NREQ)
}

init {
  byte i;
  atomic {
    i = 0;
    do
    :: i < NSLOTS -> slot_req[i] = -1; i++
    :: else -> break
    od;
    i = 0;
    do
    :: i < NW -> idle[i] = 1; run gpu(i); run worker(i); i++
    :: else -> break
    od;
    run producer(); run dispatcher(); run consumer(); run lost_check()
  }
}
