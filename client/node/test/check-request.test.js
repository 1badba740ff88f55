'use strict';
// checkMessage against encoder.proto's own types: everything protobufjs
// would drop or garble is a violation with its field path, and everything
// it converts faithfully passes, decoded responses included. No server.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('path');
const protobuf = require('protobufjs');
const { checkMessage, MAX_VIOLATIONS } = require('../lib/check-request');
const { findProtoDir, LOADER_OPTIONS } = require('../lib/client');
const t = require('../lib');

const root = new protobuf.Root();
root.loadSync(path.join(findProtoDir(), 'phasor', 'v1', 'encoder.proto'), LOADER_OPTIONS).resolveAll();
const type = (name) => root.lookupType(`phasor.v1.${name}`);
// What proto-loader hands back for a response (LOADER_OPTIONS).
const decoded = (messageType, message) =>
  messageType.toObject(messageType.decode(messageType.encode(messageType.fromObject(message)).finish()),
    { longs: String, enums: String, defaults: true, oneofs: true });

const fields = (violations) => violations.map((v) => v.field);

test('an unknown field is named by its full path, with the valid names', () => {
  const violations = checkMessage(type('EncodePositionsRequest'),
    { positions: { range: { count: 2 } }, spec: { positional: { sinusoidal: { dim: 8, bse: 100 } } } });
  assert.deepEqual(fields(violations), ['spec.positional.sinusoidal.bse']);
  assert.match(violations[0].description, /^unknown field of phasor\.v1\.SinusoidalSpec \(did you mean base\?\); its fields: dim, base, /);
});

test('nested and repeated paths in a temporal spec', () => {
  const violations = checkMessage(type('EncodeObservationsRequest'), {
    observations: { timestamps: t.int64Tensor([1, 2]) },
    spec: { temporal: {
      gaps: { global_delta: true, per_chanel_delta: true },
      time: { periods: [{ period_seconds: 86400 }, { period_seconds: 604800, ordre: 3 }] },
      calendar: { time_zone: 'UTC', fields: ['HOUR_OF_DAY', 'DAY_OF_WEK'] },
    } },
  });
  assert.deepEqual(fields(violations), ['spec.temporal.gaps.per_chanel_delta',
    'spec.temporal.time.periods[1].ordre', 'spec.temporal.calendar.fields[1]']);
  assert.match(violations[1].description, /did you mean order\?/);
  assert.match(violations[2].description, /CalendarBlock\.Field value "DAY_OF_WEK" \(did you mean DAY_OF_WEEK\?\)/);
});

test("Object.prototype's names are unknown fields too", () => {
  assert.deepEqual(fields(checkMessage(type('SinusoidalSpec'), { dim: 8, toString: 1, constructor: 2 })), ['toString', 'constructor']);
  assert.deepEqual(fields(checkMessage(type('SinusoidalSpec'), { layout: 'toString' })), ['layout']);
});

test('camelCase keys point at the snake_case field', () => {
  const [violation] = checkMessage(type('EncodePositionsRequest'), { positions: { range: { count: 1 } }, outputDtype: 'FLOAT16' });
  assert.equal(violation.field, 'outputDtype');
  assert.match(violation.description, /did you mean output_dtype\?/);
});

test('a reserved (removed) field name says so', () => {
  const [violation] = checkMessage(type('TemporalSpec'), { content: { include_mask: true } });
  assert.equal(violation.field, 'content.include_mask');
  assert.match(violation.description, /^a reserved \(removed\) field of phasor\.v1\.ContentBlock; its fields: scale$/);
});

test('unknown enum names, and enum numbers', () => {
  const request = (dtype) => ({ positions: { range: { count: 1 } }, output_dtype: dtype });
  const [violation] = checkMessage(type('EncodePositionsRequest'), request('FLOAT61'));
  assert.equal(violation.field, 'output_dtype');
  assert.match(violation.description, /unknown phasor\.v1\.DType value "FLOAT61" \(did you mean FLOAT64\?\); its values: DTYPE_UNSPECIFIED, FLOAT32,/);
  assert.deepEqual(checkMessage(type('EncodePositionsRequest'), request('BFLOAT16')), []);
  assert.deepEqual(checkMessage(type('EncodePositionsRequest'), request(3)), []);
  assert.deepEqual(fields(checkMessage(type('EncodePositionsRequest'), request(1.5))), ['output_dtype']);
});

test('two members of one oneof', () => {
  const violations = checkMessage(type('EncodePositionsRequest'), {
    positions: { range: { count: 2 }, values: t.int64Tensor([0, 1]) }, spec: {}, profile: 'p',
  });
  assert.deepEqual(fields(violations), ['positions.values', 'profile']);
  assert.match(violations[0].description, /^range is set too; oneof kind holds one of range, values$/);
  // null and undefined members are unset, as protobufjs reads them.
  assert.deepEqual(checkMessage(type('Positions'), { range: { count: 2 }, values: null }), []);
});

test('bytes: Buffer, Uint8Array, base64 and byte arrays pass; other typed arrays do not', () => {
  const tensor = (data) => checkMessage(type('Tensor'), { shape: [2], dtype: 'FLOAT32', data });
  for (const data of [Buffer.alloc(8), new Uint8Array(8), 'AAAAAAAAAAA=', [0, 255], t.fromTypedArray(new Float32Array(2)).data]) {
    assert.deepEqual(tensor(data), [], String(data));
  }
  const [typed] = tensor(new Float32Array(2));
  assert.equal(typed.field, 'data');
  assert.match(typed.description, /got a Float32Array; a typed array would be sent one element per byte/);
  assert.match(tensor(new ArrayBuffer(8))[0].description, /Buffer\.from\(arrayBuffer\)/);
  assert.match(tensor('not base64!')[0].description, /not base64/);
  assert.deepEqual(fields(tensor([0, 256])), ['data[1]']);
});

test('scalars of the wrong kind', () => {
  const check = (message) => checkMessage(type('SinusoidalSpec'), message);
  assert.deepEqual(check({ dim: 8, base: 100 }), []);
  assert.deepEqual(check({ dim: '8', base: '1e4' }), []); // decimal strings, as protobufjs reads them
  assert.deepEqual(check({ dim: 8n, base: 100n }), []);
  assert.deepEqual(check({ dim: { low: 8, high: 0 } }), []); // a Long
  for (const [message, pattern] of [
    [{ dim: 8.5 }, /^an integer expected \(int64\), got the number 8\.5$/],
    [{ dim: 'eight' }, /^an integer expected/],
    [{ dim: 2n ** 63n }, /outside int64's range/],
    [{ base: 'abc' }, /^a number expected \(double\)/],
    [{ base: '' }, /^a number expected/],
    [{ base: true }, /^a number expected/],
    [{ layout: {} }, /SinusoidalSpec\.Layout name or number expected, got an object$/],
  ]) {
    const violations = check(message);
    assert.equal(violations.length, 1, JSON.stringify(violations));
    assert.match(violations[0].description, pattern);
  }
  const range = (message) => checkMessage(type('TimeBlock.Period'), message);
  assert.match(range({ order: 2 ** 31 })[0].description, /outside int32's range/);
  assert.match(range({ order: 3n })[0].description, /^a number or decimal string expected \(int32\)/);
  assert.match(checkMessage(type('GapsBlock'), { global_delta: 'false' })[0].description, /^true or false expected/);
  assert.match(checkMessage(type('CalendarBlock'), { time_zone: 5 })[0].description, /^a string expected/);
});

test('structure: messages are objects, repeated fields arrays', () => {
  assert.deepEqual(checkMessage(type('EncodePositionsRequest'), null),
    [{ field: '', description: 'a phasor.v1.EncodePositionsRequest object expected, got null' }]);
  assert.deepEqual(fields(checkMessage(type('EncodePositionsRequest'), { positions: 'range' })), ['positions']);
  assert.deepEqual(fields(checkMessage(type('Tensor'), { shape: new Int32Array([2]) })), ['shape']);
  assert.deepEqual(fields(checkMessage(type('Tensor'), { shape: [2, null] })), ['shape[1]']);
  assert.deepEqual(fields(checkMessage(type('Tensor'), { shape: [2, 'x'] })), ['shape[1]']);
});

test('the virtual oneof keys of decoded messages pass; wrong ones do not', () => {
  assert.deepEqual(checkMessage(type('Positions'), { range: { count: 2 }, kind: 'range' }), []);
  assert.deepEqual(fields(checkMessage(type('Positions'), { range: { count: 2 }, kind: 'rnge' })), ['kind']);
});

test('map fields and recursion (ad-hoc types)', () => {
  const adhoc = protobuf.Root.fromJSON({ nested: {
    Node: { fields: {
      labels: { keyType: 'int32', type: 'Node', id: 1 },
      child: { type: 'Node', id: 2 },
      name: { type: 'string', id: 3 },
    } },
  } }).resolveAll().lookupType('Node');
  assert.deepEqual(checkMessage(adhoc, { labels: { 1: { name: 'a' } }, child: { child: { name: 'b' } } }), []);
  assert.deepEqual(fields(checkMessage(adhoc, { labels: { 1: { nme: 'a' }, x: {} } })), ['labels["1"].nme', 'labels["x"]']);
  assert.deepEqual(fields(checkMessage(adhoc, { labels: new Map([[1, {}]]) })), ['labels']);
  const cycle = { name: 'loop' };
  cycle.child = cycle;
  const [deep] = checkMessage(adhoc, cycle);
  assert.match(deep.description, /nested deeper than 100 messages/);
});

test('at most MAX_VIOLATIONS are reported', () => {
  const many = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`x${i}`, i]));
  assert.equal(checkMessage(type('SinusoidalSpec'), many).length, MAX_VIOLATIONS);
});

// A message of `messageType` with every field set (one member per oneof),
// to `depth` levels of nested messages.
function filled(messageType, depth = 0) {
  const message = {};
  const skipped = new Set();
  for (const oneof of messageType.oneofsArray) oneof.oneof.slice(1).forEach((name) => skipped.add(name));
  for (const field of messageType.fieldsArray) {
    if (skipped.has(field.name)) continue;
    let value;
    if (field.resolvedType instanceof protobuf.Type) {
      if (depth >= 3) continue;
      value = filled(field.resolvedType, depth + 1);
    } else if (field.resolvedType instanceof protobuf.Enum) {
      value = Object.keys(field.resolvedType.values).at(-1);
    } else {
      value = { string: 'x', bool: true, bytes: Buffer.from([1, 2]), double: 0.5, float: 0.5 }[field.type] ?? '7';
    }
    message[field.name] = field.repeated ? [value, value] : field.map ? { 1: value } : value;
  }
  return message;
}

test('every message type: filled and decoded messages pass (a response can be sent back)', () => {
  const types = [];
  (function collect(namespace) {
    for (const nested of namespace.nestedArray) {
      if (nested instanceof protobuf.Type) types.push(nested);
      if (nested.nestedArray) collect(nested);
    }
  })(root.lookup('phasor.v1'));
  assert.ok(types.length > 40, `${types.length} types`);
  for (const messageType of types) {
    const message = filled(messageType);
    assert.deepEqual(checkMessage(messageType, message), [], `${messageType.fullName} as built`);
    assert.deepEqual(checkMessage(messageType, decoded(messageType, message)), [], `${messageType.fullName} decoded`);
    assert.deepEqual(checkMessage(messageType, decoded(messageType, {})), [], `${messageType.fullName} empty, decoded`);
  }
});
