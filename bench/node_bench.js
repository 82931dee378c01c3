'use strict';
// The Node.js package's cost per take against a serving daemon (scripts/bench), beside
// what Node services write instead and the floor of any call into the addon, measured in
// the same run and loop: crypto.randomUUID() (node_uuid4_ns) and a bare N-API call into
// the same addon that does nothing (node_napi_floor_ns). The batch in two forms:
// nextBatch(1000), a fresh BigUint64Array per call (node_batch_1000_ns_per_id), and
// nextBatchInto() into one kept array (node_batch_into_1000_ns_per_id), beside what the
// first allocates alone, `new BigUint64Array(1000)` per ID (node_alloc_1000_ns_per_id).
//
// Method, as bench/py_bench.py's: every figure is a series of timed bursts of at most
// BURST calls with an untimed pause before each, for the daemon's takes until the ring
// holds the burst's IDs (read from the segment): a sustained series, or a burst larger
// than the ring's fill, would measure the layout's cap of 4,096 IDs per ms (244 ns per
// ID) instead of a take. The baselines run in the same bursts and pauses. A warm-up per
// figure (JIT tier-up, the counter lane's mapping, the daemon's fill target learning the
// bursts' size) is excluded: 50 bursts, and 500 for the batches, whose first 250 or so
// bursts of a process run at 20-35 ns per ID against 3-5 after (with 2,048 IDs in the
// ring before each, so not a refill). Time: process.hrtime.bigint() around each burst.
//
// Prints one JSON object: each key a list with one figure per repetition (ns per call,
// or per ID for the batch).
//
//   SNOWFLAKE_NODE_PACKAGE=build/release/bindings/node/package node bench/node_bench.js \
//       --runtime-dir DIR [--reps 5] [--calls 200000]

const crypto = require('node:crypto');
const path = require('node:path');

const BURST = 2000; // calls per timed burst (IDs: below the ring's 4,096)
const PAUSE_MS = 3; // untimed, before each burst: the daemon refills the ring meanwhile

function parseArgs(argv) {
  const out = { reps: 5, calls: 100000, runtimeDir: null };
  for (let i = 0; i < argv.length; i++) {
    const value = argv[i + 1];
    switch (argv[i]) {
      case '--runtime-dir': out.runtimeDir = value; i++; break;
      case '--reps': out.reps = Number(value); i++; break;
      case '--calls': out.calls = Number(value); i++; break;
      default: throw new Error(`unknown argument ${argv[i]} (--runtime-dir DIR [--reps N] [--calls N])`);
    }
  }
  if (!out.runtimeDir) throw new Error('--runtime-dir is required');
  if (!(out.reps >= 1 && out.calls >= 1)) throw new Error('--reps and --calls must be at least 1');
  return out;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// How many calls of idsPerCall IDs the ring holds now (1..burst), waiting up to 20 ms for
// burst calls' worth.
async function awaitFill(client, burst, idsPerCall) {
  const start = Date.now();
  for (;;) {
    const n = Math.floor(client._ringFill() / idsPerCall);
    const waited = Date.now() - start;
    if (n >= burst || (n > 0 && waited > 20)) return Math.min(n, burst);
    if (waited > 5000) return 1; // an empty ring the daemon does not top up: the take waits
    await new Promise(setImmediate);
  }
}

// ns per call of fn over `calls` calls in timed bursts, the same for every figure. A
// burst that meets an outage (a loaded daemon's brief pause) is run again; one longer
// than 5 s fails the benchmark.
async function perCallNs(fn, calls, { burst = BURST, client = null, idsPerCall = 1 } = {}) {
  let timed = 0n;
  let done = 0;
  let outageSince = null;
  while (done < calls) {
    await sleep(PAUSE_MS);
    const n = Math.min(client ? await awaitFill(client, burst, idsPerCall) : burst, calls - done);
    const start = process.hrtime.bigint();
    try {
      for (let i = 0; i < n; i++) fn();
    } catch (e) {
      if (e.name !== 'SnowflakeError') throw e;
      outageSince = outageSince || Date.now();
      if (Date.now() - outageSince > 5000) throw e;
      continue;
    }
    outageSince = null;
    timed += process.hrtime.bigint() - start;
    done += n;
  }
  return Number(timed) / calls;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const snowflake = require(path.resolve(process.env.SNOWFLAKE_NODE_PACKAGE || 'build/release/bindings/node/package'));
  const client = snowflake.open('bench', { runtimeDir: a.runtimeDir, syncWaitMs: 100 });
  const out = {
    node_next_ns: [],
    node_batch_1000_ns_per_id: [],
    node_batch_into_1000_ns_per_id: [],
    node_alloc_1000_ns_per_id: [],
    node_uuid4_ns: [],
    node_napi_floor_ns: [],
  };
  const take = () => client.next();
  const batch = () => client.nextBatch(1000);
  const kept = new BigUint64Array(1000);
  const batchInto = () => client.nextBatchInto(kept);
  let sink = null;
  const alloc = () => {
    sink = new BigUint64Array(1000);
  };
  const floor = snowflake._floor;
  const uuid = () => crypto.randomUUID();
  const batchCalls = Math.max(2, Math.floor(a.calls / 100)); // 1000 IDs each, two per burst
  // Warm-up, excluded.
  await perCallNs(take, 50 * BURST, { client });
  await perCallNs(batch, 1000, { burst: 2, client, idsPerCall: 1000 });
  await perCallNs(batchInto, 1000, { burst: 2, client, idsPerCall: 1000 });
  await perCallNs(alloc, 1000, { burst: 2 });
  await perCallNs(uuid, 50 * BURST);
  await perCallNs(floor, 50 * BURST);
  for (let r = 0; r < a.reps; r++) {
    // Alternated per repetition, so drift on a shared machine hits every figure.
    out.node_next_ns.push(await perCallNs(take, a.calls, { client }));
    out.node_uuid4_ns.push(await perCallNs(uuid, a.calls));
    out.node_napi_floor_ns.push(await perCallNs(floor, a.calls));
    out.node_batch_1000_ns_per_id.push(
      (await perCallNs(batch, batchCalls, { burst: 2, client, idsPerCall: 1000 })) / 1000);
    out.node_batch_into_1000_ns_per_id.push(
      (await perCallNs(batchInto, batchCalls, { burst: 2, client, idsPerCall: 1000 })) / 1000);
    out.node_alloc_1000_ns_per_id.push((await perCallNs(alloc, batchCalls, { burst: 2 })) / 1000);
  }
  client.close();
  if (sink === null || kept[999] === 0n) throw new Error('the batch loops did not run');
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(`node_bench: ${e.stack || e}`);
  process.exit(1);
});
