'use strict';
// Calls phasor.v1.Encoder from Node.js: EncodePositions (float32, float16,
// bfloat16 outputs), ApplyRope (float32 and bfloat16 queries),
// EncodeObservations, health, reflection, a BadRequest and a request the
// client refuses, and checks every number against the formula computed here
// (never against another Phasor call). Exits 0 when all checks pass, 1
// naming each mismatch otherwise.
//
//   cd client/node && npm ci && node example.js localhost:50051
//
// test/example.test.js runs it against a real phasor-server.

// [snippet: require]
const {
  EncoderClient, RequestFieldError, toFloat32Array, fromTypedArray, bfloat16Tensor, int64Tensor, shapeOf,
} = require('./lib'); // require('phasor-client') when installed as a package
// [end snippet]

const target = process.argv[2] || 'localhost:50051';
let failures = 0;

function near(what, got, want, tolerance) {
  if (!(Math.abs(got - want) <= tolerance)) {
    failures += 1;
    console.error(`MISMATCH ${what}: got ${got}, want ${want} (tolerance ${tolerance})`);
  }
}

function that(ok, what) {
  if (!ok) {
    failures += 1;
    console.error(`FAILED ${what}`);
  }
}

async function main() {
  // [snippet: connect]
  const client = new EncoderClient(target, {
    deadlineMs: 10000, // every call gets this deadline unless it passes its own
    maxMessageBytes: 64 * 1024 * 1024, // phasor-server's default limit
    // loadBalancingPolicy: 'round_robin',  // with a dns:/// target
    // tlsCa: 'ca.pem', token: '...',       // TLS, bearer token
  });
  // [end snippet]
  try {
    // [snippet: health]
    const serving = await client.health(); // 'SERVING' (grpc.health.v1, service '')
    const services = await client.listServices(); // reflection v1alpha
    // [end snippet]
    that(serving === 'SERVING', 'health SERVING');
    that(services.includes('phasor.v1.Encoder'), `reflection lists ${services}`);
    console.log('services:', services.join(' '));

    // EncodePositions: PE[p, 2k] = sin(p·ω_k), PE[p, 2k+1] = cos(p·ω_k),
    // ω_k = base^(−2k/dim). float32 within 2e-6; the 16-bit outputs round
    // once more: half an ulp of a value in [-1, 1] is 2^-11 (fp16), 2^-8 (bf16).
    const count = 6;
    const dim = 8;
    const base = 10000;
    for (const [dtype, tolerance] of [['FLOAT32', 2e-6], ['FLOAT16', 2 ** -11], ['BFLOAT16', 2 ** -8]]) {
      // [snippet: EncodePositions]
      const reply = await client.encodePositions({
        positions: { range: { start: 0, count } },
        spec: { positional: { sinusoidal: { dim } } },
        output_dtype: dtype,
      });
      const pe = toFloat32Array(reply.encodings); // Float32Array, row-major [count, dim]
      const [rows, cols] = shapeOf(reply.encodings); // int64 shape as numbers
      // [end snippet]
      that(rows === count && cols === dim && pe.length === count * dim, `${dtype} shape ${rows}x${cols}`);
      for (let p = 0; p < count; p++) {
        for (let k = 0; k < dim / 2; k++) {
          const omega = base ** (-2 * k / dim);
          near(`PE ${dtype} [${p},${2 * k}]`, pe[p * dim + 2 * k], Math.sin(p * omega), tolerance);
          near(`PE ${dtype} [${p},${2 * k + 1}]`, pe[p * dim + 2 * k + 1], Math.cos(p * omega), tolerance);
        }
      }
      console.log(`EncodePositions ${dtype}: row 1 = ${Array.from(pe.subarray(dim, 2 * dim), (v) => v.toFixed(6)).join(' ')}`);
    }

    // ApplyRope, HALF layout: pairs (i, i + D/2) turn by p·θ_i,
    // θ_i = base^(−2i/D); positions default to 0 .. T−1.
    const [T, H, D] = [4, 2, 8];
    const query = Float32Array.from({ length: T * H * D }, (_, i) => (i % 7) - 2.5);
    for (const dtype of ['FLOAT32', 'BFLOAT16']) {
      // [snippet: ApplyRope]
      const tensor = dtype === 'BFLOAT16'
        ? bfloat16Tensor(query, [T, H, D]) // rounded to nearest even
        : fromTypedArray(query, [T, H, D]); // shares query's memory
      const rope = await client.applyRope({
        query: tensor,
        positions: { values: int64Tensor([0, 1, 2, 70000]) },
        spec: { rope: { base: 10000 } }, // rotary_dim 0 = D, layout HALF
      });
      const rotated = toFloat32Array(rope.query); // bf16 widened to float32
      // [end snippet]
      // The inputs are multiples of 0.5 below 4: exact in bf16. A bf16
      // output rounds to 8 significant bits: 2^-8 relative, 4·2^-8 here.
      const tolerance = dtype === 'FLOAT32' ? 1e-5 : 4 * 2 ** -8;
      const positions = [0, 1, 2, 70000];
      that(rope.query.dtype === dtype && rotated.length === query.length, `ApplyRope ${dtype} output`);
      for (let t = 0; t < T; t++) {
        for (let h = 0; h < H; h++) {
          const row = (t * H + h) * D;
          for (let i = 0; i < D / 2; i++) {
            const angle = positions[t] * 10000 ** (-2 * i / D);
            const x = query[row + i];
            const y = query[row + i + D / 2];
            near(`rope ${dtype} [${t},${h},${i}]`, rotated[row + i], x * Math.cos(angle) - y * Math.sin(angle), tolerance);
            near(`rope ${dtype} [${t},${h},${i + D / 2}]`, rotated[row + i + D / 2], y * Math.cos(angle) + x * Math.sin(angle), tolerance);
          }
        }
      }
      console.log(`ApplyRope ${dtype}: [${shapeOf(rope.query)}], attention_factor ${rope.attention_factor}`);
    }

    // EncodeObservations, time block only: τ = t − t_0 in seconds, periods
    // P_k = min·(max/min)^(k/(n−1)) for the n = dim/2 pairs, columns
    // [sin(2πτ/P_k), cos(2πτ/P_k)] per k.
    const first = 1700000000000000000n; // ns since the epoch: needs BigInt
    const stamps = [first, first + 1500000000n, first + 3600000000000n];
    const timeDim = 6;
    const [minPeriod, maxPeriod] = [1, 86400];
    const observed = await client.encodeObservations({
      observations: {
        timestamps: int64Tensor(stamps),
        values: fromTypedArray(Float32Array.of(1, 2, 3), [3, 1]),
      },
      spec: { temporal: { time: { dim: timeDim, min_period_seconds: minPeriod, max_period_seconds: maxPeriod } } },
    });
    const features = toFloat32Array(observed.features);
    that(shapeOf(observed.features).join() === `3,${timeDim}`, `features shape ${shapeOf(observed.features)}`);
    for (let r = 0; r < stamps.length; r++) {
      const tau = Number(stamps[r] - first) / 1e9;
      for (let k = 0; k < timeDim / 2; k++) {
        const period = minPeriod * (maxPeriod / minPeriod) ** (k / (timeDim / 2 - 1));
        near(`time [${r},${2 * k}]`, features[r * timeDim + 2 * k], Math.sin(2 * Math.PI * tau / period), 2e-6);
        near(`time [${r},${2 * k + 1}]`, features[r * timeDim + 2 * k + 1], Math.cos(2 * Math.PI * tau / period), 2e-6);
      }
    }
    // int64 fields (state times) arrive as exact decimal strings.
    that(observed.state.last_timestamp_ns === String(stamps[2]), `state ${observed.state.last_timestamp_ns}`);
    console.log('EncodeObservations schema:', observed.schema.map((e) => `${e.block}[${e.offset}+${e.width}]`).join(' '));

    // [snippet: BadRequest]
    try {
      await client.encodePositions({
        positions: { range: { count: 2 } },
        spec: { positional: { sinusoidal: { dim: 7 } } },
      });
      that(false, 'dim 7 accepted');
    } catch (error) { // a grpc-js ServiceError plus the decoded BadRequest
      console.log(`dim 7: code ${error.code}:`, error.fieldViolations);
      // [ { field: 'spec.positional.sinusoidal.dim', description: 'must be even ...' } ]
      that(error.code === 3 && error.fieldViolations.length === 1 &&
           error.fieldViolations[0].field === 'spec.positional.sinusoidal.dim', 'dim 7 violation');
    }
    // [end snippet]

    // [snippet: unknown field]
    try {
      await client.encodePositions({
        positions: { range: { count: 2 } },
        spec: { positional: { sinusoidal: { dim: 8, bse: 100 } } }, // meant: base
      });
      that(false, 'bse accepted');
    } catch (error) { // refused before sending: protobufjs would drop `bse`
      console.log(`bse: ${error.name}:`, error.details);
      // spec.positional.sinusoidal.bse: unknown field of phasor.v1.SinusoidalSpec
      //   (did you mean base?); its fields: dim, base, layout, frequencies
      that(error instanceof RequestFieldError && error.code === 3 &&
           error.fieldViolations[0].field === 'spec.positional.sinusoidal.bse', 'bse refused');
    }
    // [end snippet]
  } finally {
    client.close();
  }
  if (failures) {
    console.error(`${failures} checks failed`);
    process.exit(1);
  }
  console.log('all values match the formulas');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
