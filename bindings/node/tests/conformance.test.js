'use strict';
// The takers' conformance table (tests/conformance/cases.json) for the Node.js package:
// every row, from the fixtures conformance_fixture writes ($SNOWFLAKE_CONFORMANCE_FIXTURE;
// ctest sets it). The C++ client, Python, Go and Java run the same rows. Every row runs
// twice: with the sync call (next or nextBatch, syncWaitMs = the row's timeout_ms, default
// 100) and with the async one (nextAsync or nextBatchAsync on the worker thread,
// timeoutMs = the same), so both paths give the table's answer. For a row that expects an
// error, the error's action (error.action, from ERROR_ACTIONS) must be the vocabulary's for
// its code (conformance_fixture --vocabulary): the one rule for failing over.

const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test } = require('node:test');

const CASES = path.resolve(__dirname, '../../../tests/conformance/cases.json');
const TABLE = JSON.parse(fs.readFileSync(CASES, 'utf8'));

function fixture(name, directory, afterOpen) {
  const tool = process.env.SNOWFLAKE_CONFORMANCE_FIXTURE;
  assert.ok(tool, 'SNOWFLAKE_CONFORMANCE_FIXTURE must name the conformance_fixture binary');
  const args = ['--cases', CASES, '--case', name, '--dir', directory, '--live-pid', String(process.pid)];
  if (afterOpen) args.push('--after-open');
  const out = childProcess.execFileSync(tool, args, { encoding: 'utf8' });
  return JSON.parse(out).ids.map((i) => BigInt(i));
}

// The expect keys this runner checks: a row whose expect has another fails rather than
// pass with the check left out.
const KNOWN_EXPECT_KEYS = new Set(['stage', 'code', 'message_contains', 'count', 'ids', 'refill_hint',
  'refill_request_min', 'waiters', 'uncounted', 'service_taken']);
const REGION_KEYS = ['refill_hint', 'refill_request_min', 'waiters', 'uncounted', 'service_taken'];

// {code: action} of the library's error codes, from the C++ tables.
let actions;
function vocabularyActions() {
  if (!actions) {
    const tool = process.env.SNOWFLAKE_CONFORMANCE_FIXTURE;
    const vocabulary = JSON.parse(childProcess.execFileSync(tool, ['--vocabulary'], { encoding: 'utf8' }));
    actions = Object.fromEntries(vocabulary.errors.map((code, i) => [code, vocabulary.error_actions[i]]));
  }
  return actions;
}

// The region's words (refill, waiters, counts), read by the fixture attached to the row's
// socket as a taker attaches (the region is a memfd: no file to read).
function regionWords(directory) {
  const tool = process.env.SNOWFLAKE_CONFORMANCE_FIXTURE;
  return JSON.parse(childProcess.execFileSync(tool, ['--region-words', '--dir', directory], { encoding: 'utf8' }));
}

// Opens, applies after_open, takes with the sync or the async call (`mode`), closes:
// {stage, code, message, ids, published}.
async function run(row, directory, mode) {
  const snowflake = require(process.env.SNOWFLAKE_NODE_PACKAGE);
  let published = fixture(row.name, directory, false);
  const take = row.take;
  const waitMs = take.timeout_ms ?? 100;
  let client;
  try {
    client = snowflake.open('conformance', { runtimeDir: directory, remotes: [], syncWaitMs: waitMs, timeoutMs: waitMs });
  } catch (e) {
    if (!(e instanceof snowflake.SnowflakeError)) throw e;
    return { stage: 'open', code: e.code, message: e.message, ids: [], published, error: e };
  }
  try {
    if (row.after_open) {
      const again = fixture(row.name, directory, true);
      if (again.length > 0) published = again;
    }
    let ids;
    try {
      if (mode === 'async') {
        ids = take.call === 'next' ? [await client.nextAsync()] : Array.from(await client.nextBatchAsync(take.count));
      } else {
        ids = take.call === 'next' ? [client.next()] : Array.from(client.nextBatch(take.count));
      }
    } catch (e) {
      if (!(e instanceof snowflake.SnowflakeError)) throw e;
      return { stage: 'take', code: e.code, message: e.message, ids: [], published, error: e };
    }
    return { stage: 'take', code: 'ok', message: '', ids, published };
  } finally {
    client.close();
  }
}

for (const [row, mode] of TABLE.cases.flatMap((r) => [[r, 'sync'], [r, 'async']])) {
  test(`${row.name} (${mode})`, async () => {
    const expect = (row.expect_by_taker || {}).node || row.expect;
    if ((row.expect_by_taker || {}).node) {
      console.log(`${row.name}: this taker's own expectation, because: ${row.why}`);
    }
    const unknown = Object.keys(expect).filter((key) => !KNOWN_EXPECT_KEYS.has(key));
    assert.deepEqual(unknown, [], `expect keys ${unknown} are not checked by this runner: add their checks`);
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-conf-'));
    try {
      const got = await run(row, directory, mode);
      assert.deepEqual([got.stage, got.code], [expect.stage, expect.code], got.message);
      if (expect.code !== 'ok') {
        const action = vocabularyActions()[expect.code];
        assert.ok(action, `${expect.code} is no library error code of the vocabulary`);
        assert.equal(got.error.action, action, `${expect.code}: the error's action`);
        const { ERROR_ACTIONS } = require(process.env.SNOWFLAKE_NODE_PACKAGE);
        assert.equal(ERROR_ACTIONS[expect.code], action, `${expect.code}: ERROR_ACTIONS`);
      }
      assert.ok(got.message.includes(expect.message_contains || ''), `'${got.message}' lacks '${expect.message_contains}'`);
      if ('count' in expect) assert.equal(got.ids.length, expect.count);
      if (expect.ids === 'published') assert.deepEqual(got.ids, got.published.slice(0, got.ids.length));
      if (REGION_KEYS.some((key) => key in expect)) {
        const words = regionWords(directory);
        if ('refill_hint' in expect) assert.equal(words.refill_hint, expect.refill_hint);
        if ('refill_request_min' in expect) assert.ok(words.refill_request >= expect.refill_request_min);
        if ('waiters' in expect) assert.equal(words.waiters, expect.waiters, 'waiters');
        if ('uncounted' in expect) assert.equal(words.uncounted, expect.uncounted, 'uncounted');
        if ('service_taken' in expect) {
          assert.deepEqual(words.service_taken, expect.service_taken, 'IDs taken per service');
        }
      }
    } finally {
      fs.rmSync(directory, { recursive: true, force: true });
    }
  });
}
