"""The Python taker of the mixed-takers stress (bindings/go/mixed_test.go).

    mixed_taker.py RUNTIME_DIR OUT_FILE COUNT SEED

Takes COUNT IDs with one Client ("mixed"), mixing next() and next_batch() of 1..1000
(seeded), and appends them in the order taken to OUT_FILE (little-endian u64) at least
every 1024 IDs, so a SIGKILL loses at most the unwritten tail. A daemon that cannot serve
for a moment is retried, as a service would, for up to 30 s in all. Exit 0, or 1 with the
error.
"""

import array
import random
import sys
import time

import snowflake


def main():
    runtime_dir, out_path, count, seed = sys.argv[1:5]
    count = int(count)
    rng = random.Random(int(seed))
    pending = array.array("Q")
    taken = 0
    retries = 0
    with snowflake.Client("mixed", runtime_dir=runtime_dir, remotes=[], timeout=10) as client, \
            open(out_path, "wb", buffering=0) as out:
        while taken < count:
            try:
                if rng.random() < 0.5:
                    pending.append(client.next())
                    taken += 1
                else:
                    ids = client.next_batch(min(rng.randint(1, 1000), count - taken))
                    pending.extend(ids)
                    taken += len(ids)
            except snowflake.UnavailableError:
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
