'use strict';
// The tarball `npm pack` made in the build ($SNOWFLAKE_NODE_TARBALL) installs offline into
// an empty project and takes IDs from a real daemon there, with the TypeScript
// declarations beside it.

const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test } = require('node:test');

const { startDaemon } = require('./support');

test('npm install --offline of the tarball, then require it against the daemon', async () => {
  const tarball = process.env.SNOWFLAKE_NODE_TARBALL;
  assert.ok(tarball && fs.existsSync(tarball), `SNOWFLAKE_NODE_TARBALL (${tarball}) must name the built tarball`);
  const project = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-node-pack-'));
  const daemon = await startDaemon();
  try {
    fs.writeFileSync(path.join(project, 'package.json'), '{"name": "pack-check", "version": "1.0.0", "private": true}\n');
    const npm = process.env.SNOWFLAKE_NPM || 'npm';
    childProcess.execFileSync(npm, ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', tarball],
      { cwd: project, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, npm_config_cache: path.join(project, '.npm') } });
    const installed = path.join(project, 'node_modules', 'snowflaked');
    for (const file of ['package.json', 'index.js', 'index.d.ts', 'README.md', 'snowflake.node']) {
      assert.ok(fs.existsSync(path.join(installed, file)), `the package lacks ${file}`);
    }
    assert.ok(!fs.existsSync(path.join(installed, 'node_modules')), 'the package pulled dependencies');
    const script = `
      const snowflake = require('snowflaked');
      const client = snowflake.open('packed', { runtimeDir: process.argv[1], syncWaitMs: 200 });
      const id = client.next();
      client.nextAsync().then((next) => {
        console.log(JSON.stringify({ id: id.toString(), next: next.toString(), machine: snowflake.decode(id).machine }));
        client.close();
      });`;
    const out = childProcess.execFileSync(process.execPath, ['-e', script, daemon.runtimeDir],
      { cwd: project, encoding: 'utf8', env: { ...process.env, NODE_PATH: '' } });
    const got = JSON.parse(out);
    console.log(`# installed package took ${got.id} and ${got.next}`);
    assert.ok(BigInt(got.next) > BigInt(got.id));
    assert.ok(got.machine >= 0 && got.machine <= 1023);
  } finally {
    await daemon.remove();
    fs.rmSync(project, { recursive: true, force: true });
  }
});
