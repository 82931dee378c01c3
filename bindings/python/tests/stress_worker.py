"""One process of test_stress: `threads` threads share one Client and each takes `count`
IDs, mixing next() and next_batch() of random sizes (seeded), then writes its IDs in the
order taken to <out>.<thread> (native uint64)."""

import random
import sys
import threading

import snowflake


def main():
    runtime_dir, out, threads, count, seed = sys.argv[1:6]
    threads, count, seed = int(threads), int(count), int(seed)
    errors = []
    with snowflake.Client("stress", runtime_dir=runtime_dir, timeout=10) as client:
        def take(index):
            rng = random.Random(seed * 1000 + index)
            ids = []
            try:
                while len(ids) < count:
                    if rng.random() < 0.5:
                        ids.append(client.next())
                    else:
                        ids.extend(client.next_batch(min(rng.randint(1, 1000), count - len(ids))))
            except snowflake.Error as e:
                errors.append(f"thread {index}: {e.code}: {e.message}")
            with open(f"{out}.{index}", "wb") as f:
                f.write(snowflake_array(ids).tobytes())

        workers = [threading.Thread(target=take, args=(i,)) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    if errors:
        sys.exit("\n".join(errors))


def snowflake_array(ids):
    import array
    return array.array("Q", ids)


if __name__ == "__main__":
    main()
