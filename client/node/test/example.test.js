'use strict';
// example.js against a real server: it checks its own numbers against the
// formulas and exits 0 only when all of them match.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('child_process');
const path = require('path');
const { Server } = require('./server');

test('example.js runs and its numbers match the formulas', async (s) => {
  const server = await new Server().start();
  s.after(() => server.stop());
  const { code, stdout, stderr } = await new Promise((resolve) => {
    execFile(process.execPath, [path.join(__dirname, '..', 'example.js'), server.target],
      { timeout: 120000 }, (error, out, err) => resolve({ code: error ? error.code : 0, stdout: out, stderr: err }));
  });
  assert.equal(code, 0, `example.js failed:\n${stdout}\n${stderr}`);
  assert.match(stdout, /^EncodePositions FLOAT32: row 1 = 0\.841471 0\.540302 /m);
  assert.match(stdout, /^ApplyRope BFLOAT16: \[4,2,8\], attention_factor 1$/m);
  assert.match(stdout, /field: 'spec\.positional\.sinusoidal\.dim'/);
  assert.match(stdout, /^bse: RequestFieldError: spec\.positional\.sinusoidal\.bse: unknown field of phasor\.v1\.SinusoidalSpec \(did you mean base\?\)/m);
  assert.match(stdout, /^all values match the formulas$/m);
  assert.equal(stderr, '');
});
