/*
 * Promela model of the machine-number fencing protocol of the etcd register
 * (docs/etcd-fencing.md): the claim, the raises of high-water/N, the clean stop and the
 * restart on a surviving segment, against a linearizable etcd reached through a network
 * that delays, duplicates, reorders and loses requests. Checked exhaustively by spin
 * (tests/model/check_model.sh); daemon/model/README.md says what is modelled, at which
 * granularity, and why the bounds suffice.
 *
 * One machine number N and up to three incarnations of a holder of it:
 *   1  holder "a", the first holder (its host keeps a state file and a segment);
 *   2  holder "b" on another host: a successor, claims once machines/N is absent;
 *   3  holder "a" again: the restart on incarnation 1's host, after incarnation 1 crashed
 *      or stopped, on its surviving segment and state file (NINC = 3 only).
 * Incarnation i claims with lease i (every claim grants a fresh lease).
 *
 * Granularity: each `atomic { ... }` is ONE step: one etcd transaction applied as a whole
 * (etcd is linearizable), or one action of a holder that other parties can observe (a
 * request put on the network, a state-file write, an ID published into the segment),
 * merged only with local computation and ghost bookkeeping. A holder may stop between
 * any two of its steps, for ever (a crash, or a pause that never ends).
 *
 * Configuration (spin -D...):
 *   NINC     incarnations: 2 (a, then b) or 3 (a, b, and a's restart)
 *   MAXMS    milliseconds 1..MAXMS exist; nobody issues or raises above MAXMS
 *   MAXREQ   transactions (raises and clean stops) each incarnation sends
 *   MAXLATE  transactions, in all, that stay on the network: unanswered (timed out), or
 *            answered and sent once more
 *   JUMP     a raise may also jump two milliseconds ahead instead of one
 *   NO_MARK_ASSERT  do not check property 2, so that a broken variant runs on to the
 *            duplicate it causes
 * Deliberately broken variants:
 *   BROKEN_UNCONDITIONAL_RAISE  a raise compares only the lease (the code before the
 *            fix): a late raise lowers the mark and the successor repeats the holder's
 *            milliseconds (violates both properties)
 *   BROKEN_TRUST_SEGMENT  the restart trusts its segment when the register's mark is at
 *            most the state file's reservation (the rule before the fix), not on equal
 *            revisions (violates property 1)
 *   BROKEN_CLEAN_STOP     the clean stop compares only the lease. Spin does NOT refute
 *            it: with revision-checked raises, the clean stop's revision compare is
 *            defence in depth (README)
 *
 * Properties: 1. no millisecond is issued by two incarnations (each one's sequence
 * restarts, so that would be a duplicate ID); 2. the stored mark never goes down, except
 * by a clean stop of the live holder. Plus no invalid end state.
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
#define NSLOT (NINC * MAXREQ)

#define HOLDER_A 1
#define HOLDER_B 2

/* Request kinds (0: none), and answers: "succeeded" (the txn header's revision is the
   mark's new one); failed, machines/N not bound to the request's lease; failed, the lease
   ours but the mark's mod_revision not the compared one; NO_ANSWER: timed out. */
mtype = { RAISE, STOP, COMMITTED, LOST, MOVED };
#define NO_ANSWER 0

#define MAX(x, y) ((x) > (y) -> (x) : (y))
#define MIN(x, y) ((x) < (y) -> (x) : (y))

/* --- etcd: one linearizable store. --- */
byte rev = 0;       /* revision of the last write to high-water/N (see README: other keys'
                       writes also advance etcd's revision, which no compare can observe) */
byte hw_val = 0;    /* high-water/N's unix_ms; 0 with hw_rev 0: absent */
byte hw_rev = 0;    /* high-water/N's mod_revision (0: absent) */
byte m_lease = 0;   /* lease machines/N is bound to (0: absent); lease i = incarnation i */
byte m_holder = 0;  /* machines/N's holder id */

/* --- The network: request k of incarnation i sits in slot (i - 1) * MAXREQ + k while it
   is in flight: its client gave up waiting (timeout), and etcd applies it later, at any
   time, in any order with other requests, once or twice, or never. --- */
mtype q_kind[NSLOT];  /* 0: nothing in flight; RAISE; STOP */
byte q_rev[NSLOT];   /* the mod_revision of high-water/N the txn compares */
byte q_val[NSLOT];   /* the unix_ms it puts */
bit q_again[NSLOT];  /* it will be applied once more (or lost) */
byte late = 0;       /* requests that went on the network unanswered or twice, in all */

/* --- Holder "a"'s host: the state file and the segment survive incarnation 1. --- */
byte file_ms = 0;   /* reserved_through_unix_ms: written BEFORE each raise is sent */
byte file_rev = 0;  /* mod_revision of the last committed raise (or clean stop), written
                       after its answer */
byte seg_ms = 0;    /* the segment's last published millisecond */

/* --- Ghost state for the properties (nothing of it exists in the C++). --- */
byte issued_by[MAXMS + 1];  /* the incarnation that issued IDs in this millisecond */
bit ended[NINC + 1];        /* the incarnation crashed or stopped */
bit mark_went_down = 0;     /* set and checked inside one step: never 1 in a stored state */

/* One transaction of holder `lease`, applied whole: compare [machines/N bound to lease
   AND high-water/N's mod_revision == crev]; success: put high-water/N = val; failure:
   range machines/N and high-water/N. res: COMMITTED, LOST or MOVED. */
inline txn(lease, kind, crev, val, res) {
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
     rev++; hw_val = val; hw_rev = rev;
     res = COMMITTED
  :: else ->
     res = (m_lease == lease -> MOVED : LOST)
  fi
}

#define FROM_HOST_A (me == 1)  /* its file and segment are read by a later incarnation */

proctype holder(byte me) {
  byte hid;        /* holder id */
  byte w0;         /* the mark the claim read */
  byte rk;         /* R_known: the mark's mod_revision as this holder last knew it */
  byte horizon;    /* confirmed horizon: IDs only at or below it */
  byte start;      /* IDs only strictly above it */
  byte last;       /* last issued millisecond (0: none) */
  byte tried;      /* highest raise target attempted or known stored */
  byte nreq;       /* requests sent */
  byte s;          /* slot of the request in progress */
  byte t;          /* its target */
  mtype kind;      /* RAISE or STOP */
  mtype res;       /* its answer */

  hid = (me == 2 -> HOLDER_B : HOLDER_A);
#if NINC > 2
  if
  :: me == 3 -> end_restart: ended[1] == 1  /* the daemon restarts after the old one died */
  :: else -> skip
  fi;
#endif

  /* Claim (atomic: see README): compare machines/N absent, or our own record (its
     mod_revision as just read); put machines/N bound to our lease; range high-water/N. */
end_claim:
  atomic {
    (m_lease == 0 || m_holder == hid) ->
    m_lease = me; m_holder = hid;
    w0 = hw_val; rk = hw_rev;
    start = w0; horizon = w0;
    if
    :: me == 3 ->
       /* Startup reconciliation on incarnation 1's segment and state file. */
       horizon = MIN(file_ms, w0);  /* confirmed in both stores */
       if
#ifdef BROKEN_TRUST_SEGMENT
       :: seg_ms > 0 && w0 <= file_ms -> start = seg_ms
#else
       :: seg_ms > 0 && rk == file_rev -> start = seg_ms
#endif
       :: else -> start = MAX(MAX(w0, file_ms), seg_ms)
       fi
    :: else -> skip
    fi;
    tried = MAX(horizon, start);
    printf("MSC: %d claims: mark %d rev %d, issues above %d up to %d\n", me, w0, rk, start, horizon)
  }

  /* A holder may stop acting at any point (a pause that never ends, or a crash). Only
     incarnation 1's crash is a step (dead): it lets its restart begin. */
end_serve:
  do
  /* Publish IDs of the next millisecond (a holder that skips milliseconds issues a subset
     with the same maximum: nothing it does later depends on which it skipped). */
  :: atomic {
       kind != STOP && MAX(last, start) < horizon ->
       last = MAX(last, start) + 1;
       assert(issued_by[last] == 0);  /* no millisecond is issued by two incarnations */
       printf("MSC: %d issues ms %d\n", me, last);
       issued_by[last] = me;
       if
       :: FROM_HOST_A -> seg_ms = last
       :: else -> skip
       fi
     }
  /* Raise ahead of issuing: the state file first, then the register. */
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
       :: FROM_HOST_A -> file_ms = t
       :: else -> skip
       fi
     }
     goto send
  /* Clean stop: the last millisecond really issued, never below the claim's start or
     mark; the state file first. A retry (after a timeout or MOVED) writes the same. */
  :: atomic {
       nreq < MAXREQ ->
       kind = STOP;
       t = MAX(MAX(last, start), w0);
       if
       :: FROM_HOST_A -> file_ms = t
       :: else -> skip
       fi
     }
     goto send
  /* Crash (or exit: the lease runs out in both cases; a revoke only makes it sooner). */
  :: me == 1 -> goto dead
  od;

send:
  /* The transaction, on the network. Either the holder hears its answer (it was applied
     while the holder waited, which did nothing else meanwhile, so it is applied now), or
     it gives up waiting: not committed, and the request stays in flight. Both ways, a
     copy may stay in flight too (sent twice). */
  atomic {
    if
    :: me == 1 -> goto dead  /* crash after the state file was written, before the send */
    :: true
    fi;
    s = (me - 1) * MAXREQ + nreq;
    nreq++;
    printf("MSC: %d sends %e to %d comparing rev %d\n", me, kind, t, rk);
    if
    :: txn(me, kind, rk, t, res);
       printf("MSC: %d hears %e (mark %d rev %d)\n", me, res, hw_val, hw_rev);
       if
       :: true
       :: late < MAXLATE -> late++;
          q_kind[s] = kind; q_rev[s] = rk; q_val[s] = t  /* a copy, applied later or lost */
       fi
    :: late < MAXLATE -> late++;
       q_kind[s] = kind; q_rev[s] = rk; q_val[s] = t; q_again[s] = 1;
       res = NO_ANSWER;
       printf("MSC: %d times out: request %d in flight\n", me, s)
    fi;
    s = 0; t = 0;
    if
    :: kind == RAISE -> kind = 0
    :: else -> skip
    fi;
    if
    :: res == COMMITTED ->
       rk = hw_rev;
       horizon = MAX(horizon, hw_val)  /* the value just written; for a clean stop:
                                          irrelevant, nothing more is issued */
    :: res == LOST -> goto dead  /* claim lost: stop serving at once, exit */
    :: res == MOVED ->
       /* The mark changed under us while the lease is ours: our own timed-out request
          applied late. The value read is a horizon; a raise retries above it, a clean
          stop with the same target. */
       rk = hw_rev;
       horizon = MAX(horizon, hw_val);
       tried = MAX(tried, hw_val);
       res = NO_ANSWER;
       goto end_serve
    :: res == NO_ANSWER -> goto end_serve  /* timeout: the horizon stays */
    fi
  }
  /* COMMITTED. The state file records the revision after the answer: a crash may come
     first. */
  atomic {
    res = NO_ANSWER;
    if
    :: FROM_HOST_A -> if :: goto dead :: file_rev = rk fi
    :: else -> skip
    fi;
    if
    :: kind == STOP -> goto dead
    :: else -> goto end_serve
    fi
  }

dead:
  atomic {
    printf("MSC: %d ends\n", me);
    ended[me] = 1;
    w0 = 0; rk = 0; horizon = 0; start = 0; last = 0; tried = 0; nreq = 0; s = 0; t = 0;
    kind = 0; res = 0; hid = 0
  }
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
       txn(s / MAXREQ + 1, q_kind[s], q_rev[s], q_val[s], res);
       printf("MSC: etcd applies request %d late: %e (mark %d rev %d)\n", s, res, hw_val, hw_rev);
       if
       :: q_again[s] == 1 -> q_again[s] = 0  /* applied again later, or lost */
       :: true -> q_kind[s] = 0; q_rev[s] = 0; q_val[s] = 0; q_again[s] = 0
       fi;
       s = 0; res = 0
     }
  od
}

/* A lease ends at any time (expiry, revoke, etcd revoking leases after a stalled leader
   resumes): the key bound to it is deleted. The lease decides when, never whether. */
active proctype leases() {
end_expire:
  do
  :: atomic { m_lease != 0 -> printf("MSC: lease %d ends\n", m_lease); m_lease = 0; m_holder = 0 }
  od
}

init {
  atomic {
    run holder(1);
    run holder(2);
#if NINC > 2
    run holder(3);
#endif
  }
}
