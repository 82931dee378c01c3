'use strict';
// What the Node.js tests share: the package under test ($SNOWFLAKE_NODE_PACKAGE, the
// build's staged package directory; ctest sets it) and a real snowflaked of their own
// ($SNOWFLAKED) in a fresh temporary directory.

const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

function requiredEnv(name, what) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} must name ${what} (ctest sets it)`);
  return value;
}

const packageDir = requiredEnv('SNOWFLAKE_NODE_PACKAGE', "the build's bindings/node/package directory");
const snowflake = require(packageDir);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A snowflaked with its runtime, state and machine-lock directories in a fresh temporary
// directory; remove() stops it and removes the directory.
//
// Each start gets a notify socket of the harness's own in that directory, passed as
// NOTIFY_SOCKET as systemd does for a Type=notify service: waitReady() resolves once the
// daemon sent READY=1 on it, which it does once its ring serves (or, started out of
// service, once it waits for an operator: docs/daemon.md). Node cannot bind that
// socket itself (node:dgram offers udp4 and udp6 only), so the build's notify_listener
// ($SNOWFLAKE_NOTIFY_LISTENER, tests/support) binds it and exits once READY=1 came.
class Daemon {
  constructor() {
    this.binary = requiredEnv('SNOWFLAKED', 'the snowflaked binary');
    // Short: the control and notify sockets' paths must fit sockaddr_un.
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-node-'));
    this.runtimeDir = path.join(this.root, 'run');
    this.stateDir = path.join(this.root, 'state');
    this.logPath = path.join(this.root, 'daemon.log');
    this.process = null;
    this.exited = null;
    this.starts = 0;
    this.notifySocket = null; // this start's
    this.listener = null; // this start's notify_listener, until READY=1 came
    this.listenerExited = null;
  }

  // Spawns the daemon once its notify socket is bound, with `args` added to its command
  // line and `env` to its environment (after NOTIFY_SOCKET, so a test may point that
  // elsewhere). Does not wait for READY=1: see waitReady().
  async start({ args = [], env: more = {} } = {}) {
    fs.mkdirSync(this.runtimeDir, { recursive: true });
    fs.mkdirSync(this.stateDir, { recursive: true });
    await this.listen();
    const env = { ...process.env, SNOWFLAKE_HOST_LOCK_DIR: path.join(this.root, 'locks') };
    for (const name of ['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID', 'LISTEN_FDS', 'LISTEN_PID',
      'SNOWFLAKE_REMOTES', 'SNOWFLAKE_RUNTIME_DIR']) {
      delete env[name];
    }
    Object.assign(env, { NOTIFY_SOCKET: this.notifySocket }, more);
    const log = fs.openSync(this.logPath, 'a');
    this.process = childProcess.spawn(this.binary,
      ['--runtime-dir', this.runtimeDir, '--state-dir', this.stateDir, '--log-level', 'warn', ...args],
      { stdio: ['ignore', log, log], env });
    fs.closeSync(log);
    this.exited = new Promise((resolve) => this.process.once('exit', (code, signal) => resolve({ code, signal })));
    return this;
  }

  // Binds this start's notify socket through notify_listener: a fresh one per start, so a
  // READY=1 of a killed predecessor never counts for its successor. Its stdin stays open:
  // it ends when this process ends, never outliving the tests.
  async listen() {
    this.closeListener();
    this.starts += 1;
    this.notifySocket = path.join(this.root, `notify-${this.starts}`);
    const errorsPath = path.join(this.root, `notify-${this.starts}.err`);
    const errors = fs.openSync(errorsPath, 'a');
    const listener = childProcess.spawn(
      requiredEnv('SNOWFLAKE_NOTIFY_LISTENER', 'the notify_listener binary'), [this.notifySocket],
      { stdio: ['pipe', 'pipe', errors] });
    fs.closeSync(errors);
    this.listener = listener;
    this.listenerExited = new Promise((resolve) => listener.once('exit', (code, signal) => resolve({ code, signal })));
    // "listening" once bound; the end of its output on a failure.
    const first = await new Promise((resolve) => {
      let text = '';
      listener.stdout.setEncoding('utf8');
      listener.stdout.on('data', (chunk) => {
        text += chunk;
        if (text.includes('\n')) resolve(text.slice(0, text.indexOf('\n')));
      });
      listener.stdout.once('end', () => resolve(text));
    });
    if (first !== 'listening') {
      throw new Error(`notify_listener did not bind ${this.notifySocket}: ${fs.readFileSync(errorsPath, 'utf8')}`);
    }
  }

  closeListener() {
    if (this.listener !== null && this.listener.exitCode === null && this.listener.signalCode === null) {
      this.listener.kill('SIGKILL');
    }
    this.listener = null;
  }

  // Resolves once the daemon sent READY=1; rejects, with the daemon's output, if it exits
  // first or sends none within timeoutMs. Waits on both processes' exits and one timer at
  // once: no polling.
  async waitReady(timeoutMs = 30000) {
    if (this.listener === null) throw new Error('waitReady() without a start(), or twice for one start');
    let timer;
    const first = await Promise.race([
      this.listenerExited.then((exit) => ({ what: 'listener', exit })),
      this.exited.then((exit) => ({ what: 'daemon', exit })),
      new Promise((resolve) => { timer = setTimeout(() => resolve({ what: 'timeout' }), timeoutMs); }),
    ]);
    clearTimeout(timer);
    const described = (exit) => (exit.code !== null ? `${exit.code}` : `signal ${exit.signal}`);
    if (first.what === 'listener' && first.exit.code === 0) {
      this.listener = null; // READY=1 came; the listener is gone, later notifications refused
      return this;
    }
    if (first.what === 'daemon') {
      throw new Error(`snowflaked exited with ${described(first.exit)} before READY=1; its output:\n${this.log()}`);
    }
    if (first.what === 'timeout') {
      throw new Error(`snowflaked (pid ${this.process.pid}, running) sent no READY=1 within ${timeoutMs / 1000} s ` +
        `on ${this.notifySocket}; its output:\n${this.log()}`);
    }
    throw new Error(`notify_listener exited with ${described(first.exit)} before READY=1`);
  }

  // For a daemon that has served and may be held up (SIGSTOP, a pause): resolves once a
  // take succeeds; rejects after timeoutMs. A start waits with waitReady().
  async waitServing(timeoutMs = 30000) {
    const deadline = Date.now() + timeoutMs;
    let last;
    while (Date.now() < deadline) {
      if (this.process.exitCode !== null) throw new Error(`snowflaked exited with ${this.process.exitCode}: ${this.log()}`);
      try {
        const client = snowflake.open('readiness', { runtimeDir: this.runtimeDir });
        try {
          await client.nextAsync();
        } finally {
          client.close();
        }
        return this;
      } catch (e) {
        if (!(e instanceof snowflake.SnowflakeError)) throw e;
        last = e;
        await sleep(20);
      }
    }
    throw new Error(`snowflaked not serving after ${timeoutMs} ms (${last && last.message}): ${this.log()}`);
  }

  signal(name) {
    this.process.kill(name);
  }

  // SIGTERM (after SIGCONT, in case a test stopped it), then SIGKILL after timeoutMs.
  async stop(timeoutMs = 10000) {
    if (this.process === null || this.process.exitCode !== null || this.process.signalCode !== null) return;
    this.process.kill('SIGCONT');
    this.process.kill('SIGTERM');
    const timer = setTimeout(() => this.process.kill('SIGKILL'), timeoutMs);
    await this.exited;
    clearTimeout(timer);
  }

  log() {
    try {
      return fs.readFileSync(this.logPath, 'utf8').slice(-2000);
    } catch {
      return '(no log)';
    }
  }

  async remove() {
    await this.stop();
    this.closeListener();
    fs.rmSync(this.root, { recursive: true, force: true });
  }
}

async function startDaemon() {
  const daemon = new Daemon();
  try {
    await daemon.start();
    return await daemon.waitReady();
  } catch (e) {
    await daemon.remove();
    throw e;
  }
}

// Asserts that fn throws a SnowflakeError with `code` (and a message containing `phrase`).
function assertCode(fn, code, phrase = '') {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof snowflake.SnowflakeError, `expected a SnowflakeError, got ${e}`);
    assert.equal(e.code, code, e.message);
    assert.ok(e.message.includes(phrase), `'${e.message}' lacks '${phrase}'`);
    return true;
  });
}

async function assertRejectsCode(promise, code, phrase = '') {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof snowflake.SnowflakeError, `expected a SnowflakeError, got ${e}`);
    assert.equal(e.code, code, e.message);
    assert.ok(e.message.includes(phrase), `'${e.message}' lacks '${phrase}'`);
    return true;
  });
}

// Strictly increasing, as every take's IDs are.
function assertIncreasing(ids) {
  for (let i = 1; i < ids.length; i++) {
    if (!(ids[i] > ids[i - 1])) assert.fail(`IDs not strictly increasing at ${i}: ${ids[i - 1]} then ${ids[i]}`);
  }
}

module.exports = {
  snowflake, packageDir, Daemon, startDaemon, sleep, assertCode, assertRejectsCode, assertIncreasing,
};
