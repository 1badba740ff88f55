'use strict';
// The package as npm ships it: `npm pack` (whose prepack step copies the
// protos and the service config in), installed into an empty folder, required there as
// 'phasor-client' with no PHASOR_* variable set and no checkout around it,
// and calling a real server.
//
// It packs a copy of client/node laid out as in the repository
// (<tmp>/src/client/node beside <tmp>/src/proto and
// <tmp>/src/client/service_config.json), so packing never writes
// into the checkout while other tests read it. The folder installs with
// `npm ci` from a lockfile holding the versions client/node's
// package-lock.json pins: phasor_node's `npm ci` has put those tarballs in
// npm's cache, so this runs offline, and --prefer-offline fetches whatever
// the cache lacks.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Server } = require('./server');

const PACKAGE_DIR = path.resolve(__dirname, '..');
const REPOSITORY_PROTO_DIR = path.resolve(PACKAGE_DIR, '..', '..', 'proto');
const REPOSITORY_SERVICE_CONFIG = path.resolve(PACKAGE_DIR, '..', 'service_config.json');
const NPM = process.env.PHASOR_NPM || 'npm';
const NPM_TIMEOUT_MS = 180000;

// Runs a program; resolves {code, stdout, stderr} (code 0 on success).
function run(file, args, options) {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: NPM_TIMEOUT_MS, maxBuffer: 16 << 20, ...options },
      (error, stdout, stderr) => resolve({ code: error ? error.code || error.signal : 0, stdout, stderr }));
  });
}

// The environment of a program that knows nothing of this checkout.
function cleanEnv(extra = {}) {
  const env = Object.fromEntries(Object.entries(process.env)
    .filter(([key]) => !key.startsWith('PHASOR_') && key !== 'NODE_PATH'));
  return { ...env, ...extra };
}

// package.json and package-lock.json of an app that depends on the tarball,
// with phasor-client's dependencies at the versions client/node pins.
function writeApp(dir, tarball) {
  const manifest = JSON.parse(fs.readFileSync(path.join(PACKAGE_DIR, 'package.json'), 'utf8'));
  const pinned = JSON.parse(fs.readFileSync(path.join(PACKAGE_DIR, 'package-lock.json'), 'utf8'));
  const spec = `file:${path.relative(dir, tarball)}`;
  const packages = {
    '': { name: 'phasor-pack-test', dependencies: { 'phasor-client': spec } },
    'node_modules/phasor-client': {
      version: manifest.version, resolved: spec, license: manifest.license,
      dependencies: manifest.dependencies, engines: manifest.engines,
    },
  };
  for (const [where, entry] of Object.entries(pinned.packages)) {
    if (where.startsWith('node_modules/') && !entry.dev) packages[where] = entry;
  }
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(
    { name: 'phasor-pack-test', private: true, dependencies: { 'phasor-client': spec } }, null, 2));
  fs.writeFileSync(path.join(dir, 'package-lock.json'), JSON.stringify(
    { name: 'phasor-pack-test', lockfileVersion: 3, requires: true, packages }, null, 2));
}

// What the app does with the installed package; prints one JSON line.
const APP = `'use strict';
const { EncoderClient, toFloat32Array } = require('phasor-client');
(async () => {
  const client = new EncoderClient(process.argv[2], { deadlineMs: 10000 });
  try {
    const reply = await client.encodePositions({
      positions: { range: { count: 2 } }, spec: { positional: { sinusoidal: { dim: 4 } } },
    });
    let refused = null;
    try {
      await client.encodePositions({
        positions: { range: { count: 2 } }, spec: { positional: { sinusoidal: { dim: 4, bse: 100 } } },
      });
    } catch (error) {
      refused = error.fieldViolations.map((v) => v.field);
    }
    console.log(JSON.stringify({
      module: require.resolve('phasor-client'), protoDir: client.protoDir,
      serviceConfig: JSON.parse(require('phasor-client').DEFAULT_SERVICE_CONFIG),
      encodings: Array.from(toFloat32Array(reply.encodings)), refused,
    }));
  } finally {
    client.close();
  }
})().catch((error) => { console.error(error.message); process.exit(1); });
`;

test('npm pack ships the protos and the service config; the installed package calls a server', async (s) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'phasor-node-pack-'));
  s.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const source = path.join(tmp, 'src', 'client', 'node');
  fs.mkdirSync(path.join(tmp, 'src', 'client'), { recursive: true });
  fs.cpSync(REPOSITORY_PROTO_DIR, path.join(tmp, 'src', 'proto'), { recursive: true });
  fs.copyFileSync(REPOSITORY_SERVICE_CONFIG, path.join(tmp, 'src', 'client', 'service_config.json'));
  fs.cpSync(PACKAGE_DIR, source, {
    recursive: true,
    filter: (file) => {
      const relative = path.relative(PACKAGE_DIR, file);
      return !/^(node_modules|proto)(\/|$)/.test(relative) && !relative.endsWith('.tgz');
    },
  });

  // --ignore-scripts=false: the protos come from the prepack step, whatever
  // the user's npm configuration says.
  const pack = await run(NPM, ['pack', '--json', '--ignore-scripts=false', '--pack-destination', tmp],
    { cwd: source, env: cleanEnv() });
  assert.equal(pack.code, 0, `npm pack failed:\n${pack.stdout}\n${pack.stderr}`);
  const [{ filename, files }] = JSON.parse(pack.stdout);
  const shipped = files.map((file) => file.path).sort();
  const protos = fs.readdirSync(path.join(REPOSITORY_PROTO_DIR, 'phasor', 'v1'))
    .filter((name) => name.endsWith('.proto')).map((name) => `proto/phasor/v1/${name}`);
  for (const file of [...protos, 'service_config.json', 'lib/index.js', 'lib/client.js', 'lib/check-request.js',
    'lib/index.d.ts']) {
    assert.ok(shipped.includes(file), `${file} not in the tarball: ${shipped}`);
  }
  assert.deepEqual(shipped.filter((file) => /^(test|scripts|node_modules)\//.test(file)), []);
  assert.ok(!fs.existsSync(path.join(source, 'proto')), 'postpack leaves no proto/ copy behind');
  assert.ok(!fs.existsSync(path.join(source, 'service_config.json')), 'postpack leaves no service_config.json behind');

  const app = path.join(tmp, 'app');
  writeApp(app, path.join(tmp, filename));
  const install = await run(NPM, ['ci', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: app, env: cleanEnv() });
  assert.equal(install.code, 0, `npm ci failed:\n${install.stdout}\n${install.stderr}`);
  const installed = path.join(app, 'node_modules', 'phasor-client');
  for (const file of protos) {
    assert.deepEqual(fs.readFileSync(path.join(installed, file)),
      fs.readFileSync(path.join(REPOSITORY_PROTO_DIR, file.replace(/^proto\//, ''))), `${file} as in the repository`);
  }
  fs.writeFileSync(path.join(app, 'app.js'), APP);

  const server = await new Server().start();
  s.after(() => server.stop());
  const runApp = (env) => run(process.execPath, ['app.js', server.target], { cwd: app, env: cleanEnv(env) });

  const result = await runApp();
  assert.equal(result.code, 0, `the app failed:\n${result.stdout}\n${result.stderr}`);
  const reply = JSON.parse(result.stdout);
  assert.equal(reply.module, path.join(fs.realpathSync(installed), 'lib', 'index.js'));
  assert.equal(reply.protoDir, path.join(fs.realpathSync(installed), 'proto'));
  // The service config the installed package shipped, not the checkout's.
  assert.deepEqual(fs.readFileSync(path.join(installed, 'service_config.json')),
    fs.readFileSync(REPOSITORY_SERVICE_CONFIG));
  assert.deepEqual(reply.serviceConfig, JSON.parse(fs.readFileSync(REPOSITORY_SERVICE_CONFIG, 'utf8')));
  const want = [0, 1].flatMap((p) => [0, 1].flatMap((k) => [Math.sin(p * 10000 ** (-k / 2)), Math.cos(p * 10000 ** (-k / 2))]));
  reply.encodings.forEach((value, i) => assert.ok(Math.abs(value - want[i]) <= 2e-6, `encodings[${i}] ${value} vs ${want[i]}`));
  assert.deepEqual(reply.refused, ['spec.positional.sinusoidal.bse']);

  // Without the bundled protos: the error names what was looked at, and
  // PHASOR_PROTO_DIR is the way out.
  fs.rmSync(path.join(installed, 'proto'), { recursive: true });
  const missing = await runApp();
  assert.notEqual(missing.code, 0);
  assert.match(missing.stderr, /PHASOR_PROTO_DIR/);
  assert.ok(missing.stderr.includes(path.join(fs.realpathSync(installed), 'proto', 'phasor', 'v1', 'encoder.proto')),
    missing.stderr);
  const fallback = await runApp({ PHASOR_PROTO_DIR: REPOSITORY_PROTO_DIR });
  assert.equal(fallback.code, 0, `with PHASOR_PROTO_DIR:\n${fallback.stdout}\n${fallback.stderr}`);
  assert.equal(JSON.parse(fallback.stdout).protoDir, REPOSITORY_PROTO_DIR);
});
