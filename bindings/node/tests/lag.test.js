'use strict';
// The event loop is never held long by a sync call. Property: while the daemon refills
// under a burst, is frozen (SIGSTOP: its heartbeat stops) or has stopped, every sync call
// (next, nextString, nextBatch) returns or throws within its bound, syncWaitMs, plus a
// slack for scheduling noise on a loaded CI machine; and an async call waiting out a
// frozen daemon lets timers run meanwhile. Durations are measured per call and the
// largest is printed; the slack is far below any blocking wait (the async timeout, a
// heartbeat limit, an HTTP attempt) this guards against.

const assert = require('node:assert/strict');
const { after, before, test } = require('node:test');

const { snowflake, startDaemon } = require('./support');

// Below every blocking wait this guards against: the daemon's heartbeat limit (50 ms),
// an HTTP attempt (50 ms), the async timeouts here (300 ms) and a 200 ms syncWaitMs that a
// stopped daemon must not be waited for.
const SLACK_MS = 40;
// A frozen daemon's heartbeat stays fresh for up to its liveness limit: its emptied ring is
// ring_empty until then.
const ALLOWED_WHILE_FROZEN = new Set(['ring_empty', 'timed_out', 'daemon_not_heartbeating']);

let daemon;
before(async () => {
  daemon = await startDaemon();
});
after(async () => {
  if (daemon) await daemon.remove();
});

// Runs the sync calls for `forMs` (yielding to the loop between rounds), returning the
// largest duration in ms, the calls made and the error codes seen.
async function measure(client, forMs, allowed) {
  const codes = new Map();
  let max = 0;
  let calls = 0;
  const calls3 = [() => client.next(), () => client.nextString(), () => client.nextBatch(4096)];
  const end = Date.now() + forMs;
  while (Date.now() < end) {
    for (let i = 0; i < 50; i++) {
      const call = calls3[i % 3];
      const start = process.hrtime.bigint();
      try {
        call();
      } catch (e) {
        assert.ok(e instanceof snowflake.SnowflakeError, String(e));
        assert.ok(allowed.has(e.code), `unexpected ${e.code}: ${e.message}`);
        codes.set(e.code, (codes.get(e.code) || 0) + 1);
      }
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      if (ms > max) max = ms;
      calls++;
    }
    await new Promise(setImmediate);
  }
  return { max, calls, codes: Object.fromEntries(codes) };
}

test('burst: refills under load never hold a sync call past the bound', async () => {
  const bound = 1;
  const client = snowflake.open('lag', { runtimeDir: daemon.runtimeDir });
  try {
    const seen = await measure(client, 500, new Set(['ring_empty']));
    console.log(`# burst: ${seen.calls} calls, max ${seen.max.toFixed(3)} ms (bound ${bound} + ${SLACK_MS} ms), errors ${JSON.stringify(seen.codes)}`);
    assert.ok(seen.calls > 100, `only ${seen.calls} calls`);
    assert.ok(seen.max <= bound + SLACK_MS, `a sync call took ${seen.max} ms`);
  } finally {
    client.close();
  }
});

test('frozen daemon (SIGSTOP): sync calls fail within the bound; async waits let timers run', async () => {
  const bound = 5;
  const client = snowflake.open('lag', { runtimeDir: daemon.runtimeDir, syncWaitMs: bound, timeoutMs: 300 });
  try {
    client.next();
    daemon.signal('SIGSTOP');
    // Empty the ring at once: the daemon still looks healthy (its heartbeat is fresh) for
    // up to its liveness limit, so an async take now waits on a worker until then.
    for (let i = 0; i < 64; i++) {
      try {
        client.nextBatch(4096);
      } catch (e) {
        assert.ok(ALLOWED_WHILE_FROZEN.has(e.code), `${e.code}: ${e.message}`);
        break;
      }
    }
    let ticks = 0;
    let maxGap = 0;
    let last = process.hrtime.bigint();
    const timer = setInterval(() => {
      const now = process.hrtime.bigint();
      maxGap = Math.max(maxGap, Number(now - last) / 1e6);
      last = now;
      ticks++;
    }, 1);
    const start = Date.now();
    const taking = client.nextAsync();
    await assert.rejects(taking, (e) => ALLOWED_WHILE_FROZEN.has(e.code));
    const waited = Date.now() - start;
    clearInterval(timer);
    console.log(`# frozen async: rejected after ${waited} ms; a 1 ms timer ran ${ticks} times, largest gap ${maxGap.toFixed(3)} ms`);
    // The wait was on a worker: a 1 ms timer kept running meanwhile. A loop held for the
    // whole wait would have run it once at most.
    if (waited >= 20) assert.ok(ticks >= 3, `a 1 ms timer ran ${ticks} times in ${waited} ms`);
    assert.ok(maxGap <= 1 + SLACK_MS, `a timer was held ${maxGap} ms`);

    // Sync calls past the heartbeat limit.
    const seen = await measure(client, 700, ALLOWED_WHILE_FROZEN);
    console.log(`# frozen: ${seen.calls} calls, max ${seen.max.toFixed(3)} ms (bound ${bound} + ${SLACK_MS} ms), errors ${JSON.stringify(seen.codes)}`);
    assert.ok(seen.max <= bound + SLACK_MS, `a sync call took ${seen.max} ms`);
    assert.ok(seen.codes.daemon_not_heartbeating > 0, 'a frozen daemon is reported as not heartbeating');
  } finally {
    daemon.signal('SIGCONT');
    client.close();
  }
  await daemon.waitServing();
});

test('stopped daemon: sync calls fail at once with daemon_stopped', async () => {
  const bound = 1;
  const client = snowflake.open('lag', { runtimeDir: daemon.runtimeDir, syncWaitMs: 200 });
  const quick = snowflake.open('lag', { runtimeDir: daemon.runtimeDir });
  try {
    client.next();
    await daemon.stop();
    // Even with a 200 ms bound the stopped daemon is no wait: it fails at once.
    const wide = await measure(client, 200, new Set(['daemon_stopped']));
    const seen = await measure(quick, 200, new Set(['daemon_stopped']));
    console.log(`# stopped: ${seen.calls + wide.calls} calls, max ${Math.max(seen.max, wide.max).toFixed(3)} ms, errors ${JSON.stringify(seen.codes)} ${JSON.stringify(wide.codes)}`);
    assert.ok(seen.codes.daemon_stopped > 0 && wide.codes.daemon_stopped > 0);
    assert.ok(seen.max <= bound + SLACK_MS, `a sync call took ${seen.max} ms`);
    assert.ok(wide.max <= bound + SLACK_MS, `a sync call with syncWaitMs 200 took ${wide.max} ms`);
    await assert.rejects(client.nextAsync(), { code: 'daemon_stopped' });
  } finally {
    client.close();
    quick.close();
  }
});

