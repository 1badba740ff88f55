#!/usr/bin/env node
'use strict';
// npm pack's prepack step: copies the repository's proto/phasor/v1/*.proto,
// and every file they import from proto/, into this package's proto/, and
// the clients' default service config, client/service_config.json, into
// this package's root; package.json's `files` ships both and lib/client.js
// reads them first. The postpack step (`--clean`) removes the copies again,
// so a checkout keeps reading the repository's files themselves and never a
// stale copy. Runs offline: plain file copies, no dependencies.
//
// Imports of google/protobuf/*.proto are left to protobufjs, which bundles
// the well-known types; any other import missing from proto/ fails the pack.
//
//   node scripts/copy-protos.js           copy (prepack)
//   node scripts/copy-protos.js --clean   remove the copies (postpack)

const fs = require('fs');
const path = require('path');

const PACKAGE_DIR = path.resolve(__dirname, '..');
const TARGET = path.join(PACKAGE_DIR, 'proto');
// client/node/scripts -> the repository's proto/.
const SOURCE = path.resolve(PACKAGE_DIR, '..', '..', 'proto');
const ROOTS = 'phasor/v1';
// client/node -> client/service_config.json, and where the package keeps it.
const SERVICE_CONFIG_SOURCE = path.resolve(PACKAGE_DIR, '..', 'service_config.json');
const SERVICE_CONFIG_TARGET = path.join(PACKAGE_DIR, 'service_config.json');

const IMPORT = /^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;/gm;

function bundledByProtobufjs(name) {
  if (!name.startsWith('google/protobuf/')) return false;
  // Loaded only here: the phasor protos import nothing today, and the copy
  // must not need node_modules when they do not.
  return Boolean(require('protobufjs').common.get(name));
}

// The .proto files (relative to SOURCE) the package needs: phasor/v1/*.proto
// and their imports, transitively.
function needed() {
  const rootDir = path.join(SOURCE, ROOTS);
  if (!fs.existsSync(rootDir)) {
    throw new Error(`${rootDir} not found: pack this package from a Phasor checkout (client/node)`);
  }
  const pending = fs.readdirSync(rootDir).filter((name) => name.endsWith('.proto'))
    .sort().map((name) => `${ROOTS}/${name}`);
  const found = new Set();
  while (pending.length) {
    const name = pending.shift();
    if (found.has(name)) continue;
    const file = path.join(SOURCE, name);
    if (!fs.existsSync(file)) {
      throw new Error(`${name}, imported by the phasor protos, is not in ${SOURCE}`);
    }
    found.add(name);
    for (const [, imported] of fs.readFileSync(file, 'utf8').matchAll(IMPORT)) {
      if (!bundledByProtobufjs(imported)) pending.push(imported);
    }
  }
  return [...found].sort();
}

function main() {
  fs.rmSync(TARGET, { recursive: true, force: true });
  fs.rmSync(SERVICE_CONFIG_TARGET, { force: true });
  if (process.argv.includes('--clean')) return;
  for (const name of needed()) {
    const target = path.join(TARGET, name);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.copyFileSync(path.join(SOURCE, name), target);
    console.error(`copy-protos: proto/${name}`);
  }
  if (!fs.existsSync(SERVICE_CONFIG_SOURCE)) {
    throw new Error(`${SERVICE_CONFIG_SOURCE} not found: pack this package from a Phasor checkout (client/node)`);
  }
  fs.copyFileSync(SERVICE_CONFIG_SOURCE, SERVICE_CONFIG_TARGET);
  console.error('copy-protos: service_config.json');
}

main();
