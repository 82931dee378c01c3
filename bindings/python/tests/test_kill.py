"""A daemon killed with SIGKILL while Python threads take: each thread gets an exception
(never a hang), and no ID returned is a duplicate or older than the freshness bound."""

import os
import random
import signal
import threading
import time

import snowflake


def test_sigkill_while_taking_raises_and_hands_out_no_stale_id(daemon):
    seed = int(os.environ.get("SNOWFLAKE_STRESS_SEED", random.randrange(1 << 31)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    with snowflake.Client("killed", runtime_dir=daemon.runtime_dir, timeout=1) as client:
        bound_ms = client.status()["freshness_bound_ms"]
        assert bound_ms > 0
        results = [None] * 4
        taken = [[] for _ in range(4)]

        def take(index):
            mine = taken[index]
            try:
                while True:
                    # Before the call: the take happened later, and the GIL may delay
                    # this thread after it returns.
                    before_ms = time.time_ns() // 1_000_000
                    if index % 2:
                        batch = client.next_batch(100)
                    else:
                        batch = [client.next()]
                    mine.extend((i, before_ms) for i in batch)
            except snowflake.Error as e:
                results[index] = e

        threads = [threading.Thread(target=take, args=(i,), daemon=True) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.1 + rng.random() * 0.4)
        daemon.signal(signal.SIGKILL)
        killed_ms = time.time_ns() // 1_000_000
        daemon.process.wait(10)
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads), f"a take hung after SIGKILL (seed {seed})"
        for e in results:
            assert isinstance(e, snowflake.UnavailableError), repr(e)
            assert e.code in ("daemon_dead", "daemon_not_heartbeating"), e.message
        with snowflake.Client("killed", runtime_dir=daemon.runtime_dir, timeout=1) as later:
            try:
                later.next()
                assert False, "a take succeeded from a killed daemon's ring"
            except snowflake.DaemonDeadError:
                pass
    every = [i for mine in taken for i, _ in mine]
    assert every and len(every) == len(set(every)), f"duplicates (seed {seed})"
    for mine in taken:
        for i, at_ms in mine:
            made_ms = snowflake.decode(i).unix_ms
            # Never older than the bound when handed out (10 ms for CLOCK_REALTIME_COARSE's
            # tick and the conversions), and never from after the kill.
            assert at_ms - made_ms <= bound_ms + 10, (i, at_ms, made_ms, bound_ms)
            assert made_ms <= killed_ms + 10
