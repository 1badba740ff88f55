'use strict';
// Tensor helpers without a server: alignment, byte order, fp16/bf16.
const test = require('node:test');
const assert = require('node:assert/strict');
const t = require('../lib');

function float32Bits(value) {
  return new Uint32Array(Float32Array.of(value).buffer)[0];
}
function fromBits(bits) {
  return new Float32Array(Uint32Array.of(bits).buffer)[0];
}

// A Buffer whose bytes start `offset` bytes into its ArrayBuffer, as in a
// decoded message.
function bufferAt(offset, bytes) {
  const backing = Buffer.alloc(offset + bytes.length + 8);
  Buffer.from(bytes).copy(backing, offset);
  return backing.subarray(offset, offset + bytes.length);
}

test('misaligned FLOAT32 bytes are copied, aligned ones viewed', () => {
  const values = Float32Array.of(1.5, -2.25, 3e-7, 65504);
  const raw = new Uint8Array(values.buffer);
  // The trap the helper exists for: a view at an odd offset throws.
  const odd = bufferAt(1, raw);
  assert.throws(() => new Float32Array(odd.buffer, odd.byteOffset, 4), RangeError);
  const copied = t.toFloat32Array({ shape: ['4'], dtype: 'FLOAT32', data: odd });
  assert.deepEqual(Array.from(copied), Array.from(values));
  assert.notEqual(copied.buffer, odd.buffer);

  const aligned = bufferAt(8, raw);
  const view = t.toFloat32Array({ shape: [4], dtype: 'FLOAT32', data: aligned });
  assert.equal(view.buffer, aligned.buffer); // zero copy
  assert.deepEqual(Array.from(view), Array.from(values));
  const copy = t.toTypedArray({ shape: [4], dtype: 1, data: aligned }, { copy: true });
  assert.notEqual(copy.buffer, aligned.buffer);
  assert.deepEqual(Array.from(copy), Array.from(values));
});

test('FLOAT64, INT64, INT32 at every offset mod 8', () => {
  const doubles = Float64Array.of(Math.PI, -1e300, 5e-324);
  const longs = BigInt64Array.of(-(2n ** 63n), 1700000000000000001n, -1n);
  const ints = Int32Array.of(-7, 2 ** 31 - 1);
  for (let offset = 0; offset < 8; offset++) {
    const d = t.toTypedArray({ shape: [3], dtype: 'FLOAT64', data: bufferAt(offset, new Uint8Array(doubles.buffer)) });
    assert.ok(d instanceof Float64Array);
    assert.deepEqual(Array.from(d), Array.from(doubles));
    const l = t.toTypedArray({ shape: ['3'], dtype: 'INT64', data: bufferAt(offset, new Uint8Array(longs.buffer)) });
    assert.ok(l instanceof BigInt64Array);
    assert.deepEqual(Array.from(l), Array.from(longs));
    const i = t.toTypedArray({ shape: [2], dtype: 'INT32', data: bufferAt(offset, new Uint8Array(ints.buffer)) });
    assert.deepEqual(Array.from(i), [-7, 2 ** 31 - 1]);
  }
});

test('the bytes are read little-endian', () => {
  // 1.0f is 00 00 80 3f on the wire.
  const one = t.toFloat32Array({ shape: [1], dtype: 'FLOAT32', data: Buffer.from([0, 0, 0x80, 0x3f]) });
  assert.equal(one[0], 1);
  const tensor = t.int64Tensor([258]);
  assert.deepEqual(Array.from(tensor.data), [2, 1, 0, 0, 0, 0, 0, 0]);
});

test('a byte count that disagrees with the shape is refused', () => {
  assert.throws(() => t.toFloat32Array({ shape: [2, 3], dtype: 'FLOAT32', data: Buffer.alloc(20) }),
    /20 bytes, expected 24 for \[2,3\] FLOAT32/);
  assert.throws(() => t.toTypedArray({ shape: [1], dtype: 'DTYPE_UNSPECIFIED', data: Buffer.alloc(4) }), TypeError);
  assert.throws(() => t.toFloat32Array({ shape: [1], dtype: 'INT32', data: Buffer.alloc(4) }), TypeError);
});

test('fromTypedArray shares memory and infers the dtype', () => {
  const values = new Float32Array(12).map((_, i) => i / 3);
  const tensor = t.fromTypedArray(values, [3, 4]);
  assert.deepEqual(tensor.shape, [3, 4]);
  assert.equal(tensor.dtype, 'FLOAT32');
  assert.equal(tensor.data.buffer, values.buffer);
  assert.equal(tensor.data.length, 48);
  assert.equal(t.fromTypedArray(new BigInt64Array(2)).dtype, 'INT64');
  assert.equal(t.fromTypedArray(new Float64Array(2)).dtype, 'FLOAT64');
  assert.equal(t.fromTypedArray(new Uint8Array(2), [2], 'BOOL').dtype, 'BOOL');
  assert.throws(() => t.fromTypedArray(values, [5]), RangeError);
  assert.throws(() => t.fromTypedArray(new Uint16Array(2)), TypeError); // fp16 or bf16?
  assert.throws(() => t.fromTypedArray(values, [12], 'INT32'), TypeError);
  // A subarray keeps its offset.
  const tail = t.fromTypedArray(values.subarray(4), [8]);
  assert.equal(tail.data.byteOffset, 16);
  assert.deepEqual(Array.from(t.toFloat32Array(tail)), Array.from(values.subarray(4)));
});

test('float16 decoding is exact for all 65536 bit patterns', () => {
  const bits = Uint16Array.from({ length: 65536 }, (_, i) => i);
  const wide = t.float16ToFloat32(bits);
  const known = { 0x0000: 0, 0x3c00: 1, 0xc000: -2, 0x7bff: 65504, 0x0001: 2 ** -24, 0x03ff: 1023 * 2 ** -24,
    0x0400: 2 ** -14, 0x3555: 0.333251953125, 0x7c00: Infinity, 0xfc00: -Infinity };
  for (const [h, value] of Object.entries(known)) assert.equal(wide[h], value, `0x${Number(h).toString(16)}`);
  assert.ok(Object.is(wide[0x8000], -0));
  let nans = 0;
  for (let h = 0; h < 65536; h++) {
    if (Number.isNaN(wide[h])) {
      nans += 1;
      continue;
    }
    // Every non-NaN pattern survives the round trip.
    assert.equal(t.float32ToFloat16([wide[h]])[0], h);
  }
  assert.equal(nans, 2 * 1023);
});

test('float32 -> float16 rounds to nearest, ties to even', () => {
  const cases = [
    [1 + 2 ** -11, 0x3c00], // tie between 0x3c00 and 0x3c01: even
    [1 + 3 * 2 ** -11, 0x3c02], // tie between 0x3c01 and 0x3c02: even
    [1 + 2 ** -11 + 2 ** -20, 0x3c01], // just above the tie
    [65519.99, 0x7bff], [65520, 0x7c00], [1e6, 0x7c00], [-1e6, 0xfc00],
    [2 ** -25, 0x0000], [2 ** -25 * 1.01, 0x0001], [3 * 2 ** -25, 0x0002], // subnormal ties
    [2 ** -14 - 2 ** -25, 0x0400], // rounds up into the normals
    [1e-10, 0x0000], [-1e-10, 0x8000], [NaN, null],
  ];
  for (const [value, want] of cases) {
    const got = t.float32ToFloat16([value])[0];
    if (want === null) {
      assert.ok(Number.isNaN(t.float16ToFloat32([got])[0]), `NaN -> 0x${got.toString(16)}`);
    } else {
      assert.equal(got, want, `${value} -> 0x${got.toString(16)}, want 0x${want.toString(16)}`);
    }
  }
});

test('float32 -> float16 picks the nearest half for random values', () => {
  let seed = 12345;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const values = Float32Array.from({ length: 20000 }, () => (random() - 0.5) * 2 ** (Math.floor(random() * 40) - 26));
  const halves = t.float32ToFloat16(values);
  const table = t.float16ToFloat32(Uint16Array.from({ length: 65536 }, (_, i) => i));
  for (let i = 0; i < values.length; i++) {
    const error = Math.abs(values[i] - table[halves[i]]);
    for (const neighbour of [halves[i] - 1, halves[i] + 1]) {
      if (neighbour < 0 || neighbour > 0xffff || Number.isNaN(table[neighbour])) continue;
      if ((neighbour & 0x7fff) === 0x7c00 || (neighbour & 0x8000) !== (halves[i] & 0x8000)) continue;
      assert.ok(error <= Math.abs(values[i] - table[neighbour]), `${values[i]}: 0x${halves[i].toString(16)}`);
    }
  }
});

test('bfloat16: exact widening, round-to-nearest-even narrowing', () => {
  const wide = t.bfloat16ToFloat32(Uint16Array.of(0x3f80, 0xc040, 0x7f80, 0x0001, 0x7fc0));
  assert.deepEqual(Array.from(wide.subarray(0, 4)), [1, -3, Infinity, fromBits(0x00010000)]);
  assert.ok(Number.isNaN(wide[4]));
  const cases = [
    [fromBits(0x3f808000), 0x3f80], // tie: even
    [fromBits(0x3f818000), 0x3f82], // tie: even
    [fromBits(0x3f808001), 0x3f81],
    [fromBits(0x7f7fffff), 0x7f80], // the largest float32 rounds to Inf
    [-0, 0x8000], [Infinity, 0x7f80],
  ];
  for (const [value, want] of cases) {
    assert.equal(t.float32ToBfloat16([value])[0], want, `0x${float32Bits(value).toString(16)}`);
  }
  const nan = t.float32ToBfloat16([fromBits(0x7f800001)])[0]; // a NaN whose payload is all low bits
  assert.ok(Number.isNaN(t.bfloat16ToFloat32([nan])[0]));
  const tensor = t.bfloat16Tensor(Float32Array.of(1, 2, 3, 4), [2, 2]);
  assert.equal(tensor.dtype, 'BFLOAT16');
  assert.deepEqual(Array.from(t.toFloat32Array(tensor)), [1, 2, 3, 4]);
  assert.deepEqual(Array.from(t.toFloat32Array(t.float16Tensor([0.5, -8]))), [0.5, -8]);
});

test('shapeOf turns int64 extents (strings, Longs) into numbers', () => {
  assert.deepEqual(t.shapeOf({ shape: ['3', 4, { toString: () => '5' }] }), [3, 4, 5]);
  assert.deepEqual(t.shapeOf({ shape: [] }), []);
  assert.throws(() => t.shapeOf({ shape: ['-1'] }), RangeError);
  assert.throws(() => t.shapeOf({ shape: ['9007199254740993'] }), RangeError);
});
