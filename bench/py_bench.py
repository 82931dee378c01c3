#!/usr/bin/env python3
"""The Python module's cost per take against a serving daemon (scripts/bench), beside what
Python services write instead, measured in the same run and loop: uuid.uuid4(),
time.time_ns() and, with --redis-port, redis-py INCR on loopback.

Prints one JSON object: each key a list with one figure per repetition (ns per call, or
per ID for the batch).

As take_bench does, every figure is a series of timed bursts of at most BURST calls with an
untimed pause before each, for the daemon's takes until the ring holds the burst's IDs
(status()'s ring_fill): a sustained series, or a burst larger than the ring's fill, would
measure the layout's cap of 4,096 IDs per ms (244 ns per ID) instead of a take. The
baselines run in the same bursts and pauses.

    PYTHONPATH=build/release/bindings/python python3 bench/py_bench.py \\
        --runtime-dir DIR [--reps 5] [--calls 200000] [--redis-port PORT]
"""

import argparse
import json
import time
import uuid

import snowflake


BURST = 2000        # calls per timed burst (IDs: below the ring's 4,096)
PAUSE_S = 0.003     # untimed, before each burst: the daemon refills the ring meanwhile


def await_fill(client, burst, ids_per_call):
    """How many calls of ids_per_call IDs the ring now holds (1..burst), waiting up to
    20 ms for burst calls' worth."""
    deadline = time.monotonic() + 0.02
    while True:
        n = client.status()["ring_fill"] // ids_per_call
        if n >= burst or (n > 0 and time.monotonic() > deadline):
            return min(n, burst)
        if time.monotonic() > deadline + 5:
            return 1  # an empty ring the daemon does not top up: the take will wait
        time.sleep(0.00005)


def per_call_ns(fn, calls, burst=BURST, client=None, ids_per_call=1):
    """ns per call of fn over `calls` calls in timed bursts, the same for every figure.

    On a shared machine a loaded daemon may pause briefly (a slow reservation renewal):
    a burst that meets an outage is discarded and run again after a pause; an outage
    longer than 5 s fails the benchmark."""
    timed = 0
    done = 0
    outage_since = None
    while done < calls:
        time.sleep(PAUSE_S)
        n = min(await_fill(client, burst, ids_per_call) if client else burst, calls - done)
        start = time.perf_counter_ns()
        try:
            for _ in range(n):
                fn()
        except (snowflake.UnavailableError, snowflake.RingEmptyError):
            outage_since = outage_since or time.monotonic()
            if time.monotonic() - outage_since > 5:
                raise
            continue
        outage_since = None
        timed += time.perf_counter_ns() - start
        done += n
    return timed / calls


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runtime-dir", required=True)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--calls", type=int, default=100_000)
    p.add_argument("--redis-port", type=int)
    a = p.parse_args()
    if a.reps < 1 or a.calls < 1:
        p.error("--reps and --calls must be at least 1")

    redis_client = None
    if a.redis_port:
        import redis  # python3-redis; scripts/bench installs it with --peers
        redis_client = redis.Redis(host="127.0.0.1", port=a.redis_port)
        redis_client.ping()

    out = {"py_next_ns": [], "py_batch_1000_ns_per_id": [], "py_uuid4_ns": [],
           "py_time_ns_ns": []}
    if redis_client:
        out["py_redis_incr_ns"] = []
    batch_calls = max(2, a.calls // 100)  # 1000 IDs each, two per burst
    with snowflake.Client("bench", runtime_dir=a.runtime_dir, timeout=5) as client:
        take, batch = client.next, client.next_batch
        # Warm-up: the first take maps the counter lane, and the daemon's fill target
        # follows demand, so it learns the bursts' size first.
        per_call_ns(take, 50 * BURST, client=client)
        for _ in range(a.reps):
            # Alternated per repetition, so drift on a shared machine hits every figure.
            out["py_next_ns"].append(per_call_ns(take, a.calls, client=client))
            out["py_uuid4_ns"].append(per_call_ns(uuid.uuid4, a.calls))
            out["py_time_ns_ns"].append(per_call_ns(time.time_ns, a.calls))
            out["py_batch_1000_ns_per_id"].append(
                per_call_ns(lambda: batch(1000), batch_calls, burst=2, client=client,
                            ids_per_call=1000) / 1000)
            if redis_client:
                out["py_redis_incr_ns"].append(
                    per_call_ns(lambda: redis_client.incr("py_bench"), max(1, a.calls // 20),
                                burst=200))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
