// Type declarations for phasor-client (lib/index.js).
//
// Messages are plain objects with encoder.proto's field names (snake_case).
// On the way in, int64 fields take a number, a decimal string or a Long, and
// enums their name or number; on the way out int64 fields are decimal
// strings, enums names, bytes Buffers (proto-loader options keepCase,
// longs: String, enums: String, defaults, oneofs). The request and response
// types below are deliberately loose (`Message`): encoder.proto is the
// reference for their fields, and it evolves faster than these declarations.
// At run time every request is checked against encoder.proto before it is
// sent: an unknown field or enum name is a RequestFieldError, not a field
// protobufjs silently drops.

import type { ChannelOptions, ClientDuplexStream, Metadata, ServiceError } from '@grpc/grpc-js';

export type DTypeName =
  | 'DTYPE_UNSPECIFIED' | 'FLOAT32' | 'FLOAT16' | 'BFLOAT16' | 'FLOAT64'
  | 'INT64' | 'INT32' | 'UINT8' | 'BOOL';

/** int64 as sent: a number (exact up to 2^53), a decimal string or a bigint's string. */
export type Int64Like = number | string | { toString(): string };

/** phasor.v1.Tensor: little-endian, row-major bytes, no padding. */
export interface Tensor {
  shape: Int64Like[];
  dtype: DTypeName | number;
  data: Buffer | Uint8Array;
}

/** A Tensor as this package builds it (shape as numbers). */
export interface OutgoingTensor extends Tensor {
  shape: number[];
  dtype: DTypeName;
  data: Buffer;
}

/** A decoded Tensor (int64 shape extents as decimal strings). */
export interface IncomingTensor extends Tensor {
  shape: string[];
  dtype: DTypeName;
  data: Buffer;
}

/** Any request or response message: see proto/phasor/v1/encoder.proto. */
export interface Message {
  [field: string]: any;
}

export interface EncodePositionsResponse extends Message { encodings: IncomingTensor; }
export interface ApplyRopeResponse extends Message {
  query: IncomingTensor;
  key: IncomingTensor | null;
  attention_factor: number;
}
export interface RopeTablesResponse extends Message {
  cos: IncomingTensor;
  sin: IncomingTensor;
  attention_factor: number;
  inv_freq: number[];
}
export interface AlibiBiasResponse extends Message { slopes: IncomingTensor; bias: IncomingTensor | null; }
export interface SchemaEntry { block: string; offset: string; width: string; meaning: string; }
export interface EncodeObservationsResponse extends Message {
  features: IncomingTensor;
  schema: SchemaEntry[];
  state: Message | null;
}

export type ServingStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

export interface FieldViolation { field: string; description: string; }

/** What a failed call rejects with: grpc-js's ServiceError plus the BadRequest detail. */
export interface PhasorError extends ServiceError {
  fieldViolations: FieldViolation[];
}

/**
 * What a call rejects with, before sending, when protobufjs would drop or
 * garble part of the request (unknown field or enum name, two members of a
 * oneof, a typed array as bytes, a scalar of the wrong kind). Shaped like
 * the server's answer: code INVALID_ARGUMENT (3), details
 * "spec.positional.sinusoidal.bse: unknown field ...", fieldViolations, and
 * the BadRequest in `metadata`.
 */
export class RequestFieldError extends TypeError {
  constructor(violations: FieldViolation[]);
  readonly code: number;
  readonly details: string;
  readonly metadata: Metadata;
  readonly fieldViolations: FieldViolation[];
}

export interface EncoderClientOptions {
  /** Deadline of each call in milliseconds; default 30000. */
  deadlineMs?: number;
  /** Send and receive limit in bytes; default $PHASOR_MAX_MESSAGE_BYTES or 64 MiB (the server's default). */
  maxMessageBytes?: number;
  /** TLS with the system roots (implied by any tls* path). */
  tls?: boolean;
  /** PEM file of the CA that signed the server's certificate. */
  tlsCa?: string;
  /** PEM client certificate and key, for servers that require mutual TLS. */
  tlsCert?: string;
  tlsKey?: string;
  /** Name to verify the server's certificate against (and the :authority). */
  tlsServerName?: string;
  /** Sends "authorization: Bearer <token>" on every Encoder call. */
  token?: string;
  /** File whose first line is the token. */
  tokenFile?: string;
  /** e.g. 'round_robin' with a dns:///headless-service:50051 target. */
  loadBalancingPolicy?: string;
  /** Further grpc-js channel options. */
  channelOptions?: ChannelOptions;
  /**
   * Directory holding phasor/v1/encoder.proto. Default: the package's own
   * proto/ (shipped by npm pack), else $PHASOR_PROTO_DIR, else the
   * repository's proto/ (findProtoDir).
   */
  protoDir?: string;
}

export interface CallOptions {
  /** This call's deadline in milliseconds (default: the client's). */
  deadlineMs?: number;
}

export class EncoderClient {
  constructor(target?: string, options?: EncoderClientOptions);
  readonly deadlineMs: number;
  /** Where encoder.proto was read from. */
  readonly protoDir: string;
  encodePositions(request: Message, options?: CallOptions): Promise<EncodePositionsResponse>;
  /** Without `positions` the tokens sit at 0 .. T−1. */
  applyRope(request: Message, options?: CallOptions): Promise<ApplyRopeResponse>;
  ropeTables(request: Message, options?: CallOptions): Promise<RopeTablesResponse>;
  alibiBias(request: Message, options?: CallOptions): Promise<AlibiBiasResponse>;
  encodeObservations(request: Message, options?: CallOptions): Promise<EncodeObservationsResponse>;
  /** A request that fails the check is not sent: the stream errors with INVALID_ARGUMENT (see fieldViolations). */
  encodeObservationsStream(options?: CallOptions): ClientDuplexStream<Message, EncodeObservationsResponse>;
  describe(request: Message, options?: CallOptions): Promise<Message>;
  listProfiles(request?: Message, options?: CallOptions): Promise<Message>;
  echo(request: { payload: Buffer | Uint8Array }, options?: CallOptions): Promise<{ payload: Buffer }>;
  /** grpc.health.v1 Check of `service` ('' = the whole server). */
  health(service?: string, options?: CallOptions): Promise<ServingStatus>;
  /** Service names from server reflection (v1alpha). */
  listServices(options?: CallOptions): Promise<string[]>;
  close(): void;
}

/** The BadRequest field violations of a failed call or a RequestFieldError (empty when none). */
export function fieldViolations(error: unknown): FieldViolation[];

/**
 * The directory holding phasor/v1/encoder.proto: `protoDir` if given, else
 * the first of the package's proto/, $PHASOR_PROTO_DIR and the repository's
 * proto/ that has it. Throws an Error (code 'ENOENT', `paths`) naming the
 * paths looked at and PHASOR_PROTO_DIR when none does.
 */
export function findProtoDir(protoDir?: string): string;

/**
 * The channel's default service config (JSON text), the file the C++ and
 * Python clients load too (client/service_config.json): retries of
 * UNAVAILABLE, CANCELLED and RESOURCE_EXHAUSTED, retry throttling, and a
 * healthCheckConfig that grpc-js ignores. A `grpc.service_config` entry of
 * channelOptions replaces it.
 */
export const DEFAULT_SERVICE_CONFIG: string;

export const DTYPES: Readonly<Record<Exclude<DTypeName, 'DTYPE_UNSPECIFIED'>, { size: number; Array: Function }>>;

/** The shape as numbers. */
export function shapeOf(tensor: Tensor): number[];
export function elementCount(shape: number[]): number;

export type RawArray = Float32Array | Float64Array | BigInt64Array | Int32Array | Uint8Array | Uint16Array;

/**
 * The elements in their own type (FLOAT16/BFLOAT16 as Uint16Array bits): a
 * view when the bytes are aligned and the host little-endian, else a copy.
 */
export function toTypedArray(tensor: Tensor, options?: { copy?: boolean }): RawArray;
/** FLOAT32 (view or copy), FLOAT16 or BFLOAT16 (widened) as a Float32Array. */
export function toFloat32Array(tensor: Tensor, options?: { copy?: boolean }): Float32Array;
/** A Tensor sharing the array's memory on little-endian hosts. */
export function fromTypedArray(array: RawArray, shape?: number[], dtype?: DTypeName): OutgoingTensor;
export function float16ToFloat32(bits: Uint16Array | ArrayLike<number>): Float32Array;
export function bfloat16ToFloat32(bits: Uint16Array | ArrayLike<number>): Float32Array;
/** Rounded to nearest, ties to even; NaN stays NaN. */
export function float32ToFloat16(values: Float32Array | ArrayLike<number>): Uint16Array;
export function float32ToBfloat16(values: Float32Array | ArrayLike<number>): Uint16Array;
export function float16Tensor(values: Float32Array | ArrayLike<number>, shape?: number[]): OutgoingTensor;
export function bfloat16Tensor(values: Float32Array | ArrayLike<number>, shape?: number[]): OutgoingTensor;
export function int64Tensor(values: ArrayLike<number | bigint | string>, shape?: number[]): OutgoingTensor;
