// Calls phasor.v1.Encoder from Java with grpc-java: health, EncodePositions
// (float32, float16 and bfloat16 outputs), ApplyRope and EncodeObservations,
// decoding every Tensor with a little-endian ByteBuffer, and reads a
// BadRequest. Every number is checked against the formula computed here
// (never against another Phasor call); exits 0 only when all match.
//
// Built offline by tests/e2e/java/CMakeLists.txt with Debian's grpc-java
// 1.41 and protobuf-java 3.21 (stubs from protoc + grpc_java_plugin at build
// time); tests/e2e/test_java_client.py runs it against a real phasor-server.
//
//   java -cp <classes>:<jars> PhasorJavaExample 127.0.0.1:50051

import com.google.protobuf.Any;
import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.BadRequest;
import dev.phasor.v1.ApplyRopeRequest;
import dev.phasor.v1.ApplyRopeResponse;
import dev.phasor.v1.DType;
import dev.phasor.v1.EncodeObservationsRequest;
import dev.phasor.v1.EncodeObservationsResponse;
import dev.phasor.v1.EncodePositionsRequest;
import dev.phasor.v1.EncodePositionsResponse;
import dev.phasor.v1.EncoderGrpc;
import dev.phasor.v1.EncoderSpec;
import dev.phasor.v1.Observations;
import dev.phasor.v1.PositionalSpec;
import dev.phasor.v1.Positions;
import dev.phasor.v1.RopeSpec;
import dev.phasor.v1.SinusoidalSpec;
import dev.phasor.v1.TemporalSpec;
import dev.phasor.v1.Tensor;
import dev.phasor.v1.TimeBlock;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.protobuf.StatusProto;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

public final class PhasorJavaExample {
  private static int failures = 0;

  // [snippet: tensor decoding]
  /** Element count of a Tensor's shape (1 for a scalar). */
  static int elements(Tensor tensor) {
    long count = 1;
    for (long extent : tensor.getShapeList()) count *= extent;
    return Math.toIntExact(count);
  }

  /** A FLOAT32, FLOAT16 or BFLOAT16 Tensor as float[] (row-major). */
  static float[] toFloats(Tensor tensor) {
    // Tensor bytes are little-endian; Java's default ByteBuffer order is
    // big-endian, so the order() call is what makes the numbers right.
    // asReadOnlyByteBuffer() does not copy; absolute gets need no alignment.
    ByteBuffer bytes = tensor.getData().asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
    float[] out = new float[elements(tensor)];
    int size = tensor.getDtype() == DType.FLOAT32 ? 4 : 2;
    if (bytes.remaining() != out.length * size) {
      throw new IllegalArgumentException(bytes.remaining() + " bytes for " + out.length + " elements");
    }
    for (int i = 0; i < out.length; i++) {
      switch (tensor.getDtype()) {
        case FLOAT32: out[i] = bytes.getFloat(4 * i); break;
        // bfloat16 is the upper half of a float32.
        case BFLOAT16: out[i] = Float.intBitsToFloat((bytes.getShort(2 * i) & 0xffff) << 16); break;
        case FLOAT16: out[i] = halfToFloat(bytes.getShort(2 * i)); break;
        default: throw new IllegalArgumentException("not a float type: " + tensor.getDtype());
      }
    }
    return out;
  }

  /** IEEE 754 binary16 to float, exactly (Java 20+ has Float.float16ToFloat). */
  static float halfToFloat(short half) {
    int bits = half & 0xffff;
    int sign = (bits & 0x8000) << 16;
    int exponent = (bits >>> 10) & 0x1f;
    int mantissa = bits & 0x3ff;
    if (exponent == 0x1f) return Float.intBitsToFloat(sign | 0x7f800000 | (mantissa << 13));
    if (exponent != 0) return Float.intBitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
    float value = mantissa * 0x1p-24f; // zero and subnormals
    return sign != 0 ? -value : value;
  }

  /** float[] as a FLOAT32 Tensor. */
  static Tensor floatTensor(float[] values, long... shape) {
    ByteBuffer bytes = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    for (float v : values) bytes.putFloat(v);
    bytes.flip();
    return Tensor.newBuilder().setDtype(DType.FLOAT32).addAllShape(toList(shape))
        .setData(ByteString.copyFrom(bytes)).build();
  }

  /** long[] (positions, nanosecond timestamps) as an INT64 Tensor. */
  static Tensor int64Tensor(long... values) {
    ByteBuffer bytes = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    for (long v : values) bytes.putLong(v);
    bytes.flip();
    return Tensor.newBuilder().setDtype(DType.INT64).addShape(values.length)
        .setData(ByteString.copyFrom(bytes)).build();
  }
  // [end snippet]

  static List<Long> toList(long[] values) {
    List<Long> out = new ArrayList<>();
    for (long v : values) out.add(v);
    return out;
  }

  // [snippet: BadRequest]
  /** The BadRequest field violations of a failed call, as "field: description". */
  static List<String> fieldViolations(StatusRuntimeException error) throws InvalidProtocolBufferException {
    List<String> out = new ArrayList<>();
    com.google.rpc.Status status = StatusProto.fromThrowable(error); // null without details
    if (status == null) return out;
    for (Any detail : status.getDetailsList()) {
      if (!detail.is(BadRequest.class)) continue;
      for (BadRequest.FieldViolation v : detail.unpack(BadRequest.class).getFieldViolationsList()) {
        out.add(v.getField() + ": " + v.getDescription());
      }
    }
    return out;
  }
  // [end snippet]

  static void near(String what, float got, double want, double tolerance) {
    if (!(Math.abs(got - want) <= tolerance)) {
      failures++;
      System.err.printf("MISMATCH %s: got %.9g, want %.9g (tolerance %g)%n", what, got, want, tolerance);
    }
  }

  static void check(boolean ok, String what) {
    if (!ok) {
      failures++;
      System.err.println("FAILED " + what);
    }
  }

  static EncoderSpec sinusoid(long dim) {
    return EncoderSpec.newBuilder().setPositional(PositionalSpec.newBuilder()
        .setSinusoidal(SinusoidalSpec.newBuilder().setDim(dim))).build();
  }

  public static void main(String[] args) throws Exception {
    String target = args.length > 0 ? args[0] : "localhost:50051";
    // [snippet: channel]
    ManagedChannel channel = ManagedChannelBuilder.forTarget(target)
        .usePlaintext() // .useTransportSecurity() for TLS
        .maxInboundMessageSize(64 << 20) // phasor-server's default limit (gRPC's is 4 MiB)
        .defaultLoadBalancingPolicy("round_robin") // every address of dns:///headless-service:50051
        .build();
    EncoderGrpc.EncoderBlockingStub encoder = EncoderGrpc.newBlockingStub(channel);
    // [end snippet]
    try {
      // [snippet: health]
      HealthCheckResponse health = HealthGrpc.newBlockingStub(channel)
          .withDeadlineAfter(10, TimeUnit.SECONDS).check(HealthCheckRequest.getDefaultInstance());
      // [end snippet]
      System.out.println("health: " + health.getStatus());
      check(health.getStatus() == HealthCheckResponse.ServingStatus.SERVING, "health");

      // EncodePositions: PE[p, 2k] = sin(p·ω_k), PE[p, 2k+1] = cos(p·ω_k),
      // ω_k = base^(−2k/dim); fp16 / bf16 round once more (2^-11, 2^-8).
      final int count = 6, dim = 8;
      DType[] dtypes = {DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16};
      double[] tolerances = {2e-6, 0x1p-11, 0x1p-8};
      for (int d = 0; d < dtypes.length; d++) {
        // [snippet: EncodePositions]
        EncodePositionsResponse reply = encoder.withDeadlineAfter(10, TimeUnit.SECONDS)
            .encodePositions(EncodePositionsRequest.newBuilder()
                .setPositions(Positions.newBuilder().setRange(Positions.Range.newBuilder().setCount(count)))
                .setSpec(sinusoid(dim))
                .setOutputDtype(dtypes[d])
                .build());
        float[] pe = toFloats(reply.getEncodings()); // [count, dim], row-major
        // [end snippet]
        check(pe.length == count * dim, "EncodePositions size " + pe.length);
        for (int p = 0; p < count; p++) {
          for (int k = 0; k < dim / 2; k++) {
            double omega = Math.pow(10000, -2.0 * k / dim);
            near("PE " + dtypes[d] + " [" + p + "," + 2 * k + "]", pe[p * dim + 2 * k], Math.sin(p * omega), tolerances[d]);
            near("PE " + dtypes[d] + " [" + p + "," + (2 * k + 1) + "]", pe[p * dim + 2 * k + 1], Math.cos(p * omega), tolerances[d]);
          }
        }
        System.out.printf("EncodePositions %s: [%d,%d] row 1 = %.6f %.6f%n", dtypes[d], count, dim, pe[dim], pe[dim + 1]);
      }

      // ApplyRope, HALF layout: pairs (i, i + D/2) turn by p·θ_i, θ_i = base^(−2i/D).
      final int tokens = 3, heads = 2, headDim = 8;
      long[] positions = {5, 100, 70000};
      float[] query = new float[tokens * heads * headDim];
      for (int i = 0; i < query.length; i++) query[i] = (i % 7) - 2.5f;
      ApplyRopeResponse rope = encoder.withDeadlineAfter(10, TimeUnit.SECONDS).applyRope(
          ApplyRopeRequest.newBuilder()
              .setQuery(floatTensor(query, tokens, heads, headDim))
              .setPositions(Positions.newBuilder().setValues(int64Tensor(positions)))
              .setSpec(EncoderSpec.newBuilder().setRope(RopeSpec.getDefaultInstance()))
              .build());
      float[] rotated = toFloats(rope.getQuery());
      check(rotated.length == query.length, "ApplyRope size");
      int half = headDim / 2;
      for (int t = 0; t < tokens; t++) {
        for (int h = 0; h < heads; h++) {
          int row = (t * heads + h) * headDim;
          for (int i = 0; i < half; i++) {
            double angle = positions[t] * Math.pow(10000, -2.0 * i / headDim);
            double x = query[row + i], y = query[row + i + half];
            near("rope [" + t + "," + h + "," + i + "]", rotated[row + i], x * Math.cos(angle) - y * Math.sin(angle), 1e-5);
            near("rope [" + t + "," + h + "," + (i + half) + "]", rotated[row + i + half], y * Math.cos(angle) + x * Math.sin(angle), 1e-5);
          }
        }
      }
      System.out.printf("ApplyRope: [%d,%d,%d] attention_factor %s%n", tokens, heads, headDim, rope.getAttentionFactor());

      // EncodeObservations, time block: τ = t − t_0 seconds, periods
      // P_k = min·(max/min)^(k/(n−1)), columns [sin(2πτ/P_k), cos(2πτ/P_k)].
      final long first = 1_700_000_000_000_000_000L;
      long[] stamps = {first, first + 1_500_000_000L, first + 3_600_000_000_000L};
      final int timeDim = 6;
      final double minPeriod = 1, maxPeriod = 86400;
      EncodeObservationsResponse observed = encoder.withDeadlineAfter(10, TimeUnit.SECONDS).encodeObservations(
          EncodeObservationsRequest.newBuilder()
              .setObservations(Observations.newBuilder().setTimestamps(int64Tensor(stamps)))
              .setSpec(EncoderSpec.newBuilder().setTemporal(TemporalSpec.newBuilder().setTime(
                  TimeBlock.newBuilder().setDim(timeDim).setMinPeriodSeconds(minPeriod).setMaxPeriodSeconds(maxPeriod))))
              .build());
      float[] features = toFloats(observed.getFeatures());
      check(observed.getFeatures().getShapeList().equals(List.of(3L, (long) timeDim)),
          "features shape " + observed.getFeatures().getShapeList());
      for (int r = 0; r < stamps.length && features.length == 3 * timeDim; r++) {
        double tau = (stamps[r] - first) / 1e9;
        for (int k = 0; k < timeDim / 2; k++) {
          double angle = 2 * Math.PI * tau / (minPeriod * Math.pow(maxPeriod / minPeriod, k / (timeDim / 2.0 - 1)));
          near("time [" + r + "," + 2 * k + "]", features[r * timeDim + 2 * k], Math.sin(angle), 2e-6);
          near("time [" + r + "," + (2 * k + 1) + "]", features[r * timeDim + 2 * k + 1], Math.cos(angle), 2e-6);
        }
      }
      System.out.println("EncodeObservations: schema " + observed.getSchema(0).getBlock()
          + " width " + observed.getSchema(0).getWidth());

      // An odd dim: INVALID_ARGUMENT with a field violation.
      try {
        encoder.withDeadlineAfter(10, TimeUnit.SECONDS).encodePositions(EncodePositionsRequest.newBuilder()
            .setPositions(Positions.newBuilder().setRange(Positions.Range.newBuilder().setCount(2)))
            .setSpec(sinusoid(7)).build());
        check(false, "dim 7 accepted");
      } catch (StatusRuntimeException error) {
        List<String> violations = fieldViolations(error);
        System.out.println("dim 7: " + error.getStatus().getCode() + " " + violations);
        check(error.getStatus().getCode() == io.grpc.Status.Code.INVALID_ARGUMENT, "dim 7 code");
        check(violations.size() == 1 && violations.get(0).startsWith("spec.positional.sinusoidal.dim: "),
            "dim 7 violations " + violations);
      }
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    if (failures > 0) {
      System.err.println(failures + " checks failed");
      System.exit(1);
    }
    System.out.println("all values match the formulas");
  }
}
