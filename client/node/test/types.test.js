'use strict';
// lib/index.d.ts: declares exactly what lib/index.js exports, and tsc
// --strict accepts test/types-check.ts (a typical use of the API) against it.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');

test('every export is declared and every declaration exported', () => {
  const exported = Object.keys(require('../lib')).sort();
  const text = fs.readFileSync(path.join(root, 'lib', 'index.d.ts'), 'utf8');
  const declared = [...text.matchAll(/^export (?:declare )?(?:function|class|const) (\w+)/gm)]
    .map((m) => m[1]).filter((name, i, all) => all.indexOf(name) === i).sort();
  assert.deepEqual(declared, exported);
});

test('tsc --strict compiles a use of the API against the declarations', () => {
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  assert.ok(fs.existsSync(tsc), 'typescript is a devDependency: run npm ci');
  execFileSync(process.execPath, [tsc, '--noEmit', '--strict', '--target', 'es2020', '--module', 'commonjs',
    '--moduleResolution', 'node', '--types', 'node', path.join(__dirname, 'types-check.ts')],
  { cwd: root, stdio: 'pipe', timeout: 120000 });
});
