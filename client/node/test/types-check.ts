// Compiled (not run) by test/types.test.js with tsc --strict: the
// declarations in lib/index.d.ts must accept this use of the public API and
// reject the misuse marked @ts-expect-error.
import {
  EncoderClient, PhasorError, toFloat32Array, toTypedArray, fromTypedArray, bfloat16Tensor,
  float16Tensor, int64Tensor, shapeOf, float32ToBfloat16, bfloat16ToFloat32, fieldViolations,
  RequestFieldError, findProtoDir,
} from '../lib';

async function use(): Promise<number> {
  const client = new EncoderClient('localhost:50051', {
    deadlineMs: 5000, maxMessageBytes: 64 << 20, tlsCa: 'ca.pem', token: 't', loadBalancingPolicy: 'round_robin',
    channelOptions: { 'grpc.keepalive_time_ms': 60000 },
  });
  const reply = await client.encodePositions({ positions: { range: { count: 4 } }, spec: { positional: { sinusoidal: { dim: 8 } } } });
  const pe: Float32Array = toFloat32Array(reply.encodings);
  const [rows, cols]: number[] = shapeOf(reply.encodings);
  const rotated = await client.applyRope({ query: bfloat16Tensor(new Float32Array(8), [1, 1, 8]), spec: { rope: {} } }, { deadlineMs: 100 });
  const factor: number = rotated.attention_factor;
  const raw = toTypedArray(rotated.query, { copy: true });
  const status: string = await client.health();
  const services: string[] = await client.listServices();
  const stream = client.encodeObservationsStream();
  stream.write({ observations: { timestamps: int64Tensor([1n, 2n]) } });
  stream.end();
  try {
    await client.alibiBias({ num_heads: 4 });
  } catch (error) {
    if (error instanceof RequestFieldError) return error.code + error.fieldViolations.length; // refused, not sent
    const violations = (error as PhasorError).fieldViolations.map((v) => `${v.field}: ${v.description}`);
    fieldViolations(error).length;
    return violations.length;
  }
  fromTypedArray(new Float64Array(2));
  float16Tensor([1, 2]);
  bfloat16ToFloat32(float32ToBfloat16(pe));
  // @ts-expect-error: the target is a string
  new EncoderClient(50051);
  // @ts-expect-error: no such option
  new EncoderClient('x', { deadline: 5 });
  const protoDir: string = findProtoDir(client.protoDir);
  client.close();
  return protoDir.length + rows + cols + factor + raw.length + status.length + services.length;
}

export { use };
