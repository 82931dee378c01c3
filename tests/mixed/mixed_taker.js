'use strict';
// The Node.js taker of the mixed-takers stress (bindings/go/mixed_test.go), with
// mixed_taker's arguments and output:
//
//   node mixed_taker.js RUNTIME_DIR OUT_FILE COUNT SEED SERVICE
//
// Takes COUNT IDs with one client of SERVICE ($SNOWFLAKE_NODE_PACKAGE names the package
// directory), mixing next() and nextBatchInto() of 1..1000 (seeded), and appends them in the
// order taken to OUT_FILE (little-endian u64) at least every 1024 IDs, each time with a
// write(2) of its own, so a SIGKILL loses at most the unwritten tail (under 2024 IDs).
// With $SNOWFLAKE_MIXED_START_FILE set, it opens the client and creates OUT_FILE, then
// waits (up to 60 s) for that file to exist before it takes: the driver starts every
// taker's takes at once, whatever its runtime's start-up. The
// sync calls wait up to 10 s on an empty ring (a process of its own: no event loop to keep
// free). A daemon that cannot serve for a moment is retried, as a service would, for 30000
// retries of 1 ms or more. Closes the client (its service slot is retired with its final
// count), then exits 0; or 1 with the error, 2 on bad arguments.

const fs = require('node:fs');

function main(argv) {
  if (argv.length !== 5 || !process.env.SNOWFLAKE_NODE_PACKAGE) {
    console.error('usage: SNOWFLAKE_NODE_PACKAGE=<bindings/node/package> node mixed_taker.js ' +
      'RUNTIME_DIR OUT_FILE COUNT SEED SERVICE');
    return 2;
  }
  const [runtimeDir, outPath, countText, seedText, service] = argv;
  if (!/^[0-9]+$/.test(countText) || !/^-?[0-9]+$/.test(seedText)) {
    console.error(`mixed_taker.js: COUNT and SEED must be decimal integers, not '${countText}' and '${seedText}'`);
    return 2;
  }
  const snowflake = require(process.env.SNOWFLAKE_NODE_PACKAGE);
  const count = Number(countText);
  // xorshift32 from the seed's low 32 bits (never 0).
  let state = Number(BigInt.asUintN(32, BigInt(seedText))) || 1;
  const random = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
  // 1023 IDs wait at most before a take, which adds at most 1000.
  const pending = new BigUint64Array(1023 + 1000);
  const bytes = new Uint8Array(pending.buffer);
  let waiting = 0;
  const client = snowflake.open(service, { runtimeDir, remotes: [], syncWaitMs: 10000, timeoutMs: 10000 });
  const out = fs.openSync(outPath, 'w');
  const flush = () => {
    for (let off = 0; off < waiting * 8;) off += fs.writeSync(out, bytes, off, waiting * 8 - off);
    waiting = 0;
  };
  const nap = new Int32Array(new SharedArrayBuffer(4));
  const start = process.env.SNOWFLAKE_MIXED_START_FILE;
  for (let waitedMs = 0; start && !fs.existsSync(start); waitedMs++) {
    if (waitedMs === 60000) {
      console.error(`mixed_taker.js: no start file ${start} after 60 s`);
      return 1;
    }
    Atomics.wait(nap, 0, 0, 1); // 1 ms
  }
  let retries = 0;
  for (let taken = 0; taken < count;) {
    try {
      if (random() % 2 === 0) {
        // Taken first: in `pending[waiting++] = client.next()` the index moves before the
        // call, and a call that throws would leave a stale slot counted.
        const id = client.next();
        pending[waiting++] = id;
        taken += 1;
      } else {
        const want = Math.min(1 + (random() % 1000), count - taken);
        const n = client.nextBatchInto(pending.subarray(waiting, waiting + want));
        waiting += n;
        taken += n;
      }
    } catch (e) {
      if (!(e instanceof snowflake.SnowflakeError) || e.action !== 'fail_over' || ++retries > 30000) throw e;
      Atomics.wait(nap, 0, 0, 1); // 1 ms
      continue;
    }
    if (waiting >= 1024) flush();
  }
  flush();
  fs.closeSync(out);
  client.close();
  return 0;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (e) {
  console.error(`mixed_taker.js: ${e.code ? `${e.code}: ` : ''}${e.message}`);
  process.exitCode = 1;
}
