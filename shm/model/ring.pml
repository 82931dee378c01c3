/*
 * Promela model of the shared-memory ring ("claim is commit", docs/design.md §4).
 * Checked exhaustively by spin (tests/model/check_model.sh); shm/model/README.md maps
 * each step to the C++ and explains why sequentially consistent interleavings are sound
 * for the acquire/release orderings the C++ uses.
 *
 * Granularity: each `atomic { ... }` below is ONE step and contains exactly one access to
 * shared memory (one atomic load, store, fetch_add or CAS of the C++, or one futex
 * operation), merged only with local computation, control flow and ghost bookkeeping that
 * no other process can observe. A goto out of an atomic block ends it, so a jump from one
 * step to the next is an interleaving point (a kill point, too).
 *
 * Configuration (spin -D...):
 *   N            ring capacity (1 or 2: tiny rings make the producer lap constantly)
 *   MAXID        IDs the producer publishes in total; ticket t carries ID t + 1
 *   NCONS        consumers (2 or 3): 0 takes single IDs and may be killed at any step,
 *                1 takes batches of k = 2, 2 (if present) takes single IDs
 *   TAKES        takes each consumer performs
 *   ROUNDS       AwaitPublish calls before a take's deadline passes (it returns
 *                "timed out" after the next empty re-check)
 *   WEAK_CAS     compare_exchange_weak may fail spuriously (safety runs only: a CAS that
 *                fails spuriously forever is not a fair execution)
 *   NO_TIMEOUT   consumers' futex waits have no timeout, so a lost wake-up leaves a
 *                consumer asleep for ever; the watchdog asserts that none sleeps while IDs
 *                are in the ring
 *   LIVENESS     adds the LTL termination property `terminates` (pan -a -f)
 *   HINT         models the refill request and its size hint: a batch taker adds its
 *                need to `hint` and bumps `refill` before it sleeps; the producer runs
 *                passes (load `refill`, take `hint`, drain, publish at least the hint's
 *                share of the room) and sleeps on `refill` between them (woken by a
 *                request, or by its ~1 ms timeout unless NO_TIMEOUT). Under NO_TIMEOUT
 *                the watchdog also asserts that the producer never sleeps while a live
 *                taker's hint is unread, nor while a live taker sleeps on an empty ring
 *                that it could still fill (a lost refill request)
 * Deliberately broken variants, each of which spin must refute:
 *   BROKEN_LAP             the producer does not wait for head: it overwrites the slots
 *                          of unclaimed tickets (violates property 1)
 *   BROKEN_READ_AFTER_CAS  the consumer claims first and reads the slot afterwards
 *                          (violates property 1)
 *   BROKEN_SEQ_LATE        the consumer reads wake_seq after its empty re-check (a lost
 *                          wake-up; the watchdog fails under NO_TIMEOUT)
 *   BROKEN_GATE            the producer waits until no consumer is in the slow path, so
 *                          a consumer killed there stalls it (violates property 2)
 *   BROKEN_HINT_LATE       (HINT) the taker adds its hint after its refill request: the
 *                          pass the request wakes may miss it, and the producer sleeps
 *                          with the hint unread (the watchdog fails under NO_TIMEOUT)
 *   BROKEN_SEEN_LATE       (HINT) the producer loads `refill` for its wait after taking
 *                          the hint: a request in between is neither read nor waited out
 *   BROKEN_NO_REFILL_WAKE  (HINT) the taker bumps `refill` but never wakes the producer:
 *                          a producer already asleep sleeps through the request
 */

#ifndef N
#define N 2
#endif
#ifndef MAXID
#define MAXID 4
#endif
#ifndef NCONS
#define NCONS 2
#endif
#ifndef TAKES
#define TAKES 2
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif
#ifndef HMAX
#define HMAX 4      /* the hint saturates here (UINT32_MAX in the C++) */
#endif

/* --- Shared memory (SegmentHeader, ConsumerRegion, slots). --- */
byte head = 0;      /* next ticket to take: consumers' CAS and the producer's drain CAS */
byte tail = 0;      /* one past the last published ticket: written only by the producer */
byte slot[N];       /* slot[t % N] holds ticket t's ID; 0 = never written */
byte wake_seq = 0;  /* futex word consumers sleep on; bumped by every publish */
byte waiters = 0;   /* consumers in AwaitPublish (a killed one stays counted) */

#ifdef HINT
byte refill = 0;    /* refill_request: consumers bump it; the producer sleeps on it */
byte hint = 0;      /* refill_hint: consumers add their need; the producer takes it */
#endif

/* --- Kernel futex queue: consumer i sleeps on wake_seq. --- */
bit asleep[NCONS];
#ifdef HINT
bit p_asleep = 0;   /* the producer sleeps on refill */
bit pending[NCONS]; /* ghost: consumer i's hint is in `hint`, not yet taken by a pass */
#endif

/* --- Ghost state for the properties (nothing of it exists in the C++). --- */
bit taken[MAXID + 1];       /* ID returned to some caller */
byte last_done = 0;         /* largest ID returned by a completed take */
bit killed[NCONS];
bool producer_done = false;
byte finished = 0;          /* consumers that completed all their takes or were killed */

#ifdef HINT
#define SENT_RESET sent = 0; quiet = 0;
#else
#define SENT_RESET
#endif

/* First statement of every consumer step: the process may be killed instead. It simply
   stops: whatever it had loaded is lost, whatever it had written (head, waiters) stays. */
#define KILL \
  asleep[me] = 0; killed[me] = 1; finished++; \
  k = 0; h = 0; t = 0; n = 0; v0 = 0; v1 = 0; seq = 0; before = 0; r = 0; takes = 0; \
  won = false; slow = false; SENT_RESET \
  goto stop
#define DIE \
  if \
  :: mortal -> KILL \
  :: true -> skip \
  fi

#ifdef WEAK_CAS
#define SPURIOUS :: head == h -> won = false  /* spurious failure: h keeps its value */
#else
#define SPURIOUS
#endif

/* The properties checked when a take's CAS wins (v0, v1 are the values it read for its
   tickets h, h + 1). Checking at the CAS rather than at the return is stronger for
   property 3: a take that begins between another's CAS and its return must get a larger
   ID too. */
#define CHECK_AND_RECORD \
  assert(v0 == h + 1);                     /* 1: the ID the producer wrote for ticket h */ \
  assert(n < 2 || v1 == h + 2);            /*    ... and for ticket h + 1 */ \
  assert(!taken[v0]);                      /* 1: never handed out twice */ \
  taken[v0] = 1; \
  if \
  :: n == 2 -> assert(!taken[v1]); taken[v1] = 1; last_done = (v1 > last_done -> v1 : last_done) \
  :: else -> last_done = (v0 > last_done -> v0 : last_done) \
  fi; \
  assert(v0 > before)                      /* 3: larger than any take completed before */

proctype consumer(byte me; byte kind; bit mortal) {
  byte k, h, t, n, v0, v1, seq, before, r, takes;
  bool won, slow;
#ifdef HINT
  bit sent;   /* this take has added its hint (Client::Slow's `hinted`) */
  bit quiet;  /* this round requests without adding: sent, and the word read non-zero */
#endif

next_take:
  /* TryTake/TryTakeBatch: head.load(relaxed). The take begins: snapshot for property 3. */
  atomic {
    DIE;
    if
    :: takes == TAKES -> goto finish
    :: else -> skip
    fi;
    if
    :: kind == 0 -> if :: k = 1 :: k = 2 fi  /* this take: TryTake or TryTakeBatch(2) */
    :: else -> k = kind
    fi;
    before = last_done;
    h = head
  }
load_tail:
  /* tail.load(acquire) */
  atomic {
    DIE;
    t = tail;
    if
    :: h >= t -> t = 0; goto ring_empty
    :: else -> n = (t - h > k -> k : t - h); t = 0
    fi;
#ifdef BROKEN_READ_AFTER_CAS
    goto cas
#endif
  }
  /* slots_[h & mask_].load(relaxed) */
  atomic {
    DIE;
    v0 = slot[h % N];
    if
    :: n == 2 -> goto read1
    :: else -> goto cas
    fi
  }
read1:
  atomic { DIE; v1 = slot[(h + 1) % N] }
cas:
  /* head.compare_exchange_weak(h, h + n, acq_rel, relaxed); a failure stores the current
     head into h and the loop goes on without reloading head. */
  atomic {
    DIE;
    if
    :: head == h -> head = h + n; won = true
    SPURIOUS
    :: else -> h = head; won = false
    fi;
    if
    :: !won -> n = 0; v0 = 0; v1 = 0; goto load_tail
    :: else -> skip
    fi;
#ifndef BROKEN_READ_AFTER_CAS
    CHECK_AND_RECORD;
    k = 0; h = 0; n = 0; v0 = 0; v1 = 0; won = false; slow = false; r = 0; before = 0;
    SENT_RESET
    takes++;
    goto next_take
#endif
  }
#ifdef BROKEN_READ_AFTER_CAS
  atomic { DIE; v0 = slot[h % N]; if :: n == 2 -> goto late1 :: else -> goto late_done fi }
late1:
  atomic { DIE; v1 = slot[(h + 1) % N] }
late_done:
  atomic {
    CHECK_AND_RECORD;
    k = 0; h = 0; n = 0; v0 = 0; v1 = 0; won = false; slow = false; r = 0; before = 0;
    SENT_RESET
    takes++;
    goto next_take
  }
#endif

ring_empty:
  /* The ring was empty. After the fast path's TryTake: enter the client's slow loop
     (Client::Slow), whose round is: wake_seq() load BEFORE the re-check, TryTake, then
     (the producer being healthy) the deadline check and AwaitPublish. After a slow-loop
     TryTake: give up at the deadline ("timed out"), else AwaitPublish: waiters.fetch_add. */
  atomic {
    DIE;
    h = 0;
    if
    :: !slow ->
       slow = true;
#ifndef BROKEN_SEQ_LATE
       seq = wake_seq;
#endif
       goto again
    :: slow && r == ROUNDS -> seq = 0; slow = false; k = 0; r = 0; before = 0; SENT_RESET takes++;
       goto next_take
    :: slow && r < ROUNDS ->
#ifdef HINT
       /* Client::Slow reads the word (relaxed) before AwaitPublish: a pass may take it
          before the request below, which then goes without a hint (the next round
          adds it again). */
       quiet = (sent && hint != 0);
#endif
       waiters++
    fi
  }
  /* AwaitPublish: head.load(seq_cst) ... */
  atomic { DIE; h = head }
  /* ... >= tail.load(seq_cst): still empty? */
  atomic {
    DIE;
    if
    :: h < tail -> h = 0; goto await_done
    :: else -> h = 0
    fi
  }
#ifdef BROKEN_SEQ_LATE
  atomic { DIE; seq = wake_seq }
#endif
#ifdef HINT
#ifndef BROKEN_HINT_LATE
  /* AddRefillHint(want) (a batch: want > 1): the CAS loop's winning CAS; a losing one
     changes nothing. Saturates at HMAX. Client::Slow adds it with the take's first
     request and, on a later round, only if the word read 0 (a pass took it): a round
     that found a hint in the word requests without adding (`quiet`). */
  atomic {
    DIE;
    if
    :: k > 1 && !quiet ->
       hint = (hint + k > HMAX -> HMAX : hint + k); pending[me] = 1; sent = 1
    :: else -> skip
    fi;
    quiet = 0
  }
#endif
  /* refill_request.fetch_add(1, seq_cst) */
  atomic { DIE; refill++ }
#ifdef BROKEN_HINT_LATE
  /* Wrong: the hint after the request. */
  atomic {
    DIE;
    if
    :: k > 1 -> hint = (hint + k > HMAX -> HMAX : hint + k); pending[me] = 1
    :: else -> skip
    fi
  }
#endif
  /* FutexWake(refill_request, 1): the producer wakes if it sleeps */
#ifndef BROKEN_NO_REFILL_WAKE
  atomic { DIE; p_asleep = 0 }
#endif
#else
  /* refill_request.fetch_add + FutexWake(refill_request) only wake the producer before
     its fill-loop timeout; the producer's schedule is nondeterministic anyway, so they
     are not modelled (HINT models them). */
#endif
  /* FutexWait(wake_seq, seq, timeout): the kernel compares and queues in one step. */
  atomic {
    DIE;
    if
    :: wake_seq != seq -> goto await_done  /* EAGAIN */
    :: else -> asleep[me] = 1
    fi
  }
end_wait:
  atomic {
    if
    :: mortal -> KILL
    :: asleep[me] == 0 -> skip             /* woken by FutexWake */
#ifndef NO_TIMEOUT
    :: asleep[me] == 1 -> asleep[me] = 0   /* the timeout expired */
#endif
    fi
  }
await_done:
  /* waiters.fetch_sub(relaxed); AwaitPublish returns. */
  atomic { DIE; waiters--; seq = 0; r++ }
  /* The next round of the slow loop: wake_seq() load, then TryTake. */
  atomic {
    DIE;
#ifndef BROKEN_SEQ_LATE
    seq = wake_seq;
#endif
    goto again
  }
again:
  /* A new attempt of the same take: head.load(relaxed). */
  atomic { DIE; h = head; goto load_tail }

finish:
  atomic { finished++; takes = 0 }
stop:
  skip
}

#ifdef HINT
/* The fill loop as passes (FillLoop::Run and Pass): load refill_request for the wait that
   follows (Run), take the hint (TakeRefillHint), drain any stale prefix, publish at least
   min(max(hint, 1), room, IDs left) and at most the room (its fill target is any amount
   above the hint), wake consumers, then sleep on refill until a request or the timeout. */
active proctype producer() {
  byte h, m, u, e, seen, want, lo;
  bool won;

pass:
#ifndef BROKEN_SEEN_LATE
  /* Run: refill_seen = refill_request() (acquire) */
  atomic { seen = refill }
#endif
  /* TakeRefillHint: refill_hint.exchange(0, acq_rel); every pending hint is taken */
  atomic {
    want = hint; hint = 0;
    u = 0;
    do
    :: u < NCONS -> pending[u] = 0; u++
    :: else -> u = 0; break
    od
  }
#ifdef BROKEN_SEEN_LATE
  /* Wrong: the wait's word read after the hint was taken. */
  atomic { seen = refill }
#endif
  /* DrainOlderThan / DrainAll, or nothing: head.load(acquire), then the CAS */
  atomic {
    h = head;
    if
    :: h < tail -> goto pdrain
#ifdef LIVENESS
    /* A full ring's IDs age until a pass drains them: the timed passes cannot skip the
       drain for ever (without this the producer could idle on a full ring in a cycle). */
    :: h + N > tail -> h = 0; goto pfill
#else
    :: true -> h = 0; goto pfill
#endif
    fi
  }
pdrain:
  atomic {
    e = h + 1;
    do
    :: e < tail -> e++
    :: true -> break
    od;
    if
    :: head == h -> head = e
    :: else -> skip
    fi;
    e = 0; h = 0
  }
pfill:
  /* Fill: head.load(acquire) for the room, then publish m of it */
  atomic {
    h = head;
    if
    :: tail < MAXID && h + N > tail ->
       /* lo = min(max(want, 1), room, left); m any of lo..min(room, left) */
       lo = (want > 1 -> want : 1);
       lo = (lo > h + N - tail -> h + N - tail : lo);
       lo = (lo > MAXID - tail -> MAXID - tail : lo);
       m = lo;
       do
       :: m < h + N - tail && tail + m < MAXID -> m++
       :: true -> break
       od;
       u = tail; h = 0; want = 0; lo = 0;
       goto pstore
    :: tail == MAXID -> h = 0; want = 0; goto done
    :: else -> h = 0; want = 0; goto pwait   /* the ring is full */
    fi
  }
pstore:
  atomic {
    slot[u % N] = u + 1;
    u++;
    if
    :: u < tail + m -> goto pstore
    :: else -> u = 0
    fi
  }
  atomic { tail = tail + m; m = 0 }
  wake_seq++;
  atomic {
    if
    :: waiters > 0 -> skip
    :: else -> goto pwait
    fi
  }
  atomic {
    u = 0;
    do
    :: u < NCONS -> asleep[u] = 0; u++
    :: else -> u = 0; break
    od
  }
pwait:
  /* WaitForRefillRequest(seen, timeout): FutexWait(refill, seen) compares and queues */
  atomic {
    if
    :: refill != seen -> seen = 0; goto pass   /* EAGAIN: a request came meanwhile */
    :: else -> p_asleep = 1
    fi
  }
end_pwait:
  atomic {
    if
    :: p_asleep == 0 -> seen = 0; goto pass    /* woken by a request */
#ifndef NO_TIMEOUT
    :: p_asleep == 1 -> p_asleep = 0; seen = 0; goto pass  /* the ~1 ms timeout */
#endif
    fi
  }
done:
  producer_done = true
}
#else
/* The fill loop: publish batches and drain, until MAXID IDs are published. Its futex wait
   for refill requests always ends (request or ~1 ms timeout), so it is not a state. */
active proctype producer() {
  byte h, m, u, e;
  bool won;

loop:
  /* head.load(acquire) (CheckCounters in Publish, head() in DrainAll/DrainOlderThan) */
  atomic {
#ifdef BROKEN_GATE
    waiters == 0;   /* Wrong: waits for the consumers, and a killed one never leaves */
#endif
    h = head;
    if
    :: tail < MAXID &&
#ifdef BROKEN_LAP
       true ->
       /* Wrong: room as if every published ticket had already been claimed. */
       m = 1;
       do
       :: m < N && tail + m < MAXID -> m++
       :: true -> break
       od;
#else
       h + N > tail ->
       /* room = N - (tail - h); publish any 1 <= m <= min(room, IDs left). */
       m = 1;
       do
       :: m < h + N - tail && tail + m < MAXID -> m++
       :: true -> break
       od;
#endif
       u = tail; h = 0;
       goto store
    :: h < tail -> goto drain
    :: tail == MAXID -> h = 0; goto done
    fi
  }
store:
  /* slots_[(tail_ + i) & mask_].store(id, relaxed), one store per step */
  atomic {
    slot[u % N] = u + 1;
    u++;
    if
    :: u < tail + m -> goto store
    :: else -> u = 0
    fi
  }
  /* tail.store(tail_ + n, release) */
  atomic { tail = tail + m; m = 0 }
  /* WakeConsumers: wake_seq.fetch_add(1, seq_cst) */
  wake_seq++;
  /* waiters.load(seq_cst) > 0 ? */
  atomic {
    if
    :: waiters > 0 -> skip
    :: else -> goto loop
    fi
  }
  /* FutexWake(wake_seq, INT_MAX): every sleeper wakes */
  atomic {
    u = 0;
    do
    :: u < NCONS -> asleep[u] = 0; u++
    :: else -> u = 0; break
    od;
    goto loop
  }

drain:
  /* Drain tickets h..e-1 (DrainAll: e = tail; DrainOlderThan: a stale prefix). Those
     slots hold the producer's own writes, so the staleness scan is a local decision,
     modelled as a nondeterministic end. head.compare_exchange_weak(h, e, acq_rel): */
  atomic {
    e = h + 1;
    do
    :: e < tail -> e++
    :: true -> break
    od;
    if
    :: head == h -> head = e; won = true
    :: else -> h = head; won = false
    fi;
    e = 0;
    if
    :: won -> won = false; h = 0; goto loop
    :: !won && h < tail -> goto drain      /* retry from the new head */
    :: !won -> h = 0; goto loop            /* DrainOlderThan: nothing stale left */
    fi
  }

done:
  producer_done = true
}
#endif

init {
  atomic {
    run consumer(0, 1, 1);   /* single takes; may be killed at any step */
    run consumer(1, 2, 0);   /* batches of k = 2 */
#if NCONS > 2
    run consumer(2, 1, 0);   /* single takes */
#endif
  }
}

#ifdef NO_TIMEOUT
/* A lost wake-up: nothing can move any more, yet a live consumer sleeps while IDs are in
   the ring (had it been woken it would have taken them). A killed consumer's asleep bit
   is cleared when it dies. */
active proctype watchdog() {
  byte i;
end_watch:
  timeout ->
  d_step {
    i = 0;
    do
    :: i < NCONS -> assert(!asleep[i] || head >= tail); i++
    :: else -> break
    od;
#ifdef HINT
    /* The producer sleeps for good only with every live taker's hint read, and never
       while a live taker sleeps on an empty ring it could still fill. */
    i = 0;
    do
    :: i < NCONS -> assert(!p_asleep || !pending[i] || killed[i]);
                    assert(!p_asleep || !asleep[i] || tail == MAXID); i++
    :: else -> break
    od
#endif
  }
}
#endif

#ifdef LIVENESS
/* Property 2, under weak fairness (pan -a -f): every run ends with the producer having
   published all MAXID IDs and every consumer finished (all takes returned an ID or
   timed out) or killed. So a killed consumer, even one left counted in waiters or killed
   between its slot read and its CAS, blocks nobody; no CAS loop livelocks; no wait is
   endless. */
ltl terminates { <> (producer_done && finished == NCONS) }
#endif
