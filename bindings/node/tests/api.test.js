'use strict';
// Every call of the package and every error it gives, against a real snowflaked.

const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { after, before, describe, test } = require('node:test');

const {
  snowflake, startDaemon, Daemon, assertCode, assertRejectsCode, assertIncreasing,
} = require('./support');

// Sync calls get a wide bound here: these tests check results, not the event loop (see
// lag.test.js), and a refill on a busy CI machine can take more than the default 1 ms. So
// does the heartbeat limit: a daemon slowed by a sanitizer on a busy machine left its
// heartbeat 117 ms old, past the daemon's default limit of 50 ms.
const WIDE = { syncWaitMs: 200, timeoutMs: 1000, maxHeartbeatAgeMs: 10000 };

describe('with a daemon', () => {
  let daemon;
  let opts;
  before(async () => {
    daemon = await startDaemon();
    opts = { runtimeDir: daemon.runtimeDir, ...WIDE };
  });
  after(async () => {
    if (daemon) await daemon.remove();
  });

  test('openAsync opens on a worker thread: the same client as open', async () => {
    const pending = snowflake.openAsync('orders', opts);
    assert.ok(pending instanceof Promise);
    const client = await pending;
    try {
      const a = client.next();
      const b = await client.nextAsync();
      assertIncreasing([a, b, client.next()]);
      const { next } = client;  // its sync calls are its own functions, as open()'s are
      assert.ok(typeof next() === 'bigint');
    } finally {
      client.close();
    }
  });

  test('next gives increasing bigints, nextString their decimal text', () => {
    const client = snowflake.open('orders', opts);
    try {
      const a = client.next();
      const b = client.nextString();
      const c = client.next();
      assert.equal(typeof a, 'bigint');
      assert.match(b, /^[1-9][0-9]{0,18}$/);
      assertIncreasing([a, BigInt(b), c]);
      assert.ok(c < 2n ** 63n);
      // The sync calls are the client's own functions: they work detached from it.
      const { next } = client;
      assert.ok(next() > c);
      assert.equal(client.service, 'orders');
      assert.equal(client.closed, false);
    } finally {
      client.close();
    }
  });

  test('nextBatch gives 1 to n increasing IDs in a BigUint64Array', () => {
    const client = snowflake.open('orders', opts);
    try {
      let seen = [];
      for (let i = 0; i < 20; i++) {
        const ids = client.nextBatch(1000);
        assert.ok(ids instanceof BigUint64Array);
        assert.ok(ids.length >= 1 && ids.length <= 1000, `length ${ids.length}`);
        seen = seen.concat(Array.from(ids));
      }
      assertIncreasing(seen);
      assert.equal(client.nextBatch(1).length, 1);
    } finally {
      client.close();
    }
  });

  test('nextBatchInto fills the caller\'s array from index 0 and returns the count', () => {
    const client = snowflake.open('orders', opts);
    try {
      const into = new BigUint64Array(1000);
      let seen = [];
      for (let i = 0; i < 20; i++) {
        into.fill(0n);
        const n = client.nextBatchInto(into);
        assert.ok(Number.isInteger(n) && n >= 1 && n <= 1000, `count ${n}`);
        assert.ok(into.subarray(n).every((v) => v === 0n), 'nothing written past the count');
        seen = seen.concat(Array.from(into.subarray(0, n)));
      }
      // A subarray is an offset: its first element is the parent's index 3.
      const parent = new BigUint64Array(8);
      const m = client.nextBatchInto(parent.subarray(3, 5));
      assert.ok(m >= 1 && m <= 2, `count ${m}`);
      assert.deepEqual(Array.from(parent.subarray(0, 3)), [0n, 0n, 0n]);
      assert.ok(parent[3] > 0n);
      seen = seen.concat(Array.from(parent.subarray(3, 3 + m)));
      assertIncreasing(seen);
      assert.equal(client.nextBatchInto(new BigUint64Array(1)), 1);

      assert.throws(
          () => client.nextBatchInto(new BigInt64Array(4)),
          {name: 'TypeError', message: /into must be a BigUint64Array/});
      assert.throws(() => client.nextBatchInto([0n, 0n]), {name: 'TypeError'});
      assert.throws(() => client.nextBatchInto(), {name: 'TypeError'});
      assert.throws(
          () => client.nextBatchInto(new BigUint64Array(0)),
          {name: 'RangeError', message: /into must hold 1 to 16777216 IDs, not 0/});
    } finally {
      client.close();
    }
  });

  test('nextAsync and nextBatchAsync (n) wait on a worker', async () => {
    const client = snowflake.open('orders', opts);
    try {
      const one = await client.nextAsync();
      assert.equal(typeof one, 'bigint');
      const many = await client.nextBatchAsync(20000);
      assert.ok(many instanceof BigUint64Array);
      assert.equal(many.length, 20000);
      assertIncreasing([one, ...many]);
      const parallel = await Promise.all([client.nextBatchAsync(5000), client.nextBatchAsync(5000),
        client.nextAsync(), client.nextAsync()]);
      const all = new Set();
      for (const part of parallel) for (const id of (typeof part === 'bigint' ? [part] : part)) all.add(id);
      assert.equal(all.size, 10002);
    } finally {
      client.close();
    }
  });

  test('a nextBatchAsync cut short by an error returns the IDs it took', async () => {
    // timeoutMs 0: a batch larger than the ring takes what the ring holds, then finds it
    // empty (ring_empty). What it took comes back, never thrown away; a call that finds the
    // ring empty before taking anything rejects. A daemon of the test's own, stopped
    // (SIGSTOP) with IDs in its ring, makes the empty ring certain whatever the load:
    // nothing refills it, its IDs stay within the freshness bound (max_age_ms 60000, where
    // the default 0 leaves liveness_ms, 50 ms, and a loaded host aged them past that:
    // timed_out), and its heartbeat within the client's limit (ring_empty, not
    // not_heartbeating).
    const own = new Daemon();
    const config = path.join(own.root, 'fresh.toml');
    fs.writeFileSync(config, '[ring]\nmax_age_ms = 60000\n');
    try {
      await own.start({ args: ['--config', config] });
      await own.waitReady();
      const client = snowflake.open('orders',
        { runtimeDir: own.runtimeDir, timeoutMs: 0, maxHeartbeatAgeMs: 60000 });
      try {
        // A first take attaches (over the daemon's control socket, which a stopped daemon
        // does not answer); then the ring is filled again.
        let taken = 0;
        const deadline = Date.now() + 10000;
        while (taken === 0 || (await client.status()).ringFill === 0) {
          assert.ok(Date.now() < deadline, 'the ring stayed empty');
          taken += (await client.nextBatchAsync(1).catch(() => [])).length;
        }
        own.signal('SIGSTOP');
        let batch;
        let error;
        try {
          batch = await client.nextBatchAsync(1 << 20);
          error = await client.nextBatchAsync(1 << 20).then(
            (more) => assert.fail(`a stopped daemon's empty ring gave ${more.length} IDs`), (e) => e);
        } finally {
          own.signal('SIGCONT');
        }
        assert.ok(batch.length >= 1 && batch.length < 1 << 20, `a batch of ${batch.length}`);
        assertIncreasing([...batch]);
        assert.equal(error.code, 'ring_empty', error.message);
        assert.equal(error.action, 'retry_here');
        const status = await client.status();
        assert.equal(status.clientTaken, taken + batch.length, 'taken IDs were thrown away');
      } finally {
        client.close();
      }
    } finally {
      await own.remove();
    }
  });

  test('status is what snowflakectl status --json prints, in camelCase', async () => {
    const client = snowflake.open('orders', opts);
    try {
      const id = client.next();
      client.nextBatch(10);
      await client.nextBatchAsync(5);
      const status = await client.status();
      assert.equal(status.ok, true);
      assert.equal(status.state, 'serving');
      assert.equal(status.health, 'serving');
      assert.equal(status.runtimeDir, daemon.runtimeDir);
      assert.equal(status.pid, daemon.process.pid);
      assert.equal(status.machine, snowflake.decode(id).machine);
      assert.equal(status.epochUnixMs, snowflake.DEFAULT_EPOCH.getTime());
      assert.equal(status.layout, '41/10/12');
      assert.ok(status.ringCapacity > 0);
      assert.ok(status.clientTaken >= 7, `clientTaken ${status.clientTaken}`);
      assert.equal(status.daemonReachable, true);
      assert.equal(status.daemonError, null);
      // The daemon's answer on its control socket.
      assert.equal(status.daemon.state, 'serving');
      assert.equal(status.daemon.pid, daemon.process.pid);
      assert.equal(typeof status.daemon.lastIssuedId, 'bigint');
      assert.ok(status.daemon.publishedTotal > 0);
      assert.ok(Array.isArray(status.daemon.fronts));
      for (const object of [status, status.daemon]) {
        for (const key of Object.keys(object)) assert.doesNotMatch(key, /_/, `key ${key} is not camelCase`);
      }
    } finally {
      client.close();
    }
  });

  test('decode splits an ID; the client decodes with its daemon epoch', () => {
    const client = snowflake.open('orders', opts);
    try {
      const before = Date.now();
      const id = client.next();
      for (const fields of [snowflake.decode(id), snowflake.decode(id.toString()), client.decode(id)]) {
        assert.ok(fields.time instanceof Date);
        assert.ok(Math.abs(fields.time.getTime() - before) < 5000, `${fields.time} vs ${new Date(before)}`);
        assert.ok(fields.machine >= 0 && fields.machine <= 1023);
        assert.ok(fields.sequence >= 0 && fields.sequence <= 4095);
      }
      assert.deepEqual(snowflake.decode(0n), { time: snowflake.DEFAULT_EPOCH, machine: 0, sequence: 0 });
      assert.deepEqual(snowflake.decode((1n << 22n) | (5n << 12n) | 7n, 0),
        { time: new Date(1), machine: 5, sequence: 7 });
      assert.deepEqual(snowflake.decode(0n, '1970-01-01T00:00:00Z').time, new Date(0));
      assert.equal(snowflake.decode(4096).sequence, 0);
    } finally {
      client.close();
    }
  });

  test('bounds gives the IDs of a time range', () => {
    const client = snowflake.open('orders', opts);
    try {
      const now = new Date();
      const id = client.next();
      const b = snowflake.bounds(new Date(now.getTime() - 60000), new Date(now.getTime() + 60000));
      assert.equal(typeof b.firstId, 'bigint');
      assert.ok(b.firstId <= id && id <= b.lastId, `${b.firstId} <= ${id} <= ${b.lastId}`);
      const day = snowflake.bounds('2026-02-01T00:00:00Z', Date.parse('2026-02-01T23:59:59.999Z'));
      assert.deepEqual(day.first, new Date('2026-02-01T00:00:00Z'));
      assert.equal(snowflake.decode(day.firstId).time.getTime(), day.first.getTime());
      assert.equal(snowflake.decode(day.lastId).sequence, 4095);
      // Cut to the epoch.
      const cut = snowflake.bounds(new Date('2020-01-01'), new Date('2026-01-01T00:00:01Z'));
      assert.deepEqual(cut.first, snowflake.DEFAULT_EPOCH);
      assert.equal(cut.firstId, 0n);
    } finally {
      client.close();
    }
  });

  test('close is idempotent; every call after it fails with invalid_argument', async () => {
    const client = snowflake.open('orders', opts);
    client.next();
    client.close();
    client.close();
    assert.equal(client.closed, true);
    assertCode(() => client.next(), 'invalid_argument', 'closed');
    assertCode(() => client.nextString(), 'invalid_argument', 'closed');
    assertCode(() => client.nextBatch(3), 'invalid_argument', 'closed');
    assertCode(() => client.nextBatchInto(new BigUint64Array(3)), 'invalid_argument', 'closed');
    assertCode(() => client.decode(1n), 'invalid_argument', 'closed');
    assert.throws(() => client.nextAsync(), snowflake.SnowflakeError);
    assert.throws(() => client.nextBatchAsync(3), snowflake.SnowflakeError);
    await assert.rejects(client.status(), { code: 'invalid_argument' });
  });

  test('close while async takes are in flight: they finish, nothing is freed under them', async () => {
    const client = snowflake.open('orders', opts);
    const inFlight = [];
    for (let i = 0; i < 16; i++) inFlight.push(client.nextBatchAsync(50000), client.nextAsync());
    client.close();
    const results = await Promise.allSettled(inFlight);
    const ids = new Set();
    let taken = 0;
    for (const r of results) {
      if (r.status === 'rejected') {
        assert.ok(r.reason instanceof snowflake.SnowflakeError, String(r.reason));
        continue;
      }
      for (const id of (typeof r.value === 'bigint' ? [r.value] : r.value)) ids.add(id);
      taken += typeof r.value === 'bigint' ? 1 : r.value.length;
    }
    assert.equal(ids.size, taken, 'no duplicate among the in-flight takes');
    console.log(`# close with ${inFlight.length} takes in flight: ${taken} IDs, ${results.filter((r) => r.status === 'rejected').length} rejected`);
    if (global.gc) global.gc();
  });

  test('each service counts its own IDs; clients of a service share the ring', () => {
    const a = snowflake.open('orders', opts);
    const b = snowflake.open('invoices', opts);
    try {
      const ids = [];
      for (let i = 0; i < 1000; i++) ids.push(a.next(), b.next());
      assertIncreasing(ids);
    } finally {
      a.close();
      b.close();
    }
  });

  test('a sync call on an empty ring with syncWaitMs 0 fails with ring_empty at once, or takes', () => {
    // The heartbeat limit of WIDE: this test is about the empty ring.
    const client = snowflake.open('orders',
      { runtimeDir: daemon.runtimeDir, syncWaitMs: 0, maxHeartbeatAgeMs: 10000 });
    try {
      let empty = 0;
      for (let i = 0; i < 20000; i++) {
        try {
          client.next();
        } catch (e) {
          assert.equal(e.code, 'ring_empty', e.message);
          assert.equal(e.action, 'retry_here', e.message);
          empty++;
        }
      }
      console.log(`# syncWaitMs 0: ${empty} of 20000 takes found the ring empty`);
    } finally {
      client.close();
    }
  });
});

// The sync calls wait 1 ms by default (they block the event loop). A ring empty that long
// while the daemon heartbeats is the daemon refilling: 'ring_empty', action 'retry_here',
// never a code to fail over on. The segment is the conformance table's
// empty_ring_without_waiting row (an empty ring, a fresh heartbeat, the region served).
describe('an empty ring of a healthy daemon', () => {
  let directory;
  before(() => {
    directory = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-node-empty-'));
    const cases = path.resolve(__dirname, '../../../tests/conformance/cases.json');
    childProcess.execFileSync(process.env.SNOWFLAKE_CONFORMANCE_FIXTURE, ['--cases', cases,
      '--case', 'empty_ring_without_waiting', '--dir', directory, '--live-pid', String(process.pid)]);
  });
  after(() => fs.rmSync(directory, { recursive: true, force: true }));

  test('a sync take with the default syncWaitMs says ring_empty, to retry here', () => {
    const client = snowflake.open('empty', { runtimeDir: directory, remotes: [] });
    try {
      const calls = [() => client.next(), () => client.nextString(), () => client.nextBatch(8),
        () => client.nextBatchInto(new BigUint64Array(8))];
      for (const call of calls) {
        let error;
        try {
          call();
        } catch (e) {
          error = e;
        }
        assert.ok(error instanceof snowflake.SnowflakeError, `expected a SnowflakeError, got ${error}`);
        assert.equal(error.code, 'ring_empty', error.message);
        assert.equal(error.action, 'retry_here', error.message);
        assert.ok(error.message.includes('no ID within 1 ms'), error.message);
        assert.ok(error.message.endsWith('retry here'), error.message);
      }
    } finally {
      client.close();
    }
  });

  test('an async take waits its timeoutMs and says ring_empty too', async () => {
    const client = snowflake.open('empty', { runtimeDir: directory, remotes: [], timeoutMs: 20 });
    try {
      await assertRejectsCode(client.nextAsync(), 'ring_empty', 'no ID within 20 ms');
    } finally {
      client.close();
    }
  });
});

describe('bad arguments', () => {
  test('open: the service name', () => {
    assertCode(() => snowflake.open('Orders!'), 'invalid_service_name');
    assertCode(() => snowflake.open(''), 'invalid_service_name');
    assertCode(() => snowflake.open('x'.repeat(64)), 'invalid_service_name');
    assertCode(() => snowflake.open(42), 'invalid_service_name', 'string');
  });

  test('openAsync: a bad argument throws at once, as open() does', () => {
    assertCode(() => snowflake.openAsync('Orders!'), 'invalid_service_name');
    assertCode(() => snowflake.openAsync(42), 'invalid_service_name', 'string');
    assert.throws(() => snowflake.openAsync('orders', { syncWaitMS: 1 }), { name: 'TypeError', message: /unknown option 'syncWaitMS'/ });
    assertCode(() => snowflake.openAsync('orders', { runtimeDir: '' }), 'invalid_argument', 'runtimeDir is empty');
  });

  test('open: the options', () => {
    assert.throws(() => snowflake.open('orders', { syncWaitMS: 1 }), { name: 'TypeError', message: /unknown option 'syncWaitMS'/ });
    assert.throws(() => snowflake.open('orders', 'fast'), TypeError);
    assert.throws(() => snowflake.open('orders', []), TypeError);
    assert.throws(() => snowflake.open('orders', { syncWaitMs: '1' }), TypeError);
    assert.throws(() => snowflake.open('orders', { syncWaitMs: -1 }), RangeError);
    assert.throws(() => snowflake.open('orders', { timeoutMs: 1.5 }), RangeError);
    assert.throws(() => snowflake.open('orders', { timeoutMs: 2 ** 32 }), RangeError);
    assert.throws(() => snowflake.open('orders', { maxHeartbeatAgeMs: NaN }), RangeError);
    assert.throws(() => snowflake.open('orders', { runtimeDir: 5 }), TypeError);
    assert.throws(() => snowflake.open('orders', { remotes: [1] }), TypeError);
    assert.throws(() => snowflake.open('orders', { remotes: 5 }), TypeError);
    assertCode(() => snowflake.open('orders', { runtimeDir: '' }), 'invalid_argument', 'runtimeDir is empty');
    assertCode(() => snowflake.open('orders', { remotes: ['a:1,b:2'] }), 'invalid_argument', 'comma');
  });

  test('open: no daemon in the runtime dir', async () => {
    const d = new Daemon();
    try {
      assertCode(() => snowflake.open('orders', { runtimeDir: d.runtimeDir }), 'daemon_not_running');
      await assertRejectsCode(snowflake.openAsync('orders', { runtimeDir: d.runtimeDir }), 'daemon_not_running');
    } finally {
      require('node:fs').rmSync(d.root, { recursive: true, force: true });
    }
  });

  test('with remotes and no local daemon: open succeeds, sync calls say to use the async ones', async () => {
    const d = new Daemon();
    try {
      const client = snowflake.open('orders', { runtimeDir: d.runtimeDir, remotes: ['127.0.0.1:1'], timeoutMs: 50 });
      assertCode(() => client.next(), 'daemon_not_running', 'nextAsync()');
      // The remote refuses connections: an error naming it, never a hang.
      await assert.rejects(client.nextAsync(), (e) => {
        assert.ok(e instanceof snowflake.SnowflakeError, String(e));
        assert.match(e.message, /127\.0\.0\.1:1/);
        return true;
      });
      client.close();
      assertCode(() => snowflake.open('orders', { runtimeDir: d.runtimeDir, remotes: [] }), 'daemon_not_running');
    } finally {
      require('node:fs').rmSync(d.root, { recursive: true, force: true });
    }
  });

  test('status of a stopped daemon: the segment view, and why the socket did not answer', async () => {
    const daemon = await startDaemon();
    const client = snowflake.open('orders', { runtimeDir: daemon.runtimeDir });
    try {
      await daemon.stop();
      const status = await client.status();
      assert.equal(status.ok, false);
      assert.equal(status.state, 'stopped');
      assert.equal(status.daemonReachable, false);
      assert.equal(status.daemon, null);
      assert.match(status.daemonError, /control socket/);
    } finally {
      client.close();
      await daemon.remove();
    }
  });

  test('status of a client without a local daemon fails with daemon_not_running', async () => {
    const d = new Daemon();
    try {
      const client = snowflake.open('orders', { runtimeDir: d.runtimeDir, remotes: ['127.0.0.1:1'] });
      await assertRejectsCode(client.status(), 'daemon_not_running');
      client.close();
    } finally {
      require('node:fs').rmSync(d.root, { recursive: true, force: true });
    }
  });

  test('batch sizes', async () => {
    const daemon = await startDaemon();
    const client = snowflake.open('orders', { runtimeDir: daemon.runtimeDir });
    try {
      for (const n of [0, -1, 1.5, NaN, Infinity, 2 ** 24 + 1]) {
        assert.throws(() => client.nextBatch(n), RangeError, `nextBatch(${n})`);
        assert.throws(() => client.nextBatchAsync(n), RangeError, `nextBatchAsync(${n})`);
      }
      assert.throws(() => client.nextBatch('3'), TypeError);
      assert.throws(() => client.nextBatch(), TypeError);
      assert.throws(() => client.nextBatchAsync(3n), TypeError);
    } finally {
      client.close();
      await daemon.remove();
    }
  });

  test('decode: IDs', () => {
    assertCode(() => snowflake.decode(-1n), 'invalid_argument', 'no ID');
    assertCode(() => snowflake.decode(2n ** 63n), 'invalid_argument', 'no ID');
    assertCode(() => snowflake.decode('12a'), 'invalid_argument', 'decimal digits');
    assertCode(() => snowflake.decode('99999999999999999999'), 'invalid_argument');
    assert.throws(() => snowflake.decode(1.5), RangeError);
    assert.throws(() => snowflake.decode(2 ** 60), RangeError);
    assert.throws(() => snowflake.decode({}), TypeError);
    assert.throws(() => snowflake.decode(), TypeError);
    assertCode(() => snowflake.decode(1n, -1), 'invalid_argument', 'epoch');
  });

  // 41/16/6 (65536-hosts): the time bits start at bit 22 as in the default; the machine and
  // sequence split at bit 6.
  const wideId = (1n << 22n) | (65535n << 6n) | 63n;

  test('decode: in the layout given', () => {
    const epoch = snowflake.DEFAULT_EPOCH;
    for (const layout of ['65536-hosts', '41/16/6', 'time41-machine16-sequence6']) {
      assert.deepEqual(snowflake.decode(wideId, undefined, layout),
        { time: new Date(epoch.getTime() + 1), machine: 65535, sequence: 63 }, layout);
    }
    assert.deepEqual(snowflake.decode(wideId, 0, '8192-hosts'),
      { time: new Date(1), machine: 8191, sequence: 511 });
    assert.deepEqual(snowflake.decode(wideId), snowflake.decode(wideId, epoch, 'default'));
    assert.notEqual(snowflake.decode(wideId).machine, 65535, 'the default splits it elsewhere');
  });

  test('bounds: in the layout given', () => {
    const at = new Date('2026-03-01T00:00:00Z');
    const b = snowflake.bounds(at, at, undefined, '41/16/6');
    assert.deepEqual(snowflake.decode(b.lastId, undefined, '41/16/6'), { time: at, machine: 65535, sequence: 63 });
    assert.deepEqual(snowflake.decode(b.firstId, undefined, '41/16/6'), { time: at, machine: 0, sequence: 0 });
    const longer = snowflake.bounds(0, 2 ** 50, 0, '44/1/18');
    assert.equal(longer.last.getTime(), 2 ** 44 - 1, '44 time bits: 557 years');
    assert.equal(longer.lastId, (1n << 63n) - 1n);
  });

  test('decode and bounds: a bad layout says why', () => {
    for (const call of [(layout) => snowflake.decode(1n, undefined, layout),
      (layout) => snowflake.bounds(0, 1, 0, layout)]) {
      assertCode(() => call('41/17/6'), 'invalid_argument', 'layout "41/17/6" is not a layout');
      assertCode(() => call('41/17/6'), 'invalid_argument', '= 64 bits, not 63');
      assertCode(() => call('41/17/6'), 'invalid_argument', '"65536-hosts" = 41/16/6');
      assertCode(() => call('many-hosts'), 'invalid_argument', 'neither a preset');
      assert.throws(() => call(41), TypeError);
    }
  });

  test('bounds: times', () => {
    assertCode(() => snowflake.bounds(new Date('2026-03-01'), new Date('2026-02-01')), 'invalid_argument');
    assertCode(() => snowflake.bounds(new Date('2000-01-01'), new Date('2001-01-01')), 'time_out_of_range');
    assertCode(() => snowflake.bounds(new Date('nonsense'), new Date()), 'invalid_argument', 'invalid Date');
    assertCode(() => snowflake.bounds('yesterday', new Date()), 'invalid_argument');
    assert.throws(() => snowflake.bounds({}, new Date()), TypeError);
    assert.throws(() => snowflake.bounds(1.5, 2), RangeError);
  });

  test('SnowflakeError carries every code of the library', () => {
    assert.ok(snowflake.ERROR_CODES.includes('daemon_paused'));
    assert.equal(snowflake.ERROR_CODES.length, 17);
    assert.equal(snowflake.ERROR_CODES[16], 'ring_empty');
    const e = new snowflake.SnowflakeError('m', 'daemon_paused');
    assert.ok(e instanceof Error);
    assert.equal(e.name, 'SnowflakeError');
    assert.equal(e.code, 'daemon_paused');
    assert.equal(e.action, 'fail_over');
  });

  test('every code carries the C ABI\'s action: the one failover rule', () => {
    const failOver = snowflake.ERROR_CODES.filter((c) => snowflake.ERROR_ACTIONS[c] === 'fail_over');
    assert.deepEqual(failOver.sort(), ['daemon_dead', 'daemon_not_heartbeating', 'daemon_not_running',
      'daemon_out_of_service', 'daemon_paused', 'daemon_starting', 'daemon_stopped', 'timed_out']);
    for (const code of snowflake.ERROR_CODES) {
      assert.equal(new snowflake.SnowflakeError('m', code).action, snowflake.ERROR_ACTIONS[code], code);
    }
    assert.equal(snowflake.ERROR_ACTIONS.ring_empty, 'retry_here');
    assert.equal(new snowflake.SnowflakeError('m', 'ring_empty').action, 'retry_here');
    assert.equal(snowflake.ERROR_ACTIONS.invalid_argument, 'fix_the_call');
    assert.equal(snowflake.ERROR_ACTIONS.permission_denied, 'fix_the_host');
    assert.equal(new snowflake.SnowflakeError('m', 'from_a_newer_library').action, 'fix_the_host');
  });
});

// What the tests' harness (support.js) says when a daemon does not become ready.
describe('the daemon harness', () => {
  test('the harness reports a daemon that exits before READY=1, with its output', async () => {
    const d = new Daemon();
    try {
      const missing = require('node:path').join(d.root, 'missing.toml');
      await d.start({ args: ['--config', missing] });

      await assert.rejects(d.waitReady(), (e) => {
        assert.match(e.message, /snowflaked exited with 2 before READY=1/);
        assert.ok(e.message.includes(missing), e.message);
        return true;
      });
    } finally {
      await d.remove();
    }
  });

  test('the harness reports a daemon that sends no READY=1, with its output', async () => {
    const d = new Daemon();
    try {
      // NOTIFY_SOCKET where nobody listens: the daemon serves, and its READY=1 is lost.
      await d.start({ env: { NOTIFY_SOCKET: require('node:path').join(d.root, 'nobody') } });

      await assert.rejects(d.waitReady(2000), (e) => {
        assert.match(e.message, /running\) sent no READY=1 within 2 s/);
        assert.match(e.message, /its output:/);
        return true;
      });
    } finally {
      await d.remove();
    }
  });
});
