"""Two processes x 4 threads take 1 M IDs from one real daemon: no duplicate, and each
thread's IDs strictly increasing in the order it took them. Seeded (printed); bounded by
count and a timeout."""

import array
import os
import random
import subprocess
import sys
import time

PROCESSES = 2
THREADS = 4
TOTAL = 1_000_000


def test_two_processes_of_four_threads_take_a_million_unique_ordered_ids(daemon):
    seed = int(os.environ.get("SNOWFLAKE_STRESS_SEED", random.randrange(1 << 31)))
    print(f"seed {seed} (rerun with SNOWFLAKE_STRESS_SEED={seed})")
    per_thread = TOTAL // (PROCESSES * THREADS)
    worker = os.path.join(os.path.dirname(__file__), "stress_worker.py")
    started = time.monotonic()
    processes = [
        subprocess.Popen([sys.executable, worker, daemon.runtime_dir,
                          os.path.join(daemon.root, f"ids{p}"), str(THREADS), str(per_thread),
                          str(seed + p)])
        for p in range(PROCESSES)
    ]
    for p in processes:
        assert p.wait(timeout=240) == 0, f"a worker failed (seed {seed})"
    print(f"{TOTAL} IDs in {time.monotonic() - started:.2f} s")
    every = array.array("Q")
    for p in range(PROCESSES):
        for t in range(THREADS):
            ids = array.array("Q")
            with open(os.path.join(daemon.root, f"ids{p}.{t}"), "rb") as f:
                ids.frombytes(f.read())
            assert len(ids) == per_thread
            assert all(a < b for a, b in zip(ids, ids[1:])), (
                f"process {p} thread {t}: IDs out of order (seed {seed})")
            every.extend(ids)
    assert len(every) == TOTAL
    assert len(set(every)) == TOTAL, f"duplicate IDs (seed {seed})"
