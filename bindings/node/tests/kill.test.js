'use strict';
// SIGKILL of the daemon while Node takes: every call ends in an error (or a fresh ID from
// the ring's last IDs), never a hang, and never a duplicate of an ID taken before.

const assert = require('node:assert/strict');
const { test } = require('node:test');

const { snowflake, startDaemon } = require('./support');

const DEAD = new Set(['daemon_dead', 'daemon_not_heartbeating', 'timed_out']);
// A take that waits less than the heartbeat limit (the sync calls' 5 ms here) may still
// find the ring empty under the killed daemon's fresh heartbeat (its pid is looked at
// once the beat is 10 ms old): ring_empty, retried here, until the next take says
// daemon_dead. An async take that began before the kill may also have met the live
// daemon's empty ring.
const JUST_KILLED = new Set([...DEAD, 'ring_empty']);

test('SIGKILL while sync and async takes run: errors within a bound, no hang', async () => {
  const daemon = await startDaemon();
  const client = snowflake.open('kill', { runtimeDir: daemon.runtimeDir, syncWaitMs: 5, timeoutMs: 200 });
  try {
    const taken = [];
    // Async takers running across the kill.
    let stop = false;
    const asyncErrors = [];
    const takers = Array.from({ length: 4 }, async () => {
      while (!stop) {
        try {
          taken.push(...await client.nextBatchAsync(64));
        } catch (e) {
          assert.ok(e instanceof snowflake.SnowflakeError, String(e));
          asyncErrors.push(e.code);
          if (!JUST_KILLED.has(e.code)) throw e;
          if (asyncErrors.length > 3) return;
        }
      }
    });
    // Sync takes until the kill lands and a while after.
    const killAt = Date.now() + 200;
    let killed = false;
    let firstError = null;
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      if (!killed && Date.now() >= killAt) {
        daemon.signal('SIGKILL');
        await daemon.exited;
        killed = true;
      }
      try {
        taken.push(client.next());
      } catch (e) {
        assert.ok(e instanceof snowflake.SnowflakeError, String(e));
        if (!killed) {
          assert.equal(e.code, 'ring_empty', e.message);
        } else {
          firstError = e;
          if (e.code === 'daemon_dead') break;
          assert.ok(JUST_KILLED.has(e.code), `${e.code}: ${e.message}`);
        }
      }
      await new Promise(setImmediate);
    }
    stop = true;
    await Promise.all(takers);
    console.log(`# killed: ${taken.length} IDs taken, last sync error ${firstError && firstError.code}, async errors ${asyncErrors.join(',')}`);
    assert.ok(killed);
    assert.ok(firstError, 'no error after SIGKILL');
    assert.equal(firstError.code, 'daemon_dead', firstError.message);
    assert.equal(new Set(taken).size, taken.length, 'a duplicate ID');
    // After the kill every call fails at once.
    assert.throws(() => client.nextBatch(10), { code: 'daemon_dead' });
    await assert.rejects(client.nextAsync(), { code: 'daemon_dead' });
  } finally {
    client.close();
    await daemon.remove();
  }
});
