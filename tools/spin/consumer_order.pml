/*
 * consumer_order.pml - the completion order of the pipeline's consumer
 * (consumer_main in src/pipeline/pipeline.c; host-dispatcher-worker-pool.md
 * section 7, W 9 of the tests): with a producer that fills the ring in order
 * and one worker, requests are answered (and their slots freed) in request
 * order. The consumer is modelled step for step: each pass starts after the
 * last slot answered; a slot passed unfinished (TX 0 or IN_FLIGHT) followed
 * by a finished one sends the pass back once to look at it again. Each TX
 * load is its own step, so the other threads may run between any two of
 * them (a consumer thread preempted mid-pass).
 *   - harvest asserts that the request answered is the next in order and
 *     that a request is in the slot (lost and doubly-harvested requests are
 *     pipeline.pml's check: this consumer polls, so it never blocks).
 * Each memory access is one atomic step (sequential consistency), except the
 * producer's and the dispatcher's guards, which read two flags in one step
 * (harmless: each condition stays true once seen until that thread acts);
 * the C11 acquire/release pairs of the implementation (A2/R2, A3/R5, A1/R1,
 * A6/R6, A8/R8) are what makes that model hold on the hardware. Not
 * modelled: drops, errors the dispatcher answers (PAYLOAD_TOO_LARGE) and
 * deferred completions, which free a slot or the worker out of turn and so
 * are not ordered (the guarantee is for the worker's answers).
 * The dispatcher's idle-time scan_rx jump is left out: with one in-order
 * producer it finds the slot the dispatcher waits at (cudaq__scan_rx_flags
 * looks twice), so dispatch stays in ring order.
 *
 * MUTATIONS: 1 2
 *   1  the consumer before ec6908f: only IN_FLIGHT sends the pass back, so
 *      a request whose slot read 0 (not yet submitted or dispatched) and
 *      that was then dispatched and answered together with the next one is
 *      answered after it (the rare test_completion_ring_order failure under
 *      ASan)
 *   2  every pass starts at slot 0 (no `next`): a finished slot 0 holding a
 *      newer request is answered before an older one further on
 */
#ifndef MUT
#define MUT 0
#endif
#define NSLOTS 3
#define NREQ 5
#define NONE 255

#define EMPTY 0
#define INFL 1  /* 0xEEEE... */
#define RESP 2  /* the response */

byte rx[NSLOTS];          /* 0 or 1 (request written) */
byte tx[NSLOTS];
short slot_req[NSLOTS];   /* request id in the slot, -1 none */
bool idle = 1;            /* the one worker's idle bit */
byte tag;                 /* its origin slot */
byte ready;               /* 0 idle, 1 ready, 2 processing */
byte nharvested;

proctype producer() {
  byte rid = 0, s;
  do
  :: rid < NREQ ->
     s = rid % NSLOTS;
     (rx[s] == 0 && tx[s] == 0);   /* A3: reuse only when both flags are 0 (spec 9) */
     slot_req[s] = rid;
     rx[s] = 1;                    /* R1 */
     rid++
  :: else -> break
  od
}

/* In ring order; spins on a slot while the worker is busy (spec 13). */
proctype dispatcher() {
  byte cur = 0;
end_wait:
  do
  :: rx[cur] != 0 && idle ->
     idle = 0;
     tag = cur;
     tx[cur] = INFL;               /* R7 */
     ready = 1;                    /* R8 */
     rx[cur] = 0;                  /* R3 */
     cur = (cur + 1) % NSLOTS
  od
}

/* The CPU worker: claim (A8), answer the origin slot (R2), release_job and
 * the idle bit (R11, R6). */
proctype worker() {
end_wait:
  do
  :: atomic { ready == 1 -> ready = 2 }
     tx[tag] = RESP;               /* R2 */
     ready = 0;                    /* R11 */
     idle = 1                      /* R6 */
  od
}

inline harvest(s) {
  r = slot_req[s];
  assert(r >= 0);                  /* a request is in the slot */
  assert(r == nharvested);         /* answered in request order */
  nharvested++;
  slot_req[s] = -1;                /* spec 7.2 */
  tx[s] = 0                        /* R5 */
}

proctype consumer() {
  short r;
  byte next = 0, start, k, s, back, looked, v;
  do
  :: nharvested == NREQ -> break
  :: else ->
#if MUT == 2
     start = 0;
#else
     start = next;
#endif
     back = NONE;
     looked = 0;
     k = 0;
     do
     :: k < NSLOTS ->
        s = (start + k) % NSLOTS;
        v = tx[s];                 /* A2: one load, one step */
        if
        :: v == EMPTY || v == INFL ->
           if
#if MUT == 1
           :: v == INFL && back == NONE && k >= looked -> back = k
#else
           :: back == NONE && k >= looked -> back = k
#endif
           :: else -> skip
           fi;
           k++
        :: else ->
           if
           :: back != NONE ->      /* look back once */
              looked = k;
              k = back;
              back = NONE
           :: else ->
              harvest(s);
              next = (s + 1) % NSLOTS;
              k++
           fi
        fi
     :: else -> break
     od
  od
}

init {
  byte i;
  atomic {
    i = 0;
    do
    :: i < NSLOTS -> slot_req[i] = -1; i++
    :: else -> break
    od;
    run producer(); run dispatcher(); run worker(); run consumer()
  }
}
