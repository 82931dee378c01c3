"""The Python taker of the mixed-takers stress (bindings/go/mixed_test.go).

    mixed_taker.py RUNTIME_DIR OUT_FILE COUNT SEED SERVICE

Takes COUNT IDs with one Client of SERVICE, mixing next() and next_batch() of 1..1000
(seeded), and appends them in the order taken to OUT_FILE (little-endian u64) at least
every 1024 IDs, each time with a write(2) of its own (unbuffered), so a SIGKILL loses at
most the unwritten tail (under 2024 IDs). With $SNOWFLAKE_MIXED_START_FILE set, it opens
the client and creates OUT_FILE, then waits (up to 60 s) for that file to exist before it
takes: the driver starts every taker's takes at once, whatever its runtime's start-up. A daemon that cannot serve for a moment is
retried, as a service would, for 30000 retries of 1 ms or more. Closes the client (its
service slot is retired with its final count), then exits 0; or 1 with the error, 2 on bad
arguments.
"""

import array
import os
import random
import sys
import time

import snowflake


def main():
    if len(sys.argv) != 6:
        print("usage: mixed_taker.py RUNTIME_DIR OUT_FILE COUNT SEED SERVICE", file=sys.stderr)
        return 2
    runtime_dir, out_path, count, seed, service = sys.argv[1:6]
    try:
        count, seed = int(count), int(seed)
    except ValueError:
        print(f"mixed_taker.py: COUNT and SEED must be decimal integers, not {count!r} and "
              f"{seed!r}", file=sys.stderr)
        return 2
    rng = random.Random(seed)
    pending = array.array("Q")
    taken = 0
    retries = 0
    with snowflake.Client(service, runtime_dir=runtime_dir, remotes=[], timeout=10) as client, \
            open(out_path, "wb", buffering=0) as out:
        start = os.environ.get("SNOWFLAKE_MIXED_START_FILE")
        waited_ms = 0
        while start and not os.path.exists(start):
            if waited_ms == 60000:
                print(f"no start file {start} after 60 s", file=sys.stderr)
                return 1
            time.sleep(0.001)
            waited_ms += 1
        while taken < count:
            try:
                if rng.random() < 0.5:
                    pending.append(client.next())
                    taken += 1
                else:
                    ids = client.next_batch(min(rng.randint(1, 1000), count - taken))
                    pending.extend(ids)
                    taken += len(ids)
            except (snowflake.UnavailableError, snowflake.RingEmptyError):
                retries += 1
                if retries > 30000:
                    raise
                time.sleep(0.001)
                continue
            if len(pending) >= 1024:
                out.write(pending.tobytes())
                pending = array.array("Q")
        out.write(pending.tobytes())
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except snowflake.Error as e:
        print(f"{e.code}: {e.message}", file=sys.stderr)
        sys.exit(1)
