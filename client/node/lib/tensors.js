'use strict';
// phasor.v1.Tensor <-> typed arrays.
//
// A Tensor is {shape, dtype, data}: `data` holds product(shape) elements,
// little-endian, row-major, no padding. Two traps for Node users:
// - A Buffer decoded from a message is a slice of the receive buffer at an
//   arbitrary byte offset, so `new Float32Array(buf.buffer, buf.byteOffset)`
//   throws RangeError whenever that offset is not a multiple of 4.
//   toTypedArray() returns a zero-copy view when the offset is aligned (and
//   the host is little-endian), a copy otherwise.
// - JavaScript has no float16 or bfloat16 arrays (Float16Array arrived in
//   Node 24): FLOAT16 / BFLOAT16 data is exposed as its raw Uint16Array bits,
//   and toFloat32Array() widens it exactly.
// Pure functions; nothing here is shared or mutable, except the lazily built
// fp16 lookup table, which never changes once built.

const os = require('os');

const LITTLE_ENDIAN = os.endianness() === 'LE';

// Bytes per element and the typed array that holds the raw elements.
const DTYPES = Object.freeze({
  FLOAT32: { size: 4, Array: Float32Array },
  FLOAT16: { size: 2, Array: Uint16Array },
  BFLOAT16: { size: 2, Array: Uint16Array },
  FLOAT64: { size: 8, Array: Float64Array },
  INT64: { size: 8, Array: BigInt64Array },
  INT32: { size: 4, Array: Int32Array },
  UINT8: { size: 1, Array: Uint8Array },
  BOOL: { size: 1, Array: Uint8Array },
});

// proto enum numbers, for messages decoded with `enums: Number`.
const DTYPE_NAMES = ['DTYPE_UNSPECIFIED', 'FLOAT32', 'FLOAT16', 'BFLOAT16',
  'FLOAT64', 'INT64', 'INT32', 'UINT8', 'BOOL'];

function dtypeName(dtype) {
  const name = typeof dtype === 'number' ? DTYPE_NAMES[dtype] : dtype;
  if (!Object.prototype.hasOwnProperty.call(DTYPES, name)) {
    throw new TypeError(`unsupported tensor dtype ${dtype}`);
  }
  return name;
}

// The shape as plain numbers (int64 fields decode as strings or Longs).
function shapeOf(tensor) {
  return (tensor.shape || []).map((extent) => {
    const value = Number(extent);
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`bad tensor extent ${extent}`);
    }
    return value;
  });
}

function elementCount(shape) {
  return shape.reduce((product, extent) => product * extent, 1);
}

// Checks the byte count against the shape; returns {name, shape, count, bytes}.
function describe(tensor) {
  if (!tensor) throw new TypeError('no tensor');
  const name = dtypeName(tensor.dtype);
  const shape = shapeOf(tensor);
  const count = elementCount(shape);
  const bytes = tensor.data || Buffer.alloc(0);
  if (bytes.byteLength !== count * DTYPES[name].size) {
    throw new RangeError(`tensor data has ${bytes.byteLength} bytes, ` +
      `expected ${count * DTYPES[name].size} for [${shape}] ${name}`);
  }
  return { name, shape, count, bytes };
}

// Reads little-endian elements one by one (big-endian hosts).
const GETTERS = { 1: 'getUint8', 2: 'getUint16', 4: 'getUint32', 8: 'getBigUint64' };
const SETTERS = { 1: 'setUint8', 2: 'setUint16', 4: 'setUint32', 8: 'setBigUint64' };

function copyToHost(bytes, Array, size, count) {
  const out = new Array(count);
  // Fresh ArrayBuffer at offset 0: aligned for every element type.
  const raw = new Uint8Array(out.buffer);
  if (LITTLE_ENDIAN) {
    raw.set(bytes);
  } else {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const hostView = new DataView(out.buffer);
    for (let i = 0; i < count; i++) {
      hostView[SETTERS[size]](i * size, view[GETTERS[size]](i * size, true), false);
    }
  }
  return out;
}

/**
 * The tensor's elements in their own type: Float32Array (FLOAT32),
 * Float64Array (FLOAT64), BigInt64Array (INT64), Int32Array (INT32),
 * Uint8Array (UINT8, BOOL) or Uint16Array of raw bits (FLOAT16, BFLOAT16).
 * A view of the message's bytes when they are aligned for the type and the
 * host is little-endian (writes then alter the message); a copy otherwise,
 * or always with {copy: true}.
 */
function toTypedArray(tensor, { copy = false } = {}) {
  const { name, count, bytes } = describe(tensor);
  const { size, Array } = DTYPES[name];
  if (!copy && LITTLE_ENDIAN && bytes.byteOffset % size === 0) {
    return new Array(bytes.buffer, bytes.byteOffset, count);
  }
  return copyToHost(bytes, Array, size, count);
}

let float16Table = null;

// Exact binary16 -> float32 for every one of the 65536 bit patterns.
function buildFloat16Table() {
  const table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exponent = (h >> 10) & 0x1f;
    const mantissa = h & 0x3ff;
    if (exponent === 0x1f) {
      table[h] = mantissa ? NaN : sign * Infinity;
    } else if (exponent === 0) {
      table[h] = sign * mantissa * 2 ** -24; // zero and subnormals
    } else {
      table[h] = sign * (1024 + mantissa) * 2 ** (exponent - 25);
    }
  }
  return table;
}

/** binary16 bits -> Float32Array (exact; NaNs stay NaN). */
function float16ToFloat32(bits) {
  if (!float16Table) float16Table = buildFloat16Table();
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = float16Table[bits[i]];
  return out;
}

/** bfloat16 bits -> Float32Array (exact: bfloat16 is a float32's upper half). */
function bfloat16ToFloat32(bits) {
  const wide = new Uint32Array(bits.length);
  for (let i = 0; i < bits.length; i++) wide[i] = bits[i] << 16;
  return new Float32Array(wide.buffer);
}

const scratchFloat = new Float32Array(1);
const scratchBits = new Uint32Array(scratchFloat.buffer);

/** Float32Array (or numbers) -> bfloat16 bits, rounded to nearest, ties to even. */
function float32ToBfloat16(values) {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) {
    scratchFloat[0] = values[i];
    const u = scratchBits[0];
    if ((u & 0x7fffffff) > 0x7f800000) {
      out[i] = (u >>> 16) | 0x40; // NaN: keep it a (quiet) NaN
    } else {
      out[i] = (u + 0x7fff + ((u >>> 16) & 1)) / 65536; // truncates in the store
    }
  }
  return out;
}

/** Float32Array (or numbers) -> binary16 bits, rounded to nearest, ties to even. */
function float32ToFloat16(values) {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) {
    scratchFloat[0] = values[i];
    const u = scratchBits[0];
    const sign = (u >>> 16) & 0x8000;
    const exponent = (u >>> 23) & 0xff;
    let mantissa = u & 0x7fffff;
    if (exponent === 0xff) { // Inf, NaN (quiet)
      out[i] = sign | 0x7c00 | (mantissa ? 0x200 | (mantissa >>> 13) : 0);
      continue;
    }
    const e = exponent - 112; // rebias 127 -> 15
    if (e >= 0x1f) {
      out[i] = sign | 0x7c00; // >= 2^16: overflow
      continue;
    }
    let half;
    let shift;
    if (e <= 0) { // binary16 subnormal (or zero): units of 2^-24
      if (e < -10) { // below 2^-25: rounds to zero
        out[i] = sign;
        continue;
      }
      mantissa |= 0x800000;
      shift = 14 - e;
      half = mantissa >>> shift;
    } else {
      shift = 13;
      half = (e << 10) | (mantissa >>> 13);
    }
    const rest = mantissa & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    // A carry out of the mantissa correctly bumps the exponent (to Inf at
    // the top of the range).
    if (rest > halfway || (rest === halfway && (half & 1))) half += 1;
    out[i] = sign | half;
  }
  return out;
}

/**
 * Any FLOAT32, FLOAT16 or BFLOAT16 tensor as a Float32Array: FLOAT32 as
 * toTypedArray gives it (a view when aligned), the 16-bit types widened.
 */
function toFloat32Array(tensor, options) {
  const name = dtypeName(tensor && tensor.dtype);
  if (name === 'FLOAT32') return toTypedArray(tensor, options);
  if (name === 'FLOAT16') return float16ToFloat32(toTypedArray(tensor));
  if (name === 'BFLOAT16') return bfloat16ToFloat32(toTypedArray(tensor));
  throw new TypeError(`toFloat32Array: ${name} is not FLOAT32/FLOAT16/BFLOAT16`);
}

const ARRAY_DTYPES = new Map([
  [Float32Array, 'FLOAT32'], [Float64Array, 'FLOAT64'],
  [BigInt64Array, 'INT64'], [Int32Array, 'INT32'], [Uint8Array, 'UINT8'],
]);

/**
 * A Tensor message from a typed array. The dtype follows the array type
 * (Float32Array FLOAT32, Float64Array FLOAT64, BigInt64Array INT64,
 * Int32Array INT32, Uint8Array UINT8) unless given: 'BOOL' for a Uint8Array,
 * 'FLOAT16' / 'BFLOAT16' for a Uint16Array of bits (see float32ToFloat16,
 * float32ToBfloat16). On a little-endian host `data` shares the array's
 * memory (no copy); `shape` defaults to [array.length].
 */
function fromTypedArray(array, shape = [array.length], dtype = undefined) {
  let name = dtype === undefined ? ARRAY_DTYPES.get(array.constructor) : dtypeName(dtype);
  if (name === undefined) {
    throw new TypeError(`fromTypedArray: give the dtype of a ${array.constructor.name}`);
  }
  const { size, Array } = DTYPES[name];
  if (array.BYTES_PER_ELEMENT !== size || !(array instanceof Array || size === 1)) {
    throw new TypeError(`fromTypedArray: a ${array.constructor.name} cannot hold ${name}`);
  }
  const count = elementCount(shape.map(Number));
  if (count !== array.length) {
    throw new RangeError(`fromTypedArray: ${array.length} elements for shape [${shape}]`);
  }
  let data;
  if (LITTLE_ENDIAN) {
    data = Buffer.from(array.buffer, array.byteOffset, array.byteLength);
  } else {
    data = Buffer.alloc(array.byteLength);
    const source = new DataView(array.buffer, array.byteOffset, array.byteLength);
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    for (let i = 0; i < array.length; i++) {
      view[SETTERS[size]](i * size, source[GETTERS[size]](i * size, false), true);
    }
  }
  return { shape: shape.map(Number), dtype: name, data };
}

/** float32 values as a BFLOAT16 tensor (rounded to nearest even). */
function bfloat16Tensor(values, shape = [values.length]) {
  return fromTypedArray(float32ToBfloat16(values), shape, 'BFLOAT16');
}

/** float32 values as a FLOAT16 tensor (rounded to nearest even). */
function float16Tensor(values, shape = [values.length]) {
  return fromTypedArray(float32ToFloat16(values), shape, 'FLOAT16');
}

/** Integers (numbers or bigints: positions, ns timestamps) as an INT64 tensor. */
function int64Tensor(values, shape = [values.length]) {
  return fromTypedArray(BigInt64Array.from(values, (v) => BigInt(v)), shape);
}

module.exports = {
  DTYPES,
  shapeOf,
  elementCount,
  toTypedArray,
  toFloat32Array,
  fromTypedArray,
  float16ToFloat32,
  bfloat16ToFloat32,
  float32ToFloat16,
  float32ToBfloat16,
  float16Tensor,
  bfloat16Tensor,
  int64Tensor,
};
