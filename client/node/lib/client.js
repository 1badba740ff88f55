'use strict';
// EncoderClient: phasor.v1.Encoder over @grpc/grpc-js, one method per RPC,
// each returning a Promise of the response message.
//
// Messages are plain objects with the .proto's own field names (snake_case,
// proto-loader's keepCase), so a field path in a server error
// ("spec.positional.sinusoidal.dim") reads like the object you built.
// Decoded int64 fields are decimal strings (exact; a Number would round
// nanosecond timestamps above 2^53), enums are their names, and bytes are
// Buffers; tensors.js turns Tensor messages into typed arrays.
//
// Requests are checked before they are sent (check-request.js): protobufjs
// would silently drop an unknown field or enum name, so such a request is
// refused with a RequestFieldError naming the field path instead.
//
// Thread-safety: Node is single-threaded; one client (one channel) may carry
// any number of concurrent calls. close() ends it.

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');
const { checkMessage } = require('./check-request');

// phasor-server's default message limit; PHASOR_MAX_MESSAGE_BYTES (which
// sets the server's) sets this default too.
const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
const DEFAULT_DEADLINE_MS = 30000;

// The .proto files are looked for in this order, the first directory that
// holds phasor/v1/encoder.proto wins: the package's own proto/ (npm pack
// copies the repository's protos there: scripts/copy-protos.js),
// $PHASOR_PROTO_DIR, and, when the package is used from a Phasor checkout
// rather than installed under node_modules, the repository's proto/
// (client/node/lib -> proto/). The bundled copy comes first because it is
// the one this lib/ was released with. encoder.proto imports nothing;
// google.rpc's messages are declared below (RPC_ROOT), and
// google/protobuf/*.proto would come with protobufjs.
const ENCODER_PROTO = 'phasor/v1/encoder.proto';
const PACKAGE_PROTO_DIR = path.resolve(__dirname, '..', 'proto');
const REPOSITORY_PROTO_DIR = __dirname.split(path.sep).includes('node_modules')
  ? null : path.resolve(__dirname, '..', '..', '..', 'proto');

// The default service config, one file for the C++, Python and Node
// clients (client/service_config.json; its settings and reasons:
// docs/DEPLOY.md, "Losing a replica loses no call"): the package's own copy
// (npm pack copies it in: scripts/copy-protos.js), or, used from a checkout,
// the repository's. The bundled copy comes first, as for the protos.
// grpc-js applies its retryPolicy and retryThrottling and ignores its
// healthCheckConfig (grpc-js has no client-side health checking).
const SERVICE_CONFIG_FILE = 'service_config.json';

function readDefaultServiceConfig() {
  const candidates = [path.resolve(__dirname, '..', SERVICE_CONFIG_FILE)];
  if (!__dirname.split(path.sep).includes('node_modules')) {
    candidates.push(path.resolve(__dirname, '..', '..', SERVICE_CONFIG_FILE));
  }
  for (const file of candidates) {
    if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8');
  }
  throw new Error(`${SERVICE_CONFIG_FILE} not found (looked at ${candidates.join(', ')}): ` +
    'pack the package with its prepack script, or use it from a Phasor checkout');
}

// The JSON text, as the C++ client's kDefaultServiceConfig and the Python
// client's DEFAULT_SERVICE_CONFIG hold it.
const DEFAULT_SERVICE_CONFIG = readDefaultServiceConfig();

const LOADER_OPTIONS = Object.freeze({
  keepCase: true, // field names as in encoder.proto and in error paths
  longs: String, // exact int64 (ns timestamps exceed 2^53)
  enums: String,
  defaults: true,
  oneofs: true, // decoded messages name their oneof member: positions.kind === 'range'
});

// grpc.health.v1 and grpc.reflection.v1alpha, only the fields used here
// (unknown fields are skipped when decoding). Field numbers as in gRPC's
// health.proto and reflection/v1alpha/reflection.proto.
const STANDARD_TYPES = protobuf.Root.fromJSON({
  nested: {
    health: {
      nested: {
        HealthCheckRequest: { fields: { service: { type: 'string', id: 1 } } },
        HealthCheckResponse: {
          fields: { status: { type: 'ServingStatus', id: 1 } },
          nested: {
            ServingStatus: {
              values: { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 },
            },
          },
        },
      },
    },
    reflection: {
      nested: {
        ServerReflectionRequest: {
          fields: { host: { type: 'string', id: 1 }, list_services: { type: 'string', id: 7 } },
        },
        ServerReflectionResponse: {
          fields: {
            list_services_response: { type: 'ListServiceResponse', id: 6 },
            error_response: { type: 'ErrorResponse', id: 7 },
          },
        },
        ListServiceResponse: { fields: { service: { rule: 'repeated', type: 'ServiceResponse', id: 1 } } },
        ServiceResponse: { fields: { name: { type: 'string', id: 1 } } },
        ErrorResponse: {
          fields: { error_code: { type: 'int32', id: 1 }, error_message: { type: 'string', id: 2 } },
        },
      },
    },
  },
});

// The axis of T in ApplyRope's query for each ApplyRopeRequest.TensorLayout,
// by name and number: [T, H, D] (the default), [B, T, H, D], [B, H, T, D].
const TOKEN_AXIS = Object.freeze({
  TENSOR_LAYOUT_UNSPECIFIED: 0, TOKENS_HEADS_DIM: 0, BATCH_SEQ_HEADS_DIM: 1, BATCH_HEADS_SEQ_DIM: 2,
  0: 0, 1: 0, 2: 1, 3: 2,
});

const HEALTH_CHECK = '/grpc.health.v1.Health/Check';
const REFLECTION_INFO = '/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo';
const BAD_REQUEST_URL = 'type.googleapis.com/google.rpc.BadRequest';

function codec(type) {
  return {
    serialize: (object) => Buffer.from(type.encode(type.fromObject(object)).finish()),
    deserialize: (bytes) => type.toObject(type.decode(bytes), { enums: String, defaults: true }),
  };
}

// google.rpc.Status and google.rpc.BadRequest, for the error details
// trailer: the fields this client reads, by the numbers of googleapis'
// google/rpc/status.proto and error_details.proto. proto/ ships no copy of
// those files (they come from each language's googleapis package, see
// docs/API.md); Node programs that want the complete messages load them
// from the google-proto-files package.
const RPC_ROOT = protobuf.Root.fromJSON({ nested: { google: { nested: {
  protobuf: { nested: { Any: { fields: {
    type_url: { type: 'string', id: 1 },
    value: { type: 'bytes', id: 2 },
  } } } },
  rpc: { nested: {
    Status: { fields: {
      code: { type: 'int32', id: 1 },
      message: { type: 'string', id: 2 },
      details: { rule: 'repeated', type: 'google.protobuf.Any', id: 3 },
    } },
    BadRequest: {
      fields: { field_violations: { rule: 'repeated', type: 'FieldViolation', id: 1 } },
      nested: { FieldViolation: { fields: {
        field: { type: 'string', id: 1 },
        description: { type: 'string', id: 2 },
      } } },
    },
  } },
} } } });

const RPC_STATUS = RPC_ROOT.lookupType('google.rpc.Status');
const BAD_REQUEST = RPC_ROOT.lookupType('google.rpc.BadRequest');

/**
 * The directory the client reads phasor/v1/encoder.proto from: `protoDir`
 * when given, else the first of the package's proto/, $PHASOR_PROTO_DIR and
 * the repository's proto/ that holds it. Throws an ENOENT Error naming every
 * path looked at (error.paths) when none does.
 */
function findProtoDir(protoDir = undefined) {
  const explicit = protoDir !== undefined && protoDir !== null;
  const candidates = explicit
    ? [[protoDir, 'the protoDir option']]
    : [[PACKAGE_PROTO_DIR, "the package's proto/"],
      [process.env.PHASOR_PROTO_DIR, '$PHASOR_PROTO_DIR'],
      ...(REPOSITORY_PROTO_DIR ? [[REPOSITORY_PROTO_DIR, "the checkout's proto/"]] : [])];
  const looked = [];
  const paths = [];
  for (const [dir, what] of candidates) {
    if (!dir) {
      looked.push(`${what}: unset`);
      continue;
    }
    const file = path.resolve(dir, ENCODER_PROTO);
    if (fs.existsSync(file)) return path.resolve(dir);
    looked.push(`${what}: ${file}`);
    paths.push(file);
  }
  const remedy = explicit
    ? `pass a protoDir that holds it (PHASOR_PROTO_DIR is not read when protoDir is given)`
    : `set PHASOR_PROTO_DIR to a directory holding it (a Phasor checkout's proto/), or pass protoDir`;
  const error = new Error(`${ENCODER_PROTO} not found (looked at ${looked.join('; ')}): ${remedy}`);
  error.code = 'ENOENT';
  error.paths = paths;
  throw error;
}

const loaded = new Map(); // protoDir -> {Encoder, requestTypes}

function loadProtos(protoDir) {
  if (!loaded.has(protoDir)) {
    const definition = protoLoader.loadSync('phasor/v1/encoder.proto',
      { ...LOADER_OPTIONS, includeDirs: [protoDir] });
    const { Encoder } = grpc.loadPackageDefinition(definition).phasor.v1;
    // The same file through protobufjs itself, for the reflection types the
    // request check walks (proto-loader keeps its own private).
    const root = new protobuf.Root();
    root.resolvePath = (origin, target) => (path.isAbsolute(target) ? target : path.join(protoDir, target));
    root.loadSync(ENCODER_PROTO, LOADER_OPTIONS).resolveAll();
    const requestTypes = new Map(root.lookupService('phasor.v1.Encoder').methodsArray
      .map((method) => [method.name, method.resolvedRequestType]));
    loaded.set(protoDir, { Encoder, requestTypes });
  }
  return loaded.get(protoDir);
}

// grpc-status-details-bin holding a google.rpc.Status with one BadRequest,
// as the server sends it.
function badRequestMetadata(code, details, violations) {
  const badRequest = BAD_REQUEST.encode(BAD_REQUEST.fromObject({ field_violations: violations })).finish();
  const status = RPC_STATUS.encode(RPC_STATUS.fromObject({
    code, message: details, details: [{ type_url: BAD_REQUEST_URL, value: badRequest }],
  })).finish();
  const metadata = new grpc.Metadata();
  metadata.set('grpc-status-details-bin', Buffer.from(status));
  return metadata;
}

/**
 * What a call rejects with, before anything is sent, when protobufjs would
 * drop or garble part of the request (an unknown field or enum name, two
 * members of a oneof, a typed array as bytes, ...; check-request.js). It
 * reads like the server's answer: code INVALID_ARGUMENT, details
 * "field.path: why", fieldViolations and a BadRequest in its metadata.
 */
class RequestFieldError extends TypeError {
  constructor(violations) {
    const details = violations
      .map(({ field, description }) => (field ? `${field}: ${description}` : description)).join('; ');
    super(`${grpc.status.INVALID_ARGUMENT} INVALID_ARGUMENT: ${details}`);
    this.name = 'RequestFieldError';
    this.code = grpc.status.INVALID_ARGUMENT;
    this.details = details;
    this.metadata = badRequestMetadata(this.code, details, violations);
    this.fieldViolations = violations;
  }
}

/** A RequestFieldError when `request` would not reach the server as written, else null. */
function checkRequest(type, request) {
  const violations = checkMessage(type, request);
  return violations.length ? new RequestFieldError(violations) : null;
}

// A grpc-js interceptor for streaming calls: a message that fails the check
// is not sent; the call ends with the RequestFieldError's status
// (INVALID_ARGUMENT and its BadRequest), which the stream emits as its
// 'error', as grpc-js does for a message it cannot serialize.
function checkingInterceptor(type) {
  return (options, nextCall) => {
    let refused = null;
    const call = new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        next(metadata, {
          onReceiveStatus(status, nextStatus) {
            nextStatus(refused
              ? { code: refused.code, details: refused.details, metadata: refused.metadata }
              : status);
          },
        });
      },
      sendMessage(message, next) {
        refused = refused || checkRequest(type, message);
        if (refused) {
          call.cancelWithStatus(refused.code, refused.details);
        } else {
          next(message);
        }
      },
    });
    return call;
  };
}

/**
 * The google.rpc.BadRequest field violations of a failed call, as
 * [{field, description}] (empty when the error carries none). Works on a
 * RequestFieldError too.
 */
function fieldViolations(error) {
  const metadata = error && error.metadata;
  if (!metadata || typeof metadata.get !== 'function') return [];
  const violations = [];
  for (const bytes of metadata.get('grpc-status-details-bin')) {
    const status = RPC_STATUS.decode(bytes);
    for (const detail of status.details) {
      if (detail.type_url !== BAD_REQUEST_URL) continue;
      for (const v of BAD_REQUEST.decode(detail.value).field_violations) {
        violations.push({ field: v.field, description: v.description });
      }
    }
  }
  return violations;
}

function readFile(file) {
  return file === undefined || file === null ? null : fs.readFileSync(file);
}

class EncoderClient {
  /**
   * @param {string} target host:port, or dns:///name:port (with
   *   loadBalancingPolicy 'round_robin' for a Kubernetes headless Service).
   * @param {object} [options] see index.d.ts (EncoderClientOptions).
   */
  constructor(target = 'localhost:50051', options = {}) {
    const {
      deadlineMs = DEFAULT_DEADLINE_MS,
      maxMessageBytes = Number(process.env.PHASOR_MAX_MESSAGE_BYTES) || DEFAULT_MAX_MESSAGE_BYTES,
      tls = false, tlsCa, tlsCert, tlsKey, tlsServerName,
      token, tokenFile,
      loadBalancingPolicy,
      channelOptions = {},
      protoDir,
    } = options;
    if (!(deadlineMs > 0)) throw new RangeError('deadlineMs must be positive');
    this.deadlineMs = deadlineMs;
    this.protoDir = findProtoDir(protoDir);
    const { Encoder, requestTypes } = loadProtos(this.protoDir);
    this._requestTypes = requestTypes;

    const channel = {
      'grpc.max_send_message_length': maxMessageBytes,
      'grpc.max_receive_message_length': maxMessageBytes,
    };
    // The same service config as the C++ and Python clients
    // (DEFAULT_SERVICE_CONFIG): a replica that drains answers UNAVAILABLE or
    // CANCELLED, one whose memory budget is in use RESOURCE_EXHAUSTED (the
    // server marks the RESOURCE_EXHAUSTED a retry cannot fix with
    // grpc-retry-pushback-ms -1, which grpc-js honours), and every Encoder
    // call is a pure function, so another replica may serve it.
    const serviceConfig = JSON.parse(DEFAULT_SERVICE_CONFIG);
    if (loadBalancingPolicy) {
      serviceConfig.loadBalancingConfig = [{ [loadBalancingPolicy]: {} }];
    }
    channel['grpc.service_config'] = JSON.stringify(serviceConfig);
    if (tlsServerName) {
      channel['grpc.ssl_target_name_override'] = tlsServerName;
      channel['grpc.default_authority'] = tlsServerName;
    }
    Object.assign(channel, channelOptions);

    let credentials;
    if (tls || tlsCa || tlsCert || tlsKey) {
      if (Boolean(tlsCert) !== Boolean(tlsKey)) {
        throw new TypeError('give tlsCert and tlsKey together');
      }
      credentials = grpc.credentials.createSsl(readFile(tlsCa), readFile(tlsKey), readFile(tlsCert));
    } else {
      credentials = grpc.credentials.createInsecure();
    }
    let bearer = token;
    if (tokenFile) {
      bearer = fs.readFileSync(tokenFile, 'utf8').split('\n')[0].trim();
      if (!bearer) throw new Error(`${tokenFile} holds no token`);
    }
    // Plain metadata rather than call credentials: grpc-js sends call
    // credentials only over TLS, and loopback servers run plaintext.
    this._metadata = new grpc.Metadata();
    if (bearer) this._metadata.set('authorization', `Bearer ${bearer}`);

    this._stub = new Encoder(target, credentials, channel);
    // Health and reflection share the stub's channel.
    this._generic = new grpc.Client(target, credentials, { channelOverride: this._stub.getChannel() });
  }

  _options(callOptions = {}) {
    return { deadline: Date.now() + (callOptions.deadlineMs || this.deadlineMs) };
  }

  _unary(method, request, callOptions) {
    const refused = checkRequest(this._requestTypes.get(method), request);
    if (refused) return Promise.reject(refused);
    return new Promise((resolve, reject) => {
      this._stub[method](request, this._metadata.clone(), this._options(callOptions),
        (error, response) => {
          if (error) {
            error.fieldViolations = fieldViolations(error);
            reject(error);
          } else {
            resolve(response);
          }
        });
    });
  }

  /** EncodePositions: encodings [N, dim] = content·content_scale + PE. */
  encodePositions(request, callOptions) {
    return this._unary('EncodePositions', request, callOptions);
  }

  /**
   * ApplyRope. Without `positions` the tokens sit at 0 .. T−1, T the
   * query's token extent in its tensor_layout (shared by every batch row),
   * as in the C++ and Python clients.
   */
  applyRope(request, callOptions) {
    let effective = request;
    const layout = request && (request.tensor_layout ?? 0);
    const shape = request && request.query && request.query.shape;
    // An unknown layout gets no default: the check names it instead.
    if (request && !request.positions && Object.prototype.hasOwnProperty.call(TOKEN_AXIS, layout) &&
        Array.isArray(shape) && shape.length > TOKEN_AXIS[layout]) {
      effective = { ...request, positions: { range: { start: 0, count: Number(shape[TOKEN_AXIS[layout]]) } } };
    }
    return this._unary('ApplyRope', effective, callOptions);
  }

  /** RopeTables: cos, sin [N, rotary_dim/2], attention_factor, inv_freq. */
  ropeTables(request, callOptions) {
    return this._unary('RopeTables', request, callOptions);
  }

  /** AlibiBias: slopes [H] and, with q_len and k_len, bias [H, q, k]. */
  alibiBias(request, callOptions) {
    return this._unary('AlibiBias', request, callOptions);
  }

  /** EncodeObservations: features [rows, F], schema, state. */
  encodeObservations(request, callOptions) {
    return this._unary('EncodeObservations', request, callOptions);
  }

  /**
   * EncodeObservationsStream: a grpc-js duplex stream over the chunks of one
   * series (write requests, read responses, end() when done). The deadline
   * covers the whole stream. A request that fails the check is not sent: the
   * stream ends with an INVALID_ARGUMENT 'error' whose BadRequest
   * (fieldViolations(error)) names the field.
   */
  encodeObservationsStream(callOptions) {
    const interceptors = [checkingInterceptor(this._requestTypes.get('EncodeObservationsStream'))];
    return this._stub.EncodeObservationsStream(this._metadata.clone(),
      { ...this._options(callOptions), interceptors });
  }

  /** Describe: frequencies, wavelengths, unambiguous range, similarity. */
  describe(request, callOptions) {
    return this._unary('Describe', request, callOptions);
  }

  /** ListProfiles: the server's named encoder configurations. */
  listProfiles(request = {}, callOptions) {
    return this._unary('ListProfiles', request, callOptions);
  }

  /** Echo (servers started with --enable_echo). */
  echo(request, callOptions) {
    return this._unary('Echo', request, callOptions);
  }

  /**
   * grpc.health.v1 Check: 'SERVING', 'NOT_SERVING', ... for `service` ('' =
   * the server as a whole, 'phasor.v1.Encoder' = the encoder).
   */
  health(service = '', callOptions) {
    const requestType = STANDARD_TYPES.lookupType('health.HealthCheckRequest');
    const refused = checkRequest(requestType, { service });
    if (refused) return Promise.reject(refused);
    const request = codec(requestType);
    const response = codec(STANDARD_TYPES.lookupType('health.HealthCheckResponse'));
    return new Promise((resolve, reject) => {
      this._generic.makeUnaryRequest(HEALTH_CHECK, request.serialize, response.deserialize,
        { service }, new grpc.Metadata(), this._options(callOptions),
        (error, reply) => (error ? reject(error) : resolve(reply.status)));
    });
  }

  /**
   * The services the server offers, from its reflection service: v1alpha,
   * the only version gRPC 1.51 (Debian 12's) serves.
   */
  listServices(callOptions) {
    const request = codec(STANDARD_TYPES.lookupType('reflection.ServerReflectionRequest'));
    const response = codec(STANDARD_TYPES.lookupType('reflection.ServerReflectionResponse'));
    return new Promise((resolve, reject) => {
      const call = this._generic.makeBidiStreamRequest(REFLECTION_INFO, request.serialize,
        response.deserialize, new grpc.Metadata(), this._options(callOptions));
      let names = null;
      call.on('data', (reply) => {
        if (reply.error_response) {
          reject(new Error(`reflection: ${reply.error_response.error_message}`));
        } else if (reply.list_services_response) {
          names = reply.list_services_response.service.map((s) => s.name).sort();
        }
        call.end();
      });
      call.on('error', reject);
      call.on('end', () => (names ? resolve(names) : reject(new Error('reflection: no answer'))));
      call.write({ list_services: '' });
    });
  }

  /** Closes the channel; calls in flight are cancelled. */
  close() {
    this._generic.close();
    this._stub.close();
  }
}

module.exports = {
  EncoderClient, RequestFieldError, fieldViolations, findProtoDir, LOADER_OPTIONS, DEFAULT_SERVICE_CONFIG,
};
