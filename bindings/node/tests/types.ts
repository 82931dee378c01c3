// The TypeScript declarations (index.d.ts) checked against how a TypeScript service uses the
// package: ctest's node_types compiles this file with `tsc --noEmit --strict`, and nothing
// runs it. Each call's type is required exactly (Equal), and every `@ts-expect-error` line
// is a misuse the declarations must refuse: one they accept fails the check ("Unused
// '@ts-expect-error' directive").

import * as snowflake from '../index';
import type { Bounds, Client, ClientOptions, Decoded, Status } from '../index';

type Equal<A, B> =
  (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
function exactly<T extends true>(): void {}

async function orders(): Promise<void> {
  const options: ClientOptions = {
    runtimeDir: '/run/snowflaked',
    remotes: ['10.0.0.2:8080', 'https://10.0.0.3:8443'],
    remotesCa: '/etc/ssl/fleet-ca.pem',
    remotesCert: '/etc/ssl/orders.pem',
    remotesKey: '/etc/ssl/orders-key.pem',
    maxHeartbeatAgeMs: 0,
    syncWaitMs: 1,
    timeoutMs: 100,
  };
  const client = snowflake.open('orders', options);
  snowflake.open('orders');
  snowflake.open('orders', { remotes: '10.0.0.2:8080,10.0.0.3:8080' });
  const opened = await snowflake.openAsync('orders', options);
  exactly<Equal<typeof opened, Client>>();

  const id = client.next();
  exactly<Equal<typeof id, bigint>>();
  exactly<Equal<ReturnType<Client['nextString']>, string>>();
  exactly<Equal<ReturnType<Client['nextBatch']>, BigUint64Array>>();
  const kept = new BigUint64Array(1000);
  const taken = client.nextBatchInto(kept.subarray(10));
  exactly<Equal<typeof taken, number>>();
  exactly<Equal<Awaited<ReturnType<Client['nextAsync']>>, bigint>>();
  exactly<Equal<Awaited<ReturnType<Client['nextBatchAsync']>>, BigUint64Array>>();

  const status: Status = await client.status();
  exactly<Equal<typeof status.lastIssuedId, bigint | null>>();
  exactly<Equal<typeof status.clientTaken, number>>();
  if (status.daemon !== null) {
    exactly<Equal<typeof status.daemon.services, Record<string, number>>>();
    exactly<Equal<typeof status.daemon.lastIssuedId, bigint | null>>();
  }

  const fields: Decoded = client.decode(id);
  exactly<Equal<typeof fields.time, Date>>();
  exactly<Equal<typeof fields.machine, number>>();
  snowflake.decode('122700452289576960');
  snowflake.decode(id, new Date('2026-01-01T00:00:00Z'));
  snowflake.decode(id, undefined, '65536-hosts');
  snowflake.bounds(0, 1, 0, '41/16/6');
  // @ts-expect-error a layout is its text, never its bits as numbers
  snowflake.decode(id, 0, 41);
  const range: Bounds = snowflake.bounds(new Date(Date.now() - 3_600_000), Date.now());
  exactly<Equal<typeof range.firstId, bigint>>();
  exactly<Equal<typeof snowflake.DEFAULT_EPOCH, Date>>();
  exactly<Equal<typeof snowflake.ERROR_CODES, readonly snowflake.ErrorCode[]>>();
  exactly<Equal<typeof snowflake.ERROR_ACTIONS, Readonly<Record<snowflake.ErrorCode, snowflake.ErrorAction>>>>();
  const retryHere: snowflake.ErrorAction = snowflake.ERROR_ACTIONS.ring_empty;
  const ringEmpty: snowflake.ErrorCode = 'ring_empty';
  // @ts-expect-error a typo is no error code of the library
  const typo: snowflake.ErrorCode = 'ring_emtpy';

  try {
    client.next();
  } catch (e) {
    if (e instanceof snowflake.SnowflakeError) {
      exactly<Equal<typeof e.code, snowflake.ErrorCode | (string & {})>>();
      if (e.code === 'ring_empty' && e.action === 'retry_here') client.next();  // take again
      exactly<Equal<typeof e.action, 'fail_over' | 'retry_here' | 'fix_the_call' | 'fix_the_host'>>();
    }
  }
  exactly<Equal<typeof client.closed, boolean>>();
  client.close();

  // Misuse the declarations refuse.
  // @ts-expect-error an ID is a bigint: a Number loses IDs past 2^53
  const lossy: number = client.next();
  // @ts-expect-error decode takes a bigint or its decimal text, never a Number
  snowflake.decode(122700452289576960);
  // @ts-expect-error nextBatchInto fills a BigUint64Array only
  client.nextBatchInto(new BigInt64Array(8));
  // @ts-expect-error nextBatch takes a count
  client.nextBatch();
  // @ts-expect-error an unknown option
  snowflake.open('orders', { timeout: 100 });
  // @ts-expect-error remotes are text
  snowflake.open('orders', { remotes: 8080 });
  // @ts-expect-error openAsync gives a promise of a Client, not a Client
  snowflake.openAsync('orders').next();
  // @ts-expect-error the service name is required
  snowflake.open();
  // @ts-expect-error a client comes from open(), not new
  new snowflake.Client();
  // @ts-expect-error closed is read-only
  client.closed = false;
  void lossy;
}

void orders;
