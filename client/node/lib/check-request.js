'use strict';
// checkMessage(type, object): what protobufjs would drop or garble when it
// turns `object` into a `type` message, as BadRequest-style field violations.
//
// @grpc/proto-loader serializes with protobufjs's Type.fromObject, which
// keeps what it recognises and silently ignores the rest. Every case below
// is a request that goes out well-formed but means something else, so the
// client refuses it instead:
// - an unknown key: {dim: 8, bse: 100} sends dim alone and the server uses
//   its default base;
// - an unknown enum name: sends 0, the "use the default" value;
// - two members of one oneof: both go on the wire and the server keeps the
//   last one;
// - a Float32Array (or any typed array but Uint8Array) as bytes: written one
//   element per byte, 300.5 becoming 44; an ArrayBuffer or a Map: dropped;
// - a scalar of the wrong kind: 'false' for a bool is true, 8.5 for an
//   integer is 8, 2^31 for an int32 wraps, 'abc' for a number is 0 or NaN.
//
// Field paths read like the object (and like the server's):
// `spec.positional.sinusoidal.bse`, `states[1].channels[0].last_value`,
// `labels["x"]`. Walks the object against the protobufjs reflection types
// (fields, oneofs, nested and repeated messages, maps); bytes and scalars are
// leaves, so a tensor's data is never iterated.
//
// Accepted besides the plain values, because protobufjs converts them
// exactly: decimal strings for integers, Long objects and BigInts for
// 64-bit integers, enum numbers, base64 strings for bytes, and the virtual
// oneof keys that decoded messages carry (proto-loader's `oneofs: true`
// gives `{range: ..., kind: 'range'}`), so a decoded message can be sent
// back as it is (SeriesState).
//
// Pure functions over the reflection objects; nothing here is mutable.

const protobuf = require('protobufjs');

// Stop after this many violations: the message stays readable and a huge
// repeated field of the wrong kind does not make a huge error.
const MAX_VIOLATIONS = 20;
// protobuf's default recursion limit (also a guard against cyclic objects).
const MAX_DEPTH = 100;

const INT32 = { min: -(2n ** 31n), max: 2n ** 31n - 1n };
const UINT32 = { min: 0n, max: 2n ** 32n - 1n };
const INT64 = { min: -(2n ** 63n), max: 2n ** 63n - 1n };
const UINT64 = { min: 0n, max: 2n ** 64n - 1n };
const INTEGER_RANGES = {
  int32: INT32, sint32: INT32, sfixed32: INT32,
  uint32: UINT32, fixed32: UINT32,
  int64: INT64, sint64: INT64, sfixed64: INT64,
  uint64: UINT64, fixed64: UINT64,
};
const DECIMAL = /^[+-]?\d+$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function has(object, key) {
  return Object.prototype.hasOwnProperty.call(object, key);
}

function join(path, name) {
  return path ? `${path}.${name}` : name;
}

// A short account of a value for an error message.
function show(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (Buffer.isBuffer(value)) return 'a Buffer';
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return `a ${value.constructor.name}`;
  switch (typeof value) {
    case 'string': return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)}`;
    case 'number': return `the number ${value}`;
    case 'bigint': return `the BigInt ${value}n`;
    case 'boolean': return String(value);
    case 'object': {
      const name = value.constructor && value.constructor.name;
      return name && name !== 'Object' ? `a ${name}` : 'an object';
    }
    default: return `a ${typeof value}`;
  }
}

function isMessageObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value) &&
    !ArrayBuffer.isView(value) && !(value instanceof ArrayBuffer) &&
    !(value instanceof Map) && !(value instanceof Set) && !(value instanceof Date);
}

function editDistance(a, b) {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = row;
  }
  return previous[b.length];
}

// The field a misspelt or camelCased key most likely meant, if any.
function nearest(key, names) {
  const folded = key.replace(/_/g, '').toLowerCase();
  const same = names.find((name) => name.replace(/_/g, '').toLowerCase() === folded);
  if (same) return same;
  const limit = key.length <= 4 ? 1 : 2;
  let best = null;
  let bestDistance = limit + 1;
  for (const name of names) {
    const distance = editDistance(key, name);
    if (distance < bestDistance) {
      best = name;
      bestDistance = distance;
    }
  }
  return best;
}

function typeName(type) {
  return type.fullName.replace(/^\./, '');
}

function unknownField(type, key) {
  const names = Object.keys(type.fields);
  const fields = names.length ? `its fields: ${names.join(', ')}` : 'it has no fields';
  const reserved = (type.reserved || []).includes(key);
  const guess = reserved ? null : nearest(key, names);
  return `${reserved ? 'a reserved (removed) field' : 'unknown field'} of ${typeName(type)}` +
    `${guess ? ` (did you mean ${guess}?)` : ''}; ${fields}`;
}

function integerProblem(value, range, kind) {
  let exact;
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) return `an integer expected (${kind}), got ${show(value)}`;
    exact = BigInt(value);
  } else if (typeof value === 'string') {
    if (!DECIMAL.test(value)) return `an integer expected (${kind}), got ${show(value)}`;
    exact = BigInt(value);
  } else if (typeof value === 'bigint' && range.max > UINT32.max) {
    exact = value;
  } else if (range.max > UINT32.max && typeof value === 'object' && value !== null &&
             Number.isInteger(value.low) && Number.isInteger(value.high)) {
    return null; // a Long: 64 bits by construction
  } else {
    const accepted = range.max > UINT32.max ? 'a number, decimal string, BigInt or Long' : 'a number or decimal string';
    return `${accepted} expected (${kind}), got ${show(value)}`;
  }
  if (exact < range.min || exact > range.max) {
    return `${value} is outside ${kind}'s range [${range.min}, ${range.max}]`;
  }
  return null;
}

function floatProblem(value, kind) {
  if (typeof value === 'number' || typeof value === 'bigint') return null;
  if (typeof value === 'string' && (/^(?:NaN|-?Infinity)$/.test(value) ||
      (value.trim() !== '' && !Number.isNaN(Number(value))))) {
    return null;
  }
  return `a number expected (${kind}), got ${show(value)}`;
}

// A bytes field's value, except a plain array of bytes (checked per element).
function bytesProblem(value) {
  if (value instanceof Uint8Array) return null; // Buffer included
  if (typeof value === 'string') {
    return BASE64.test(value) ? null
      : `a Buffer or Uint8Array expected (bytes), got ${show(value)}, which is not base64 (a string is read as base64)`;
  }
  const hint = ArrayBuffer.isView(value)
    ? '; a typed array would be sent one element per byte (fromTypedArray() makes a Tensor of it)'
    : value instanceof ArrayBuffer ? '; wrap it: Buffer.from(arrayBuffer)' : '';
  return `a Buffer or Uint8Array expected (bytes), got ${show(value)}${hint}`;
}

function enumProblem(type, value) {
  if (typeof value === 'string') {
    if (has(type.values, value)) return null;
    const names = Object.keys(type.values);
    const guess = nearest(value, names);
    return `unknown ${typeName(type)} value ${JSON.stringify(value)}` +
      `${guess ? ` (did you mean ${guess}?)` : ''}; its values: ${names.join(', ')}`;
  }
  // Open enums (proto3): any int32 is a valid number.
  if (typeof value === 'number' && Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31) {
    return null;
  }
  return `a ${typeName(type)} name or number expected, got ${show(value)}`;
}

class Walk {
  constructor() {
    this.violations = [];
  }

  get full() {
    return this.violations.length >= MAX_VIOLATIONS;
  }

  add(field, description) {
    if (!this.full) this.violations.push({ field, description });
  }

  message(type, value, path, depth) {
    if (depth > MAX_DEPTH) {
      this.add(path, `nested deeper than ${MAX_DEPTH} messages`);
      return;
    }
    if (!isMessageObject(value)) {
      this.add(path, `a ${typeName(type)} object expected, got ${show(value)}`);
      return;
    }
    // google.protobuf.Any and friends: protobufjs converts their own shapes.
    if (protobuf.wrappers[type.fullName]) return;
    for (const key of Object.keys(value)) {
      if (this.full) return;
      const item = value[key];
      // Own properties only: a key such as `constructor` is no field.
      if (has(type.fields, key)) {
        if (item !== undefined && item !== null) this.field(type.fields[key], item, join(path, key), depth);
        continue;
      }
      if (type.oneofs && has(type.oneofs, key)) {
        const oneof = type.oneofs[key];
        // A decoded message's virtual key naming the member that is set.
        if (item !== undefined && item !== null && !oneof.oneof.includes(item)) {
          this.add(join(path, key), `names the member of oneof ${key} that is set (one of ` +
            `${oneof.oneof.join(', ')}), got ${show(item)}`);
        }
        continue;
      }
      this.add(join(path, key), unknownField(type, key));
    }
    for (const oneof of type.oneofsArray) {
      const set = oneof.oneof.filter((name) => value[name] !== undefined && value[name] !== null);
      if (set.length > 1) {
        this.add(join(path, set[1]), `${set[0]} is set too; oneof ${oneof.name} holds one of ` +
          `${oneof.oneof.join(', ')}`);
      }
    }
  }

  field(field, value, path, depth) {
    if (field.map) {
      if (!isMessageObject(value)) {
        this.add(path, `a plain object (map<${field.keyType}, ${field.type}>) expected, got ${show(value)}`);
        return;
      }
      for (const key of Object.keys(value)) {
        if (this.full) return;
        const where = `${path}[${JSON.stringify(key)}]`;
        const problem = this.keyProblem(field.keyType, key);
        if (problem) this.add(where, problem);
        else if (value[key] !== undefined && value[key] !== null) this.value(field, value[key], where, depth);
      }
    } else if (field.repeated) {
      if (!Array.isArray(value)) {
        this.add(path, `an array expected (repeated ${field.type}), got ${show(value)}`);
        return;
      }
      for (let i = 0; i < value.length && !this.full; i++) {
        if (value[i] === undefined || value[i] === null) {
          this.add(`${path}[${i}]`, `a ${field.type} expected, got ${show(value[i])}`);
        } else {
          this.value(field, value[i], `${path}[${i}]`, depth);
        }
      }
    } else {
      this.value(field, value, path, depth);
    }
  }

  keyProblem(keyType, key) {
    if (keyType === 'string') return null;
    if (keyType === 'bool') return key === 'true' || key === 'false' ? null : `a bool key expected, got ${show(key)}`;
    return integerProblem(key, INTEGER_RANGES[keyType], `${keyType} key`);
  }

  value(field, value, path, depth) {
    const resolved = field.resolvedType;
    let problem = null;
    if (resolved instanceof protobuf.Type) {
      this.message(resolved, value, path, depth + 1);
      return;
    }
    if (resolved instanceof protobuf.Enum) {
      problem = enumProblem(resolved, value);
    } else if (INTEGER_RANGES[field.type]) {
      problem = integerProblem(value, INTEGER_RANGES[field.type], field.type);
    } else if (field.type === 'double' || field.type === 'float') {
      problem = floatProblem(value, field.type);
    } else if (field.type === 'bool') {
      problem = typeof value === 'boolean' ? null : `true or false expected, got ${show(value)}`;
    } else if (field.type === 'string') {
      problem = typeof value === 'string' ? null : `a string expected, got ${show(value)}`;
    } else if (field.type === 'bytes' && Array.isArray(value)) {
      const bad = value.findIndex((byte) => !(Number.isInteger(byte) && byte >= 0 && byte <= 255));
      if (bad >= 0) this.add(`${path}[${bad}]`, `a byte (0..255) expected, got ${show(value[bad])}`);
    } else if (field.type === 'bytes') {
      problem = bytesProblem(value);
    }
    if (problem) this.add(path, problem);
  }
}

/**
 * The problems protobufjs would silently paper over when encoding `object`
 * as a `type` message: [{field, description}], empty when there are none
 * (at most MAX_VIOLATIONS). `type` is a resolved protobufjs Type. The field
 * is '' when `object` itself is not an object.
 */
function checkMessage(type, object) {
  const walk = new Walk();
  walk.message(type, object, '', 0);
  return walk.violations;
}

module.exports = { checkMessage, MAX_VIOLATIONS };
