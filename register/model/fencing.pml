/*
 * Promela model of the machine-number fencing protocol of the etcd register
 * (docs/etcd-fencing.md): the claim, the raises of high-water/N, the clean stop, the
 * restarts on a surviving segment, and an operator's `raise-all --while-running`, against
 * a linearizable etcd reached through a network that delays, duplicates, reorders and
 * loses requests. Checked exhaustively by spin (tests/model/check_model.sh);
 * register/model/README.md says what is modelled, at which granularity, and why the bounds
 * suffice.
 *
 * One machine number N and up to five incarnations of a holder of it, on two hosts:
 *   1  holder "a", the first holder;
 *   2  holder "b" on another host: a successor, claims once machines/N is absent;
 *   3  holder "a" again: the restart on host a after incarnation 1 ended;
 *   4  holder "b" again: the restart of the successor after incarnation 2 ended;
 *   5  holder "a" a third time: the second restart on host a, after incarnation 3 ended.
 * Incarnation i runs on host a (i odd) or b (i even); incarnation i + 2 restarts on the
 * state file and segment i leaves. Incarnation i claims with lease i (every claim grants a
 * fresh lease); with CLAIM_RETRY incarnation 2's second claim attempt uses lease NINC + 1.
 *
 * Granularity: each `atomic { ... }` is ONE step: one etcd transaction applied as a whole
 * (etcd is linearizable), or one action of a holder that other parties can observe (a
 * request put on the network, a state-file write, an ID published into the segment),
 * merged only with local computation and ghost bookkeeping. A holder may stop between
 * any two of its steps, for ever (a crash, or a pause that never ends).
 *
 * Configuration (spin -D...):
 *   NINC     incarnations: 2 (a, b), 3 (+ a's restart), 4 (+ b's restart) or 5 (+ a's
 *            second restart)
 *   MAXMS    milliseconds 1..MAXMS exist; nobody issues or raises above MAXMS
 *   MAXREQ   transactions (raises, clean stops, acknowledgments; each round of a call
 *            counts) each incarnation sends
 *   MAXLATE  transactions, in all, that stay on the network: unanswered (timed out), or
 *            answered and sent once more (a claim attempt that times out counts too)
 *   JUMP     a raise may also jump two milliseconds ahead instead of one
 *   ROUNDS   rounds of one raise, clean stop or acknowledgment call (EtcdRegister::Raise's
 *            loop): a compare that fails on a mark this holder's own lease wrote is sent
 *            again at once, without a state-file write, up to ROUNDS rounds (default 1:
 *            the call gives up and a later call retries)
 *   OPERATOR an operator runs `raise-all --while-running` once, at any point: the mark
 *            becomes T, above every millisecond any incarnation issued or relied on,
 *            written without a lease (writer 0), never lowering it
 *   ACKNOWLEDGE  with OPERATOR: a holder that read the fence acknowledges it
 *            (AcknowledgeFence), and raise-all --while-running waits for that (property 7)
 *   ANY_T    with OPERATOR: T is any millisecond 1..MAXMS, also at or below what the live
 *            holder issued or confirmed; the mark becomes max(mark, T), written also
 *            when it was already above T while N is held
 *   TRUST_NEEDS_RESERVATION  a restart trusts its segment only if, besides, the mark it
 *            claimed above is at most its state file's reservation, as ReconcileStartup
 *            requires; without it the model trusts in more cases than the C++ does
 *   CLAIM_RETRY  incarnation 2's first claim attempt may time out and be applied later,
 *            after its second attempt; either attempt may ask for another number M
 *   NO_MARK_ASSERT  do not check property 2, so that a broken variant runs on to the
 *            duplicate it causes
 * Deliberately broken variants:
 *   BROKEN_UNCONDITIONAL_RAISE  a raise compares only the lease (the code before the
 *            fix): a late raise lowers the mark and the successor repeats the holder's
 *            milliseconds (violates properties 1 and 2)
 *   BROKEN_TRUST_SEGMENT  the restart trusts its segment when the register's mark is at
 *            most the state file's reservation, not on equal revisions (violates 1)
 *   BROKEN_CLEAN_STOP     the clean stop compares only the lease. Spin does NOT refute
 *            it: with revision-checked raises, the clean stop's revision compare is
 *            defence in depth (README)
 *   BROKEN_IGNORE_FENCE   a raise that finds the operator's higher mark counts its target
 *            as committed and goes on issuing from where it was (violates 5)
 *   BROKEN_CLEAN_STOP_ERASES_FENCE  the clean stop writes max(last issued, claim mark)
 *            only, forgetting a fence an earlier raise adopted (violates 4)
 *   BROKEN_REUSED_LEASE   claim attempts reuse one lease: a late first attempt binds a
 *            second number to the live lease (violates 6; needs CLAIM_RETRY)
 *   BROKEN_RECOMMIT_OVER_FENCE  the code before the fence reached the state file first: a
 *            raise that finds the operator's mark below its target adopts it as a fence and
 *            commits its target under its own lease in the same call, and an
 *            acknowledgment is written without the state file recording the fence; a crash
 *            before the next state-file write leaves a file whose claim wrote the mark but
 *            whose floor is below the fence, and the restart trusts its segment (violates 5
 *            and 7). Its two halves alone: BROKEN_RAISE_RECOMMITS (a raise, clean stop or
 *            acknowledgment that finds another writer's mark writes again in the same call)
 *            and BROKEN_ACK_UNRECORDED (the acknowledgment does not record the fence)
 *   BROKEN_RAISE_ALL_NO_WAIT  raise-all --while-running returns right after its writes,
 *            without waiting for the acknowledgment (violates 7; needs ACKNOWLEDGE)
 *   BROKEN_RESTART_FORGETS_FLOOR  a restart that trusts its segment starts right above
 *            the segment's last ID, forgetting that the incarnation before it started
 *            above a higher floor (the register's mark, or a fence) and may have
 *            committed raises above it without publishing (violates 1, or 5)
 *
 * Properties: 1. no millisecond is issued by two incarnations (each one's sequence
 * restarts, so that would be a duplicate ID); 2. the stored mark never goes down, except
 * by a clean stop of the live holder; with OPERATOR: 4. once the operator's fence T is
 * written, the stored mark is never below T; 5. a holder that has read the mark after
 * the fence was written issues nothing at or below T; with ACKNOWLEDGE: 7. once raise-all
 * has returned, no incarnation issues a millisecond at or below T while its claim is live;
 * with CLAIM_RETRY: 6. one lease is never bound to two numbers. Plus no invalid end state.
 * (Property 3 of the README is the end-state check.)
 */

#ifndef NINC
#define NINC 3
#endif
#ifndef MAXMS
#define MAXMS 3
#endif
#ifndef MAXREQ
#define MAXREQ 2
#endif
#ifndef MAXLATE
#define MAXLATE 2
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif
#define NSLOT (NINC * MAXREQ)
#if NINC < 2 || NINC > 5
#error "NINC is 2, 3, 4 or 5"
#endif
#ifdef BROKEN_RECOMMIT_OVER_FENCE
#define BROKEN_RAISE_RECOMMITS
#define BROKEN_ACK_UNRECORDED
#endif
#if (defined(ACKNOWLEDGE) || defined(ANY_T)) && !defined(OPERATOR)
#error "ACKNOWLEDGE and ANY_T need OPERATOR"
#endif

#define HOLDER_A 1
#define HOLDER_B 2
#define HOST(i) (((i) + 1) % 2)       /* 0: host a (odd i), 1: host b (even i) */
#define RESTARTS(i) ((i) + 2 <= NINC)  /* incarnation i + 2 reads i's file and segment */
#ifdef CLAIM_RETRY
#define NLEASE (NINC + 1)
#else
#define NLEASE NINC
#endif

/* Request kinds (0: none), and answers: "succeeded" (the txn header's revision is the
   mark's new one); failed, machines/N not bound to the request's lease; failed, the lease
   ours but the mark's mod_revision not the compared one; NO_ANSWER: timed out. ACK: an
   acknowledgment of the operator's fence (AcknowledgeFence). */
mtype = { RAISE, STOP, ACK, COMMITTED, LOST, MOVED };
#define NO_ANSWER 0

#define MAX(x, y) ((x) > (y) -> (x) : (y))
#define MIN(x, y) ((x) < (y) -> (x) : (y))

/* --- etcd: one linearizable store. --- */
byte rev = 0;       /* revision of the last write to high-water/N (see README: other keys'
                       writes also advance etcd's revision, which no compare can observe) */
byte hw_val = 0;    /* high-water/N's unix_ms; 0 with hw_rev 0: absent */
byte hw_rev = 0;    /* high-water/N's mod_revision (0: absent) */
byte hw_lease = 0;  /* high-water/N's writer: the lease in its record (0: raise-all, absent) */
#ifdef OPERATOR
byte hw_fence = 0;  /* high-water/N's "fence": the fence its writer acknowledged */
#endif
byte m_lease = 0;   /* lease machines/N is bound to (0: absent) */
byte m_holder = 0;  /* machines/N's holder id */
byte lease_of[NINC + 1];  /* the lease incarnation i claimed with (its requests carry it) */
#ifdef CLAIM_RETRY
byte m_ver = 0;     /* counts the puts of machines/N: its mod_revision, for a retake */
byte mm_lease = 0;  /* machines/M, another number: the lease it is bound to (0: absent) */
bit gone[NLEASE + 1];  /* the lease was revoked or ended: etcd refuses a put bound to it */
/* The one claim that may stay in flight: incarnation 2's first attempt. */
byte cq_num = 0;    /* 0: none; 1: it claims N; 2: it claims M */
byte cq_lease = 0;  /* the lease it binds */
byte cq_ver = 0;    /* it compares machines/N absent (0) or its mod_revision equal to this */
#endif

/* --- The network: request k of incarnation i sits in slot (i - 1) * MAXREQ + k while it
   is in flight: its client gave up waiting (timeout), and etcd applies it later, at any
   time, in any order with other requests, once or twice, or never. --- */
mtype q_kind[NSLOT];  /* 0: nothing in flight; RAISE; STOP; ACK */
byte q_rev[NSLOT];   /* the mod_revision of high-water/N the txn compares */
byte q_val[NSLOT];   /* the unix_ms it puts */
#ifdef OPERATOR
byte q_fence[NSLOT]; /* the "fence" it puts */
#define Q_FENCE(k) q_fence[k]
#else
#define Q_FENCE(k) 0
#endif
bit q_again[NSLOT];  /* it will be applied once more (or lost) */
byte late = 0;       /* requests that went on the network unanswered or twice, in all */

/* --- Each host's state file and segment, read by the next incarnation on that host. --- */
byte file_ms[2];    /* reserved_through_unix_ms: written BEFORE each raise is sent */
byte file_rev[2];   /* mod_revision of the last committed raise (or clean stop), written
                       after its answer */
byte file_floor[2]; /* the floor the writer's generator issues above: its start (the mark
                       it claimed above, or its own restart's floor) and any fence it obeys */
byte seg_ms[2];     /* the segment's last published millisecond */

/* --- Ghost state for the properties (nothing of it exists in the C++). --- */
byte issued_by[MAXMS + 1];  /* the incarnation that issued IDs in this millisecond */
bit ended[NINC + 1];        /* the incarnation crashed or stopped */
bit mark_went_down = 0;     /* set and checked inside one step: never 1 in a stored state */
byte top = 0;               /* the highest value the mark ever held: every horizon, hence
                               every millisecond issued, is at or below it */
#ifdef OPERATOR
byte fence_t = 0;           /* the operator's value T, once written (0: not yet) */
bit fence_erased = 0;       /* set and checked inside one step */
bit below_fence = 0;        /* set and checked inside one step */
bit ra_done = 0;            /* raise-all --while-running has returned */
bit after_return = 0;       /* set and checked inside one step */
#endif
#ifdef CLAIM_RETRY
bit two_numbers = 0;        /* set and checked inside one step */
#endif

/* One transaction of holder `lease`, applied whole: compare [machines/N bound to lease
   AND high-water/N's mod_revision == crev]; success: put high-water/N = val with the
   writer lease and the fence fv it acknowledged; failure: range machines/N and
   high-water/N. res: COMMITTED, LOST or MOVED. */
inline txn(lease, kind, crev, val, fv, res) {
  if
  :: m_lease == lease && (crev == hw_rev
#ifdef BROKEN_UNCONDITIONAL_RAISE
                           || kind == RAISE
#endif
#ifdef BROKEN_CLEAN_STOP
                           || kind == STOP
#endif
                          ) ->
#ifndef NO_MARK_ASSERT
     /* The mark never goes down, except by the clean stop of the live holder (the lease
        compare just passed: the writer is the live holder). */
     mark_went_down = (val < hw_val && kind != STOP);
     assert(!mark_went_down);
#endif
#ifdef OPERATOR
     /* Once the operator's fence is written, no write puts the mark below it. */
     fence_erased = (val < fence_t);
     assert(!fence_erased);
#endif
     rev++; hw_val = val; hw_rev = rev; hw_lease = lease; top = MAX(top, val);
#ifdef OPERATOR
     hw_fence = fv;
#endif
     res = COMMITTED
  :: else ->
     res = (m_lease == lease -> MOVED : LOST)
  fi
}

#ifdef CLAIM_RETRY
/* Property 6, after a put of machines/N or machines/M: one lease never holds both. */
inline check_one_number() {
  two_numbers = (m_lease != 0 && m_lease == mm_lease);
  assert(!two_numbers)
}
#endif

proctype holder(byte me) {
  byte hid;        /* holder id */
  byte lease;      /* the lease of its claim (attempt) */
  byte h;          /* its host: 0 (a) or 1 (b) */
  byte w0;         /* the mark the claim read */
  byte rk;         /* R_known: the mark's mod_revision as this holder last knew it */
  byte horizon;    /* confirmed horizon: IDs only at or below it */
  byte start;      /* IDs only strictly above it */
  byte fence;      /* IDs only strictly above it: the highest mark read that another
                      writer (the operator, lease 0) wrote while the lease was ours */
  byte last;       /* last issued millisecond (0: none) */
  byte tried;      /* highest raise target attempted or known stored */
  byte nreq;       /* requests sent */
  byte s;          /* slot of the request in progress */
  byte t;          /* its target */
  mtype kind;      /* RAISE, STOP or ACK */
  mtype res;       /* its answer */
#if ROUNDS > 1
  byte round;      /* rounds of the call in progress sent so far, minus one */
#endif
#ifdef BROKEN_CLEAN_STOP_ERASES_FENCE
  byte sfloor;     /* what the clean stop's own re-read saw another writer write */
#endif
#ifdef OPERATOR
  bit saw;         /* ghost: this holder read the mark after the operator's fence */
  byte acked;      /* the fence its mark carries ("fence": fence_acknowledged_) */
  byte ackv;       /* the fence the acknowledgment in progress acknowledges */
  byte fv;         /* the "fence" the request being sent writes: ackv for an
                      acknowledgment, else acked */
#else
#define fv 0
#endif
#ifdef CLAIM_RETRY
  bit retried;     /* its first claim attempt timed out (only the first one may) */
#endif

  hid = (me % 2 == 1 -> HOLDER_A : HOLDER_B);
  lease = me;
  h = HOST(me);
  if
  :: me > 2 -> end_restart: ended[me - 2] == 1  /* the daemon restarts after the old one died */
  :: else -> skip
  fi;

  /* Claim: compare machines/N absent, or our own record (its mod_revision as just read);
     put machines/N bound to our lease; range high-water/N. One step when answered (see
     README); with CLAIM_RETRY incarnation 2's first attempt may time out instead. */
claim:
end_claim:
  atomic {
    if
    :: (m_lease == 0 || m_holder == hid) ->
       if
       :: true
#ifdef CLAIM_RETRY
       :: me == 2 && !retried && late < MAXLATE ->
          /* Timed out: in flight, applied later or never. */
          late++;
          cq_num = 1; cq_lease = lease; cq_ver = (m_lease == 0 -> 0 : m_ver);
          printf("MSC: %d claim attempt on N with lease %d times out\n", me, lease);
          goto retry
#endif
       fi;
       m_lease = lease; m_holder = hid;
#ifdef CLAIM_RETRY
       m_ver++;
       check_one_number();
#endif
       lease_of[me] = lease;
       w0 = hw_val; rk = hw_rev;
       start = w0; horizon = w0;
       if
       :: me > 2 ->
          /* Startup reconciliation on the segment and state file incarnation me - 2
             left. */
          horizon = MIN(file_ms[h], w0);  /* confirmed in both stores */
          if
#ifdef BROKEN_TRUST_SEGMENT
          :: seg_ms[h] > 0 && w0 <= file_ms[h] -> start = seg_ms[h]
#elif defined(BROKEN_RESTART_FORGETS_FLOOR)
          :: seg_ms[h] > 0 && rk == file_rev[h] -> start = seg_ms[h]
#elif defined(TRUST_NEEDS_RESERVATION)
          :: seg_ms[h] > 0 && rk == file_rev[h] && w0 <= file_ms[h] ->
             start = MAX(seg_ms[h], file_floor[h])
#else
          :: seg_ms[h] > 0 && rk == file_rev[h] -> start = MAX(seg_ms[h], file_floor[h])
#endif
          :: else -> start = MAX(MAX(w0, file_ms[h]), MAX(seg_ms[h], file_floor[h]))
          fi
       :: else -> skip
       fi;
       tried = MAX(horizon, start);
#ifdef OPERATOR
       saw = (fence_t != 0);
#endif
       printf("MSC: %d claims: mark %d rev %d, issues above %d up to %d\n", me, w0, rk, start, horizon)
#ifdef CLAIM_RETRY
    :: me == 2 && mm_lease == 0 ->
       /* Another number M is free: this attempt asks for it instead. */
       if
       :: true ->
          mm_lease = lease;
          check_one_number();
          printf("MSC: %d claims M with lease %d: serves M, not N\n", me, lease);
          goto elsewhere
       :: !retried && late < MAXLATE ->
          late++;
          cq_num = 2; cq_lease = lease; cq_ver = 0;
          printf("MSC: %d claim attempt on M with lease %d times out\n", me, lease);
          goto retry
       fi
#endif
    fi
  }

  /* A holder may stop acting at any point (a pause that never ends, or a crash). Only the
     crash of an incarnation that has a restart is a step (dead): it lets the restart
     begin. */
end_serve:
  do
  /* Publish IDs of the next millisecond (a holder that skips milliseconds issues a subset
     with the same maximum: nothing it does later depends on which it skipped). */
  :: atomic {
       kind != STOP && MAX(MAX(last, start), fence) < horizon ->
       last = MAX(MAX(last, start), fence) + 1;
       assert(issued_by[last] == 0);  /* no millisecond is issued by two incarnations */
#ifdef OPERATOR
       /* A holder that has read the fence issues nothing at or below it. */
       below_fence = (saw && last <= fence_t);
       assert(!below_fence);
       /* Once raise-all has returned, no holder with a live claim issues at or below T
          (one whose lease ended without its knowing may still serve out its horizon:
          below the next holder's start, so no duplicate). */
       after_return = (ra_done && m_lease == lease && last <= fence_t);
       assert(!after_return);
#endif
       printf("MSC: %d issues ms %d\n", me, last);
       issued_by[last] = me;
       if
       :: RESTARTS(me) -> seg_ms[h] = last
       :: else -> skip
       fi
     }
  /* Raise ahead of issuing: the state file first, then the register. The state file
     records the floor: the start and every fence read so far. */
  :: atomic {
       kind != STOP && nreq < MAXREQ && tried < MAXMS ->
       kind = RAISE;
       t = tried + 1;
#ifdef JUMP
       if
       :: t < MAXMS -> t++
       :: true -> skip
       fi;
#endif
       tried = t;
       if
       :: RESTARTS(me) -> file_ms[h] = t; file_floor[h] = MAX(start, fence)
       :: else -> skip
       fi
     }
     goto send
#ifdef ACKNOWLEDGE
  /* Acknowledge the fence (AcknowledgeFence): once the generator is above it (here at
     once: nothing at or below a fence read is issued) the holder writes the mark again
     under its own lease with "fence", never lower. The state file records the fence
     first, unless it already does. */
  :: atomic {
       kind != STOP && nreq < MAXREQ && fence > acked ->
       kind = ACK;
       ackv = fence;
       t = MAX(fence, tried);  /* never lower: every target attempted, the mark read */
#ifndef BROKEN_ACK_UNRECORDED
       if
       :: RESTARTS(me) && file_floor[h] < fence -> file_floor[h] = MAX(start, fence)
       :: else -> skip
       fi
#endif
     }
     goto send
#endif
  /* Clean stop: the last millisecond really issued, never below the claim's start or
     mark, nor below a fence read since; the state file first. A retry (after a timeout
     or a fence) computes it again. */
  :: atomic {
       nreq < MAXREQ ->
       kind = STOP;
#ifdef BROKEN_CLEAN_STOP_ERASES_FENCE
       t = MAX(MAX(last, start), MAX(w0, sfloor));
#else
       t = MAX(MAX(last, start), MAX(w0, fence));
#endif
       if
       :: RESTARTS(me) -> file_ms[h] = t; file_floor[h] = MAX(start, fence)
       :: else -> skip
       fi
     }
     goto send
  /* Crash (or exit: the lease runs out in both cases; a revoke only makes it sooner). */
  :: RESTARTS(me) -> goto dead
  od;

send:
  /* The transaction, on the network. Either the holder hears its answer (it was applied
     while the holder waited, which did nothing else meanwhile, so it is applied now), or
     it gives up waiting: not committed, and the request stays in flight. Both ways, a
     copy may stay in flight too (sent twice). A later round of the same call comes back
     here without a state-file write. */
  atomic {
    if
    :: RESTARTS(me) -> goto dead  /* crash after the state file was written, before the send */
    :: true
    fi;
    s = (me - 1) * MAXREQ + nreq;
    nreq++;
    printf("MSC: %d sends %e to %d comparing rev %d\n", me, kind, t, rk);
#ifdef OPERATOR
    fv = (kind == ACK -> ackv : acked);  /* the "fence" the write carries */
#endif
    if
    :: txn(lease, kind, rk, t, fv, res);
       printf("MSC: %d hears %e (mark %d rev %d writer %d)\n", me, res, hw_val, hw_rev, hw_lease);
       if
       :: true
       :: late < MAXLATE -> late++;
          q_kind[s] = kind; q_rev[s] = rk; q_val[s] = t;  /* a copy, applied later or lost */
#ifdef OPERATOR
          q_fence[s] = fv
#else
          skip
#endif
       fi
    :: late < MAXLATE -> late++;
       q_kind[s] = kind; q_rev[s] = rk; q_val[s] = t; q_again[s] = 1;
#ifdef OPERATOR
       q_fence[s] = fv;
#endif
       res = NO_ANSWER;
       printf("MSC: %d times out: request %d in flight\n", me, s)
    fi;
    s = 0;
#ifdef OPERATOR
    fv = 0;
#endif
    if
    :: res == COMMITTED ->
       rk = hw_rev;
       horizon = MAX(horizon, hw_val);  /* the value just written; for a clean stop:
                                           irrelevant, nothing more is issued */
#ifdef OPERATOR
       if
       :: kind == ACK -> acked = ackv
       :: else -> skip
       fi;
       ackv = 0;
#endif
#if ROUNDS > 1
       round = 0;
#endif
       t = 0
    :: res == LOST ->  /* claim lost: stop serving at once, exit */
#if ROUNDS > 1
       round = 0;
#endif
#ifdef OPERATOR
       ackv = 0;
#endif
       t = 0;
       if
       :: kind != STOP -> kind = 0
       :: else -> skip
       fi;
       goto dead
    :: res == MOVED ->
       /* The mark changed under us while the lease is ours: our own timed-out request
          applied late, or the operator's raise-all. The value read is a horizon, and the
          floor of every later target. A value another writer wrote is a fence: nothing
          at or below it is issued from now on (the generator is moved above it, the ring
          drained of IDs at or below it). */
       rk = hw_rev;
       horizon = MAX(horizon, hw_val);
       tried = MAX(tried, hw_val);
       if
       :: hw_lease != lease ->
#ifdef BROKEN_IGNORE_FENCE
          if
          :: kind == STOP -> fence = MAX(fence, hw_val)
          :: else -> skip
          fi
#else
          fence = MAX(fence, hw_val)
#endif
#ifdef BROKEN_CLEAN_STOP_ERASES_FENCE
          ;
          if
          :: kind == STOP -> sfloor = MAX(sfloor, hw_val)
          :: else -> skip
          fi
#endif
       :: else -> skip
       fi;
#ifdef OPERATOR
       saw = saw || fence_t != 0;
#endif
       res = NO_ANSWER;
       if
       :: kind == RAISE && hw_val >= t -> skip  /* the stored mark covers the target */
#ifndef BROKEN_RAISE_RECOMMITS
       :: hw_lease != lease ->
          /* kFenced: nothing is written on a fence until the state file records it; the
             next raise, clean stop or acknowledgment writes the state file first. */
          skip
#endif
#ifdef OPERATOR
       :: kind == ACK && fence > ackv -> skip  /* a newer fence: applied first */
#endif
#if ROUNDS > 1
       :: else ->
          if
          :: round + 1 < ROUNDS && nreq < MAXREQ ->
             /* The next round of the same call, at once: the target never lower than
                the mark read (a clean stop: than another writer's mark). */
             round++;
             if
             :: kind == ACK || (kind == STOP && hw_lease != lease) -> t = MAX(t, hw_val)
             :: else -> skip
             fi;
             goto send
          :: else -> skip  /* gives up for now: not committed */
          fi
#else
       :: else -> skip
#endif
       fi;
#if ROUNDS > 1
       round = 0;
#endif
#ifdef OPERATOR
       ackv = 0;
#endif
       t = 0;
       if
       :: kind != STOP -> kind = 0
       :: else -> skip
       fi;
       goto end_serve
    :: res == NO_ANSWER ->  /* timeout: the horizon stays */
#if ROUNDS > 1
       round = 0;
#endif
#ifdef OPERATOR
       ackv = 0;
#endif
       t = 0;
       if
       :: kind != STOP -> kind = 0
       :: else -> skip
       fi;
       goto end_serve
    fi
  }
  /* COMMITTED. The state file records the revision after the answer: a crash may come
     first. */
  atomic {
    res = NO_ANSWER;
    if
    :: RESTARTS(me) -> if :: goto dead :: file_rev[h] = rk fi
    :: else -> skip
    fi;
    if
    :: kind == STOP -> goto dead
    :: else -> kind = 0; goto end_serve
    fi
  }

#ifdef CLAIM_RETRY
retry:
  /* The next claim attempt, after a timeout. */
  atomic {
#ifdef BROKEN_REUSED_LEASE
    skip  /* the same lease again */
#else
    /* Revoke the attempt's lease first (etcd deletes what is bound to it and refuses a
       put bound to it later), or the revoke is lost and the lease ends at its TTL; then
       a fresh lease. */
    if
    :: gone[lease] = 1;
       if
       :: m_lease == lease -> m_lease = 0; m_holder = 0
       :: else -> skip
       fi;
       if
       :: mm_lease == lease -> mm_lease = 0
       :: else -> skip
       fi
    :: true
    fi;
    lease = NLEASE;
#endif
    retried = 1;
    printf("MSC: %d claims again with lease %d\n", me, lease)
  }
  goto claim;
#endif

dead:
  atomic {
    printf("MSC: %d ends\n", me);
    ended[me] = 1;
    w0 = 0; rk = 0; horizon = 0; start = 0; fence = 0; last = 0; tried = 0; nreq = 0;
    s = 0; t = 0; kind = 0; res = 0; hid = 0; lease = 0; h = 0;
#if ROUNDS > 1
    round = 0;
#endif
#ifdef BROKEN_CLEAN_STOP_ERASES_FENCE
    sfloor = 0;
#endif
#ifdef OPERATOR
    saw = 0; acked = 0; ackv = 0;
#endif
  }
#ifdef CLAIM_RETRY
elsewhere:
  skip
#endif
}

/* etcd applies any in-flight transaction, whole, at any time. */
#define PICK(k) :: q_kind[k] != 0 -> s = k

active proctype etcd() {
  byte s;
  mtype res;
end_apply:
  do
  :: atomic {
       if
       PICK(0)
#if NSLOT > 1
       PICK(1)
#endif
#if NSLOT > 2
       PICK(2)
#endif
#if NSLOT > 3
       PICK(3)
#endif
#if NSLOT > 4
       PICK(4)
#endif
#if NSLOT > 5
       PICK(5)
#endif
#if NSLOT > 6
       PICK(6)
#endif
#if NSLOT > 7
       PICK(7)
#endif
#if NSLOT > 8
       PICK(8)
#endif
#if NSLOT > 9
       PICK(9)
#endif
#if NSLOT > 10
       PICK(10)
#endif
#if NSLOT > 11
       PICK(11)
#endif
#if NSLOT > 12
#error "at most 12 request slots (NINC * MAXREQ)"
#endif
       fi;
       /* Nobody hears the answer: its client gave up waiting. */
       txn(lease_of[s / MAXREQ + 1], q_kind[s], q_rev[s], q_val[s], Q_FENCE(s), res);
       printf("MSC: etcd applies request %d late: %e (mark %d rev %d)\n", s, res, hw_val, hw_rev);
       if
       :: q_again[s] == 1 -> q_again[s] = 0  /* applied again later, or lost */
       :: true -> q_kind[s] = 0; q_rev[s] = 0; q_val[s] = 0; q_again[s] = 0;
#ifdef OPERATOR
          q_fence[s] = 0
#else
          skip
#endif
       fi;
       s = 0; res = 0
     }
#ifdef CLAIM_RETRY
  /* A claim that timed out, applied late: refused if its lease is gone ("requested lease
     not found"), else it binds the number if the compare still holds. */
  :: atomic {
       cq_num != 0 ->
       if
       :: gone[cq_lease] -> printf("MSC: etcd refuses the late claim: lease %d gone\n", cq_lease)
       :: else ->
          if
          :: cq_num == 1 && ((cq_ver == 0 && m_lease == 0) ||
                             (cq_ver != 0 && m_lease != 0 && m_ver == cq_ver)) ->
             m_lease = cq_lease; m_holder = HOLDER_B; m_ver++;
             check_one_number();
             printf("MSC: etcd applies the late claim: N bound to lease %d\n", cq_lease)
          :: cq_num == 2 && mm_lease == 0 ->
             mm_lease = cq_lease;
             check_one_number();
             printf("MSC: etcd applies the late claim: M bound to lease %d\n", cq_lease)
          :: else -> skip  /* its compare fails */
          fi
       fi;
       cq_num = 0; cq_lease = 0; cq_ver = 0
     }
#endif
  od
}

/* A lease ends at any time (expiry, revoke, etcd revoking leases after a stalled leader
   resumes): the key bound to it is deleted. The lease decides when, never whether. */
active proctype leases() {
end_expire:
  do
  :: atomic {
       m_lease != 0 -> printf("MSC: lease %d ends\n", m_lease);
#ifdef CLAIM_RETRY
       gone[m_lease] = 1;
#endif
       m_lease = 0; m_holder = 0
     }
  od
}

#ifdef OPERATOR
/* `snowflakectl register raise-all --above T --while-running`, once, at any point. T is
   above every millisecond issued and every horizon any holder relies on (the mark's
   highest value so far, plus a margin of 1 or 2), or with ANY_T any millisecond. Its
   range and its transaction (compare the mark's mod_revision as read; put max(mark, T)
   without a lease and without a fence, keeping the holder; a mark already at or above T
   is written too while N is held, so that its holder learns of the fence) are one step:
   a compare that passes means nothing changed since the range, and one that fails
   changes nothing and is retried. It then waits until the holder it listed has written
   the mark under its own lease with a fence at or above T, or no longer holds N
   (WaitForAcknowledgements), and returns; it may also wait for ever (in C++ it gives up
   after 30 s and fails, naming the holder). */
active proctype operator() {
  byte t;
  byte listed;  /* the lease machines/N was bound to when raise-all listed it (0: free) */
end_idle:
  atomic {
#ifdef ANY_T
    t = 1;
    do
    :: t < MAXMS -> t++
    :: break
    od;
#else
    top < MAXMS ->
    if
    :: t = top + 1
    :: top + 2 <= MAXMS -> t = top + 2
    fi;
#endif
    if
    :: hw_val < t || m_lease != 0 ->
       rev++; hw_val = MAX(hw_val, t); hw_rev = rev; hw_lease = 0; hw_fence = 0;
       top = MAX(top, hw_val);
       fence_t = t;  /* the properties of the fence are about a fence written */
       printf("MSC: the operator raises the mark to %d (T %d, rev %d)\n", hw_val, t, rev)
    :: else ->
       /* Never lowers a mark; a free number's mark at or above T is left alone (its
          next holder starts above it, but for a restart of its writer that trusts its
          segment, which issues within its own predecessor's reservation). */
       printf("MSC: the operator leaves the free number's mark %d (T %d)\n", hw_val, t)
    fi;
    listed = m_lease;
    t = 0;
#if defined(ACKNOWLEDGE) && defined(BROKEN_RAISE_ALL_NO_WAIT)
    ra_done = 1; listed = 0; printf("MSC: raise-all returns\n")
#elif defined(ACKNOWLEDGE)
    if
    :: listed == 0 -> ra_done = 1; printf("MSC: raise-all returns\n")
    :: else -> skip
    fi
#else
    listed = 0  /* raise-all's wait is modelled with ACKNOWLEDGE only */
#endif
  }
#ifdef ACKNOWLEDGE
end_wait:
  atomic {
    listed != 0 &&
    (m_lease != listed || (hw_lease == listed && hw_fence >= fence_t)) ->
    ra_done = 1;
    listed = 0;
    printf("MSC: raise-all returns\n")
  }
#endif
}
#endif

init {
  atomic {
    run holder(1);
    run holder(2);
#if NINC > 2
    run holder(3);
#endif
#if NINC > 3
    run holder(4);
#endif
#if NINC > 4
    run holder(5);
#endif
  }
}
