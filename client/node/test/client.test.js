'use strict';
// EncoderClient against real phasor-server processes on loopback: every
// number is checked against the formula computed here.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const t = require('../lib');
const { Server } = require('./server');

function assertNear(got, want, tolerance, what) {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    assert.ok(Math.abs(got[i] - want[i]) <= tolerance, `${what}[${i}]: ${got[i]} vs ${want[i]}`);
  }
}

// Interleaved sinusoid: PE[p, 2k] = sin(p·base^(−2k/dim)), PE[p, 2k+1] = cos(...).
function sinusoid(positions, dim, base = 10000) {
  const out = [];
  for (const p of positions) {
    for (let k = 0; k < dim / 2; k++) {
      const angle = p * base ** (-2 * k / dim);
      out.push(Math.sin(angle), Math.cos(angle));
    }
  }
  return out;
}

// RoPE, HALF layout, on a [T, H, D] array.
function rope(query, [T, H, D], positions, base = 10000) {
  const out = new Array(query.length);
  for (let t0 = 0; t0 < T; t0++) {
    for (let h = 0; h < H; h++) {
      const row = (t0 * H + h) * D;
      for (let i = 0; i < D / 2; i++) {
        const angle = positions[t0] * base ** (-2 * i / D);
        const [x, y] = [query[row + i], query[row + i + D / 2]];
        out[row + i] = x * Math.cos(angle) - y * Math.sin(angle);
        out[row + i + D / 2] = y * Math.cos(angle) + x * Math.sin(angle);
      }
    }
  }
  return out;
}

const sinusoidSpec = (dim) => ({ positional: { sinusoidal: { dim } } });

test('plain server', async (s) => {
  const server = await new Server().start();
  const client = server.client();
  s.after(async () => {
    client.close();
    await server.stop();
  });

  await s.test('health and reflection (v1alpha)', async () => {
    assert.equal(await client.health(), 'SERVING');
    assert.equal(await client.health('phasor.v1.Encoder'), 'SERVING');
    assert.deepEqual(await client.listServices(),
      ['grpc.health.v1.Health', 'grpc.reflection.v1alpha.ServerReflection',
        'inference.GRPCInferenceService', 'phasor.v1.Encoder']);
  });

  await s.test('EncodePositions: range and explicit int64 positions', async () => {
    const reply = await client.encodePositions({ positions: { range: { start: 3, count: 5, step: 7 } }, spec: sinusoidSpec(16) });
    assert.deepEqual(reply.encodings.shape, ['5', '16']);
    assertNear(t.toFloat32Array(reply.encodings), sinusoid([3, 10, 17, 24, 31], 16), 2e-6, 'range');
    // Large positions: exact int64 angles on the server.
    const positions = [2 ** 24 + 1, 123456789, -5];
    const explicit = await client.encodePositions({ positions: { values: t.int64Tensor(positions) }, spec: sinusoidSpec(8) });
    assertNear(t.toFloat32Array(explicit.encodings), sinusoid(positions, 8), 2e-6, 'values');
  });

  await s.test('EncodePositions adds content·content_scale', async () => {
    const content = Float32Array.from({ length: 3 * 4 }, (_, i) => i / 10);
    const reply = await client.encodePositions({
      positions: { range: { count: 3 } }, spec: sinusoidSpec(4),
      content: t.fromTypedArray(content, [3, 4]), content_scale: 2,
    });
    const want = sinusoid([0, 1, 2], 4).map((v, i) => v + 2 * content[i]);
    assertNear(t.toFloat32Array(reply.encodings), want, 4e-6, 'content');
  });

  await s.test('ApplyRope: positions default to 0 .. T-1; fp32, fp16 and bf16 in and out', async () => {
    const shape = [5, 2, 8];
    const query = Float32Array.from({ length: 80 }, (_, i) => ((i * 37) % 11) / 4 - 1.25);
    const key = Float32Array.from({ length: 40 }, (_, i) => ((i * 13) % 5) - 2);
    const reply = await client.applyRope({
      query: t.fromTypedArray(query, shape), key: t.fromTypedArray(key, [5, 1, 8]), spec: { rope: {} },
    });
    assertNear(t.toFloat32Array(reply.query), rope(query, shape, [0, 1, 2, 3, 4]), 1e-5, 'query');
    assertNear(t.toFloat32Array(reply.key), rope(key, [5, 1, 8], [0, 1, 2, 3, 4]), 1e-5, 'key');
    assert.equal(reply.attention_factor, 1);
    // 16-bit inputs: the values are exact in both; outputs round to 11 / 8
    // significant bits (|value| < 4: 4·2^-11, 4·2^-8).
    for (const [make, dtype, tolerance] of [[t.float16Tensor, 'FLOAT16', 4 * 2 ** -11], [t.bfloat16Tensor, 'BFLOAT16', 4 * 2 ** -8]]) {
      const positions = [7, 1000, 65535, 3, 0];
      const narrow = await client.applyRope({
        query: make(query, shape), positions: { values: t.int64Tensor(positions) }, spec: { rope: { base: 500000 } },
      });
      assert.equal(narrow.query.dtype, dtype);
      assertNear(t.toFloat32Array(narrow.query), rope(query, shape, positions, 500000), tolerance, dtype);
    }
  });

  await s.test('ApplyRope: the default positions follow tensor_layout (T, not B)', async () => {
    const [B, T, H, D] = [2, 3, 1, 4];
    const values = Float32Array.from({ length: B * T * H * D }, (_, i) => (i % 5) - 2);
    for (const [tensor_layout, shape] of [['BATCH_SEQ_HEADS_DIM', [B, T, H, D]], [3, [B, H, T, D]]]) {
      const request = { query: t.fromTypedArray(values, shape), spec: { rope: {} }, tensor_layout };
      const defaulted = await client.applyRope(request);
      const explicit = await client.applyRope({ ...request, positions: { range: { count: T } } });
      assert.deepEqual(defaulted.query, explicit.query, `layout ${tensor_layout}`);
    }
    await assert.rejects(client.applyRope({ query: t.fromTypedArray(values, [B, T, H, D]), spec: { rope: {} }, tensor_layout: 'BSHD' }),
      (error) => error instanceof t.RequestFieldError && error.fieldViolations[0].field === 'tensor_layout');
    await assert.rejects(client.applyRope(null), (error) => error instanceof t.RequestFieldError);
  });

  await s.test('RopeTables and AlibiBias against their formulas', async () => {
    const tables = await client.ropeTables({ positions: { range: { start: 10, count: 3 } }, spec: { rope: { rotary_dim: 8, base: 100 } } });
    const angles = [10, 11, 12].flatMap((p) => [0, 1, 2, 3].map((i) => p * 100 ** (-2 * i / 8)));
    assertNear(t.toFloat32Array(tables.cos), angles.map(Math.cos), 2e-6, 'cos');
    assertNear(t.toFloat32Array(tables.sin), angles.map(Math.sin), 2e-6, 'sin');
    assertNear(tables.inv_freq, [0, 1, 2, 3].map((i) => 100 ** (-2 * i / 8)), 1e-15, 'inv_freq');
    const alibi = await client.alibiBias({ num_heads: 8 });
    assertNear(t.toFloat32Array(alibi.slopes), [1, 2, 3, 4, 5, 6, 7, 8].map((h) => 2 ** (-8 * h / 8)), 0, 'slopes');
    assert.equal(alibi.bias, null);
  });

  await s.test('EncodeObservations: state round trip and the stream', async () => {
    const first = 1700000000000000000n;
    const stamps = [0n, 2000000000n, 5000000000n, 9000000000n].map((d) => first + d);
    const spec = { temporal: { gaps: { global_delta: true } } };
    const whole = await client.encodeObservations({ observations: { timestamps: t.int64Tensor(stamps) }, spec });
    // Global Δt in seconds, 0 for the first row.
    assertNear(t.toFloat32Array(whole.features), [0, 2, 3, 4], 0, 'whole');
    assert.equal(whole.state.last_timestamp_ns, String(stamps[3]));
    const head = await client.encodeObservations({ observations: { timestamps: t.int64Tensor(stamps.slice(0, 2)) }, spec });
    const tail = await client.encodeObservations({
      observations: { timestamps: t.int64Tensor(stamps.slice(2)) }, spec, state: head.state,
    });
    assertNear(t.toFloat32Array(tail.features), [3, 4], 0, 'tail after state');
    // The same two chunks over one stream.
    const stream = client.encodeObservationsStream();
    const replies = [];
    const done = new Promise((resolve, reject) => {
      stream.on('data', (reply) => replies.push(reply));
      stream.on('error', reject);
      stream.on('end', resolve);
    });
    stream.write({ observations: { timestamps: t.int64Tensor(stamps.slice(0, 2)) }, spec });
    stream.write({ observations: { timestamps: t.int64Tensor(stamps.slice(2)) } });
    stream.end();
    await done;
    assert.deepEqual(replies.map((r) => Array.from(t.toFloat32Array(r.features))), [[0, 2], [3, 4]]);
  });

  await s.test('Describe and ListProfiles', async () => {
    const described = await client.describe({ spec: sinusoidSpec(8) });
    assertNear(described.frequencies, [0, 1, 2, 3].map((k) => 10000 ** (-2 * k / 8)), 1e-15, 'frequencies');
    assert.deepEqual((await client.listProfiles()).profiles, []);
  });

  await s.test('errors carry the code, the field path and BadRequest violations', async () => {
    await assert.rejects(client.applyRope({
      query: { shape: [2, 1, 4], dtype: 'FLOAT32', data: Buffer.alloc(20) }, spec: { rope: {} },
    }), (error) => {
      assert.equal(error.code, grpc.status.INVALID_ARGUMENT);
      assert.match(error.details, /^query\.data: expected 32 bytes/);
      assert.deepEqual(error.fieldViolations.map((v) => v.field), ['query.data']);
      assert.deepEqual(t.fieldViolations(error), error.fieldViolations);
      return true;
    });
    await assert.rejects(client.echo({ payload: Buffer.from('x') }), (error) => {
      assert.equal(error.code, grpc.status.UNIMPLEMENTED); // no --enable_echo
      assert.deepEqual(error.fieldViolations, []);
      return true;
    });
  });

  await s.test('unknown fields are refused before sending, naming the field path', async () => {
    const refusedFor = (field) => (error) => {
      assert.ok(error instanceof t.RequestFieldError, String(error));
      assert.equal(error.code, grpc.status.INVALID_ARGUMENT);
      assert.deepEqual(error.fieldViolations.map((v) => v.field), [field]);
      assert.deepEqual(t.fieldViolations(error), error.fieldViolations);
      return true;
    };
    // protobufjs would send {dim: 8} alone and the server would answer with base 10000.
    const misspelt = { positions: { range: { count: 2 } }, spec: { positional: { sinusoidal: { dim: 8, bse: 100 } } } };
    await assert.rejects(client.encodePositions(misspelt), (error) => {
      refusedFor('spec.positional.sinusoidal.bse')(error);
      assert.match(error.details, /^spec\.positional\.sinusoidal\.bse: unknown field of phasor\.v1\.SinusoidalSpec \(did you mean base\?\); its fields: dim, base, /);
      return true;
    });
    const fixed = await client.encodePositions({ ...misspelt, spec: { positional: { sinusoidal: { dim: 8, base: 100 } } } });
    assertNear(t.toFloat32Array(fixed.encodings), sinusoid([0, 1], 8, 100), 2e-6, 'base 100');
    // Nested in a temporal spec, and a convenience request (applyRope adds positions).
    const stamps = t.int64Tensor([0, 1000000000]);
    await assert.rejects(client.encodeObservations({
      observations: { timestamps: stamps }, spec: { temporal: { gaps: { global_delta: true, per_chanel_delta: true } } },
    }), refusedFor('spec.temporal.gaps.per_chanel_delta'));
    await assert.rejects(client.encodeObservations({
      observations: { timestamps: stamps }, spec: { temporal: { time: { dim: 4, periods: [{ period_seconds: 60, ordr: 2 }] } } },
    }), refusedFor('spec.temporal.time.periods[0].ordr'));
    await assert.rejects(client.applyRope({ query: t.fromTypedArray(new Float32Array(8), [1, 1, 8]), spec: { rope: { bas: 500000 } } }),
      refusedFor('spec.rope.bas'));
    await assert.rejects(client.applyRope({ query: { shape: [1, 1, 2], dtype: 'FLOAT32', data: new Float32Array(2) }, spec: { rope: {} } }),
      refusedFor('query.data')); // would go out as 2 bytes
    for (const [call, field] of [
      [() => client.ropeTables({ positions: { range: { count: 1 } }, spec: { rope: { rotary_dims: 8 } } }), 'spec.rope.rotary_dims'],
      [() => client.alibiBias({ num_head: 8 }), 'num_head'],
      [() => client.describe({ spec: { positional: { sinusoidal: { dim: 8 } } }, outputDtype: 'FLOAT16' }), 'outputDtype'],
      [() => client.listProfiles({ verbose: true }), 'verbose'],
      [() => client.echo({ payload: Buffer.from('x'), extra: 1 }), 'extra'],
      [() => client.health(7), 'service'],
    ]) {
      await assert.rejects(call(), refusedFor(field));
    }
    // Nothing is sent: a client with no server behind it refuses the same way.
    const nowhere = new t.EncoderClient('127.0.0.1:1', { deadlineMs: 5000 });
    try {
      await assert.rejects(nowhere.encodePositions(misspelt), refusedFor('spec.positional.sinusoidal.bse'));
    } finally {
      nowhere.close();
    }
  });

  await s.test('a stream refuses a request with an unknown field and ends with INVALID_ARGUMENT', async () => {
    const spec = { temporal: { gaps: { global_delta: true } } };
    const stream = client.encodeObservationsStream();
    const replies = [];
    const failed = new Promise((resolve, reject) => {
      stream.on('data', (reply) => replies.push(reply));
      stream.on('error', resolve);
      stream.on('end', () => reject(new Error('the stream ended without an error')));
    });
    stream.write({ observations: { timestamps: t.int64Tensor([0, 2000000000]) }, spec });
    // The first reply shows the call reached the server before the bad
    // chunk (bounded by the stream's deadline: an error ends the wait too).
    await Promise.race([new Promise((resolve) => stream.once('data', resolve)), failed]);
    stream.write({ observations: { timestamp: t.int64Tensor([5000000000]) } });
    const error = await failed;
    assert.equal(error.code, grpc.status.INVALID_ARGUMENT);
    assert.deepEqual(t.fieldViolations(error).map((v) => v.field), ['observations.timestamp']);
    assert.match(error.details, /^observations\.timestamp: unknown field of phasor\.v1\.Observations \(did you mean timestamps\?\)/);
    assert.equal(replies.length, 1);
  });

  await s.test('deadlines: per client and per call', async () => {
    // Long enough for the server to take longer than 1 ms: 8 MiB of output.
    const big = { positions: { range: { count: 32768 } }, spec: sinusoidSpec(64) };
    await assert.rejects(client.encodePositions(big, { deadlineMs: 1 }),
      (error) => error.code === grpc.status.DEADLINE_EXCEEDED);
    const hurried = server.client({ deadlineMs: 1 });
    try {
      await assert.rejects(hurried.encodePositions(big), (error) => error.code === grpc.status.DEADLINE_EXCEEDED);
    } finally {
      hurried.close();
    }
    assert.equal((await client.encodePositions(big)).encodings.data.length, 32768 * 64 * 4);
  });

  await s.test('message limits: 64 MiB by default, smaller on request', async () => {
    // 16 MiB of output: over grpc-js's own 4 MiB default, under ours.
    const request = { positions: { range: { count: 65536 } }, spec: sinusoidSpec(64) };
    const reply = await client.encodePositions(request);
    assert.equal(reply.encodings.data.length, 16 << 20);
    const small = server.client({ maxMessageBytes: 1 << 20 });
    try {
      await assert.rejects(small.encodePositions(request), (error) => error.code === grpc.status.RESOURCE_EXHAUSTED);
    } finally {
      small.close();
    }
  });
});

test('a missing encoder.proto names the paths looked at and PHASOR_PROTO_DIR', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'phasor-node-noproto-'));
  const saved = process.env.PHASOR_PROTO_DIR;
  try {
    const file = path.join(dir, 'phasor', 'v1', 'encoder.proto');
    assert.throws(() => new t.EncoderClient('127.0.0.1:1', { protoDir: dir }), (error) => {
      assert.equal(error.code, 'ENOENT');
      assert.deepEqual(error.paths, [file]);
      assert.ok(error.message.includes(file) && error.message.includes('PHASOR_PROTO_DIR'), error.message);
      return true;
    });
    // In this checkout the package has no proto/ of its own (npm pack's copy
    // is removed after packing): without $PHASOR_PROTO_DIR, the repository's.
    delete process.env.PHASOR_PROTO_DIR;
    assert.equal(t.findProtoDir(), path.resolve(__dirname, '..', '..', '..', 'proto'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    if (saved !== undefined) process.env.PHASOR_PROTO_DIR = saved;
  }
});

test('round_robin spreads calls over every address', async (s) => {
  const servers = await Promise.all([0, 1].map(() => new Server([], {}, { metrics: true }).start()));
  s.after(() => Promise.all(servers.map((server) => server.stop())));
  // What a headless Service's DNS name resolves to, written out: two
  // addresses behind one target.
  const target = `ipv4:${servers.map((server) => server.target).join(',')}`;
  const client = new t.EncoderClient(target, { loadBalancingPolicy: 'round_robin', deadlineMs: 10000 });
  try {
    for (let i = 0; i < 10; i++) {
      await client.encodePositions({ positions: { range: { count: 1 } }, spec: sinusoidSpec(2) });
    }
  } finally {
    client.close();
  }
  const handled = [];
  for (const server of servers) {
    let count = 0;
    for (let attempt = 0; attempt < 100 && count === 0; attempt++) {
      const text = await server.metrics();
      const line = text.split('\n').find((l) => l.startsWith('grpc_server_handled_total{') &&
        l.includes('grpc_method="EncodePositions"') && l.includes('grpc_code="OK"'));
      count = line ? Number(line.split(' ').pop()) : 0;
      if (count === 0) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    handled.push(count);
  }
  assert.ok(handled.every((count) => count >= 1), `calls per server: ${handled}`);
});

test('TLS and bearer token', async (s) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'phasor-node-'));
  s.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe', timeout: 60000 });
  const curve = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...curve, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=phasor-node-ca',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  fs.writeFileSync(path.join(dir, 'server.ext'),
    'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n');
  openssl('req', ...curve, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=phasor-node-server');
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
    '-out', 'server.pem', '-days', '2', '-extfile', 'server.ext');
  const token = 'node-3b9e1d-token';
  fs.writeFileSync(path.join(dir, 'token'), `${token}\n`);
  const file = (name) => path.join(dir, name);

  const server = await new Server(
    ['--tls_cert', file('server.pem'), '--tls_key', file('server.key'), '--auth_token_file', file('token')],
    { tlsCa: file('ca.pem') }).start();
  s.after(() => server.stop());
  const request = { positions: { range: { count: 2 } }, spec: sinusoidSpec(4) };

  for (const options of [{ token }, { tokenFile: file('token') }]) {
    const client = server.client(options);
    try {
      assertNear(t.toFloat32Array((await client.encodePositions(request)).encodings), sinusoid([0, 1], 4), 2e-6, 'tls');
    } finally {
      client.close();
    }
  }
  for (const options of [{}, { token: 'wrong' }]) {
    const client = server.client(options);
    try {
      await assert.rejects(client.encodePositions(request), (error) => error.code === grpc.status.UNAUTHENTICATED);
      assert.equal(await client.health(), 'SERVING'); // probes need no token
    } finally {
      client.close();
    }
  }
  // Plaintext against a TLS server fails; so does a CA that did not sign it.
  const plain = new t.EncoderClient(server.target, { token, deadlineMs: 3000 });
  try {
    await assert.rejects(plain.encodePositions(request), (error) => error.code === grpc.status.UNAVAILABLE);
  } finally {
    plain.close();
  }
  assert.throws(() => server.client({ tlsCert: file('server.pem') }), /tlsCert and tlsKey together/);
});
