'use strict';
// Property: every ID is handed out at most once across processes and threads, and each
// thread sees its IDs strictly increasing. 2 processes x 4 worker threads take 1 M IDs
// together (bounded by count and by time: each thread stops at its share or its deadline;
// the run must reach the count), mixing next, nextBatch, nextBatchInto and nextBatchAsync.

const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');

const PROCESSES = 2;
const THREADS = 4;
const TOTAL = 1_000_000;
const DEADLINE_MS = 60_000;
const TRANSIENT = new Set(['ring_empty', 'timed_out', 'daemon_not_heartbeating', 'daemon_paused']);

// A worker thread: takes its share into a shared buffer, checking its own order.
async function takeShare({ packageDir, runtimeDir, share, buffer, seed }) {
  const snowflake = require(packageDir);
  const ids = new BigUint64Array(buffer);
  const scratch = new BigUint64Array(2000);  // nextBatchInto's, reused
  const client = snowflake.open('stress', { runtimeDir, syncWaitMs: 50, timeoutMs: 1000 });
  const deadline = Date.now() + DEADLINE_MS;
  let got = 0;
  let outages = 0;
  let round = seed;
  while (got < share && Date.now() < deadline) {
    round = (round * 1103515245 + 12345) % 2147483648;
    const kind = round % 4;
    const want = Math.min(share - got, 1 + (round % 2000));
    let batch;
    try {
      if (kind === 0) batch = [client.next()];
      else if (kind === 1) batch = client.nextBatch(want);
      else if (kind === 2)
        batch = scratch.subarray(0, client.nextBatchInto(scratch.subarray(0, want)));
      else batch = await client.nextBatchAsync(want);
    } catch (e) {
      // A loaded machine may starve the daemon briefly: an outage is waited out (and
      // counted), anything else fails the run.
      if (!TRANSIENT.has(e.code)) throw e;
      outages++;
      await new Promise((resolve) => setTimeout(resolve, 1));
      continue;
    }
    for (const id of batch) {
      if (got > 0 && !(id > ids[got - 1])) throw new Error(`thread order broken: ${ids[got - 1]} then ${id}`);
      ids[got++] = id;
    }
  }
  client.close();
  if (outages > 0) console.error(`# stress: a thread waited out ${outages} outages`);
  return got;
}

if (!isMainThread) {
  takeShare(workerData).then((got) => parentPort.postMessage(got));
} else if (process.argv[2] === '--child') {
  // A taking process: THREADS workers, then every ID into the output file.
  const [, , , runtimeDir, out, share, seed] = process.argv;
  const perThread = Math.ceil(Number(share) / THREADS);
  const runs = [];
  const buffers = [];
  for (let t = 0; t < THREADS; t++) {
    const buffer = new SharedArrayBuffer(perThread * 8);
    buffers.push(buffer);
    runs.push(new Promise((resolve, reject) => {
      const w = new Worker(__filename, {
        workerData: {
          packageDir: process.env.SNOWFLAKE_NODE_PACKAGE, runtimeDir, share: perThread, buffer, seed: Number(seed) + t,
        },
      });
      w.once('message', resolve);
      w.once('error', reject);
    }));
  }
  Promise.all(runs).then((counts) => {
    const fd = fs.openSync(out, 'w');
    counts.forEach((n, t) => fs.writeSync(fd, new Uint8Array(buffers[t], 0, n * 8)));
    fs.closeSync(fd);
    console.log(JSON.stringify(counts));
  }, (e) => {
    console.error(e);
    process.exit(1);
  });
} else {
  const { startDaemon } = require('./support');

  test(`${PROCESSES} processes x ${THREADS} threads take ${TOTAL} IDs: no duplicate`, async () => {
    const daemon = await startDaemon();
    try {
      const seed = Number(process.env.SNOWFLAKE_STRESS_SEED || Date.now() % 100000);
      console.log(`# stress: ${PROCESSES} processes x ${THREADS} threads, ${TOTAL} IDs, seed ${seed}`);
      const started = Date.now();
      const children = [];
      for (let p = 0; p < PROCESSES; p++) {
        const out = path.join(daemon.root, `ids-${p}.bin`);
        children.push(new Promise((resolve, reject) => {
          const child = childProcess.spawn(process.execPath,
            [__filename, '--child', daemon.runtimeDir, out, String(TOTAL / PROCESSES), String(seed + 100 * p)],
            { stdio: ['ignore', 'pipe', 'inherit'] });
          let text = '';
          child.stdout.on('data', (d) => { text += d; });
          child.once('exit', (code) => (code === 0 ? resolve({ out, counts: JSON.parse(text) })
            : reject(new Error(`taker ${p} exited with ${code}`))));
        }));
      }
      const results = await Promise.all(children);
      const parts = results.map((r) => new BigUint64Array(fs.readFileSync(r.out).buffer.slice(0)));
      const all = new BigUint64Array(parts.reduce((n, a) => n + a.length, 0));
      let at = 0;
      for (const part of parts) { all.set(part, at); at += part.length; }
      all.sort();
      let duplicates = 0;
      for (let i = 1; i < all.length; i++) if (all[i] === all[i - 1]) duplicates++;
      console.log(`# stress: ${all.length} IDs in ${Date.now() - started} ms, per thread ${JSON.stringify(results.map((r) => r.counts))}, ${duplicates} duplicates`);
      assert.equal(all.length, TOTAL, 'the run did not reach its count before its deadline');
      assert.equal(duplicates, 0);
    } finally {
      await daemon.remove();
    }
  });
}
