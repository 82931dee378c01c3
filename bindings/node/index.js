'use strict';
// snowflaked: unique, time-ordered 64-bit IDs from the local snowflaked's shared-memory
// ring, for Node.js. IDs are bigints (a Number loses IDs past 2^53); nextString() gives
// the decimal text that JSON and browsers carry.
//
//   const snowflake = require('snowflaked');
//   const client = snowflake.open('orders');
//   const id = client.next();                 // 1234567890123456789n
//   snowflake.decode(id).time;                // a Date
//   client.close();
//
// The sync calls never hold the event loop long: an empty ring is waited on at most
// syncWaitMs (default 1 ms), and a paused, stopped or dead daemon fails at once. A ring
// still empty then fails with 'ring_empty', whose action is 'retry_here': the daemon is
// alive and refilling (a hung one is 'daemon_not_heartbeating'), so take again, here; it
// is no reason to fail over.
// nextAsync() and nextBatchAsync() wait on a worker thread with the full timeoutMs.
// Every error of the library is a SnowflakeError whose `code` is the library's
// ('daemon_paused', ...) and whose `action` says what to do ('fail_over', ...); a wrong
// argument's type is a TypeError, its range a RangeError.

const native = require('./snowflake.node');

// What a caller does about each code, from the C ABI (sf_status_action): 'fail_over'
// (this host's daemon cannot serve now, another may), 'retry_here', 'fix_the_call' or
// 'fix_the_host'. The one failover rule, the same in every language.
const ERROR_ACTIONS = (() => {
  const codes = native._errorCodes();
  const actions = native._errorActions();
  return Object.freeze(Object.fromEntries(codes.map((code, i) => [code, actions[i]])));
})();

class SnowflakeError extends Error {
  constructor(message, code) {
    super(message);
    this.name = 'SnowflakeError';
    this.code = code;
    // A code this library does not know: nothing makes a retry or another daemon the answer.
    this.action = ERROR_ACTIONS[code] ?? 'fix_the_host';
  }
}
native._init(SnowflakeError);

const DEFAULT_EPOCH = new Date(native.DEFAULT_EPOCH_UNIX_MS);
// 2^32 - 1: the widest wait the library takes, in ms.
const MAX_MS = 0xffffffff;

function invalid(message) {
  return new SnowflakeError(message, 'invalid_argument');
}

function milliseconds(options, name, fallback) {
  const value = options[name];
  if (value === undefined) return fallback;
  if (typeof value !== 'number') {
    throw new TypeError(`${name} must be a number of milliseconds, not ${typeof value}`);
  }
  if (!Number.isInteger(value) || value < 0 || value > MAX_MS) {
    throw new RangeError(`${name} must be a whole number of milliseconds from 0 to ${MAX_MS}, not ${value}`);
  }
  return value;
}

function text(options, name) {
  const value = options[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new TypeError(`${name} must be a string, not ${typeof value}`);
  if (value === '') throw invalid(`${name} is empty: give a path, or leave it out`);
  return value;
}

const OPTION_NAMES = new Set(['runtimeDir', 'remotes', 'remotesCa', 'remotesCert', 'remotesKey',
  'maxHeartbeatAgeMs', 'syncWaitMs', 'timeoutMs']);

// The options as the addon takes them, or a TypeError/RangeError/SnowflakeError saying
// which one is wrong.
function nativeOptions(options) {
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`options must be an object, not ${Array.isArray(options) ? 'an array' : typeof options}`);
  }
  for (const name of Object.keys(options)) {
    if (!OPTION_NAMES.has(name)) {
      throw new TypeError(`unknown option '${name}': the options are ${[...OPTION_NAMES].join(', ')}`);
    }
  }
  const out = {
    runtimeDir: text(options, 'runtimeDir'),
    remotesCa: text(options, 'remotesCa'),
    remotesCert: text(options, 'remotesCert'),
    remotesKey: text(options, 'remotesKey'),
    maxHeartbeatAgeMs: milliseconds(options, 'maxHeartbeatAgeMs', 0),
    syncWaitMs: milliseconds(options, 'syncWaitMs', 1),
    timeoutMs: milliseconds(options, 'timeoutMs', 100),
  };
  const remotes = options.remotes;
  if (typeof remotes === 'string') {
    out.remotes = remotes;
  } else if (Array.isArray(remotes)) {
    for (const r of remotes) {
      if (typeof r !== 'string') throw new TypeError(`remotes must hold strings ("host:port"), not ${typeof r}`);
      if (r.includes(',')) throw invalid(`remote '${r}' holds a comma: give one address per entry`);
    }
    out.remotes = remotes.join(',');
  } else if (remotes !== undefined && remotes !== null) {
    throw new TypeError(`remotes must be a string or an array of strings, not ${typeof remotes}`);
  }
  return out;
}

function serviceName(service) {
  if (typeof service !== 'string') {
    throw new SnowflakeError(`the service name is a string, not ${typeof service}`, 'invalid_service_name');
  }
  return service;
}

// The sync calls as the client's own functions: the class's methods of the same names
// cost about 100 ns more per call (the addon's comment on Bind says why).
function withSyncCalls(client) {
  for (const [name, call] of Object.entries(client._syncCalls())) {
    Object.defineProperty(client, name, { value: call });
  }
  return client;
}

// Opens the local daemon's ring for `service` (1-63 characters of [a-z0-9._-]), on the
// calling thread: a few system calls, but a refusal's message looks the segment's group up
// (NSS, which may ask the network). A server's event loop that must never wait uses
// openAsync().
function open(service, options) {
  return withSyncCalls(new native.Client(serviceName(service), nativeOptions(options)));
}

// open() on a worker thread: a promise of the Client, or rejected with open()'s error. A
// bad argument still throws at once.
function openAsync(service, options) {
  const client = new native.Client(serviceName(service), nativeOptions(options), true);
  return client._openAsync().then(() => withSyncCalls(client), (error) => {
    client.close();
    throw error;
  });
}

function camel(key) {
  return key.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
}

// The status object's keys in camelCase (service names, the keys of `services`, are data
// and kept); last_issued_id, a decimal string there, as a bigint.
function statusObject(value, inServices) {
  if (Array.isArray(value)) return value.map((v) => statusObject(v, false));
  if (value === null || typeof value !== 'object') return value;
  const out = {};
  for (const [key, v] of Object.entries(value)) {
    if (inServices) {
      out[key] = v;
    } else if (key === 'last_issued_id') {
      out.lastIssuedId = v === null ? null : BigInt(v);
    } else {
      out[camel(key)] = statusObject(v, key === 'services');
    }
  }
  return out;
}

// The object `snowflakectl status --json` prints for this client's runtime directory
// (the segment's view and, under `daemon`, the daemon's answer on its control socket,
// asked on a worker thread), plus clientTaken: the IDs this client took.
native.Client.prototype.status = async function status() {
  return statusObject(JSON.parse(await this._statusJson()), false);
};

// The client's daemon's layout (its segment's epoch and bits), never the default's.
native.Client.prototype.decode = function decodeWithClientLayout(id) {
  return decoded(this._decodeId(checkId(id)));
};

function checkId(id) {
  if (typeof id === 'bigint') return id;
  if (typeof id === 'string') {
    if (!/^[0-9]{1,19}$/.test(id)) throw invalid(`'${id}' is no ID: an ID text is 1 to 19 decimal digits`);
    return BigInt(id);
  }
  if (typeof id === 'number') {
    if (!Number.isSafeInteger(id) || id < 0) {
      throw new RangeError(`${id} is no ID as a number: IDs past 2^53 lose digits in a Number; pass a bigint`);
    }
    return BigInt(id);
  }
  throw new TypeError(`an ID is a bigint (or its decimal string), not ${typeof id}`);
}

function unixMs(value, what) {
  if (value instanceof Date) {
    const ms = value.getTime();
    if (Number.isNaN(ms)) throw invalid(`${what} is an invalid Date`);
    return ms;
  }
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new RangeError(`${what} must be whole Unix milliseconds, not ${value}`);
    return value;
  }
  if (typeof value === 'string') return native._parseTime(value);
  throw new TypeError(`${what} must be a Date, Unix milliseconds or an RFC 3339 text, not ${typeof value}`);
}

function epochMs(epoch) {
  return epoch === undefined ? native.DEFAULT_EPOCH_UNIX_MS : unixMs(epoch, 'epoch');
}

function decoded([ms, machine, sequence]) {
  return { time: new Date(ms), machine, sequence };
}

// The layout text for the addon: the daemons' [id] layout, a preset or "T/M/S" (undefined:
// 'default', 41/10/12).
function layoutText(layout) {
  if (layout === undefined) return 'default';
  if (typeof layout !== 'string') {
    throw new TypeError(`layout must be a preset such as '65536-hosts' or bits such as '41/16/6', not ${typeof layout}`);
  }
  return layout;
}

// The time, machine and sequence of an ID (bigint or decimal string). epoch: the daemons'
// [id] epoch (Date, Unix ms or text); default 2026-01-01T00:00:00Z. layout: the daemons'
// [id] layout, a preset ('default', '8192-hosts', '65536-hosts') or time/machine/sequence
// bits ('41/16/6'); default 'default'.
function decode(id, epoch, layout) {
  return decoded(native._decode(checkId(id), epochMs(epoch), layoutText(layout)));
}

// The smallest and largest IDs any machine makes from `from` to `to` (both included;
// Dates, Unix ms or texts), for `WHERE id BETWEEN firstId AND lastId`, with the epoch and
// layout as decode() takes them. A range partly outside what the epoch's IDs carry is cut
// to it (first/last say where); one wholly outside fails with code 'time_out_of_range'.
function bounds(from, to, epoch, layout) {
  const [firstId, lastId, first, last] = native._bounds(epochMs(epoch), unixMs(from, 'from'), unixMs(to, 'to'), layoutText(layout));
  return { firstId, lastId, first: new Date(first), last: new Date(last) };
}

module.exports = {
  open,
  openAsync,
  decode,
  bounds,
  SnowflakeError,
  DEFAULT_EPOCH,
  Client: native.Client,
  ERROR_CODES: Object.freeze(native._errorCodes()),
  ERROR_ACTIONS,
  _floor: native._floor,
};
