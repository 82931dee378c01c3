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
class Daemon {
  constructor() {
    this.binary = requiredEnv('SNOWFLAKED', 'the snowflaked binary');
    // Short: the control socket's path must fit sockaddr_un.
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-node-'));
    this.runtimeDir = path.join(this.root, 'run');
    this.stateDir = path.join(this.root, 'state');
    this.logPath = path.join(this.root, 'daemon.log');
    this.process = null;
    this.exited = null;
  }

  start() {
    fs.mkdirSync(this.runtimeDir, { recursive: true });
    fs.mkdirSync(this.stateDir, { recursive: true });
    const env = { ...process.env, SNOWFLAKE_HOST_LOCK_DIR: path.join(this.root, 'locks') };
    for (const name of ['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID', 'LISTEN_FDS', 'LISTEN_PID',
      'SNOWFLAKE_REMOTES', 'SNOWFLAKE_RUNTIME_DIR']) {
      delete env[name];
    }
    const log = fs.openSync(this.logPath, 'a');
    this.process = childProcess.spawn(this.binary,
      ['--runtime-dir', this.runtimeDir, '--state-dir', this.stateDir, '--log-level', 'warn'],
      { stdio: ['ignore', log, log], env });
    fs.closeSync(log);
    this.exited = new Promise((resolve) => this.process.once('exit', (code, signal) => resolve({ code, signal })));
    return this;
  }

  // Resolves once a take succeeds; rejects after timeoutMs.
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
    fs.rmSync(this.root, { recursive: true, force: true });
  }
}

async function startDaemon() {
  const daemon = new Daemon().start();
  try {
    return await daemon.waitServing();
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
