// Validates Kubernetes objects against the JSON schemas of the Kubernetes
// API (kubernetes-models, generated from the Kubernetes OpenAPI spec) and of
// the prometheus-operator CRDs (@kubernetes-models/prometheus-operator).
//
//   node validate.mjs < objects.json
//
// stdin: a JSON array of {"source": "...", "object": {...}}. stdout: a JSON
// array with, per object, "errors" (schema violations: wrong types, missing
// required fields, bad enum values) and "unknown" (fields the schema does
// not define: the API server drops them or, with strict field validation,
// refuses the object; the schema validators accept them, so they are found
// here by watching which fields the validator reads). Exit status 1 when any
// object has either, 2 on bad input.
import { readFileSync } from "node:fs";

// apiVersion/kind -> module. The core group ("v1") has no group directory.
function modulePath(apiVersion, kind) {
  if (apiVersion.startsWith("monitoring.coreos.com/")) {
    return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
  }
  return `kubernetes-models/${apiVersion}/${kind}`;
}

// A deep proxy that records, per object path, the fields the validator read
// and whether it enumerated the object's keys (a map, such as labels or
// resource quantities, whose keys are all allowed).
function watch(value, path, seen) {
  if (value === null || typeof value !== "object") return value;
  const record = { read: new Set(), enumerated: false, value };
  seen.set(path, record);
  return new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key === "string") record.read.add(key);
      const child = Reflect.get(target, key, receiver);
      return typeof key === "string" && Object.prototype.hasOwnProperty.call(target, key)
        ? watch(child, `${path}/${key}`, seen)
        : child;
    },
    has(target, key) {
      if (typeof key === "string") record.read.add(key);
      return Reflect.has(target, key);
    },
    getOwnPropertyDescriptor(target, key) {
      if (typeof key === "string") record.read.add(key);
      return Reflect.getOwnPropertyDescriptor(target, key);
    },
    ownKeys(target) {
      record.enumerated = true;
      return Reflect.ownKeys(target);
    },
  });
}

async function check({ source, object }) {
  const result = { source, kind: object.kind, name: object.metadata?.name, errors: [], unknown: [] };
  let Model;
  try {
    const module = await import(modulePath(object.apiVersion, object.kind));
    Model = module[object.kind];
  } catch (error) {
    result.errors.push(`no schema for ${object.apiVersion} ${object.kind}: ${error.message}`);
    return result;
  }
  // Top-level fields of every object kind here (a ConfigMap has data, not spec).
  const topLevel = ["apiVersion", "kind", "metadata", "spec"];
  if (object.kind === "ConfigMap") topLevel.push("data", "binaryData", "immutable");
  for (const key of Object.keys(object)) {
    if (!topLevel.includes(key)) {
      result.unknown.push(`/${key}`);
    }
  }
  // The model's constructor deep-copies what it is given, so the watched
  // fields are put on the model afterwards, where validate() reads them.
  const seen = new Map();
  const model = new Model({});
  for (const key of Object.keys(object)) model[key] = watch(object[key], `/${key}`, seen);
  try {
    model.validate();
  } catch (error) {
    result.errors.push(...String(error.message).split("\n").filter(Boolean));
  }
  for (const [path, record] of seen) {
    if (record.enumerated || Array.isArray(record.value)) continue;
    for (const key of Object.keys(record.value)) {
      if (!record.read.has(key)) result.unknown.push(`${path}/${key}`);
    }
  }
  return result;
}

let input;
try {
  input = JSON.parse(readFileSync(0, "utf8"));
} catch (error) {
  console.error(`validate.mjs: stdin is not a JSON array: ${error.message}`);
  process.exit(2);
}
const results = [];
for (const item of input) results.push(await check(item));
console.log(JSON.stringify(results, null, 2));
process.exit(results.some((r) => r.errors.length || r.unknown.length) ? 1 : 0);
