// Command phasor-go-example calls phasor.v1.Encoder from Go: EncodePositions,
// ApplyRope and EncodeObservations, decoding every Tensor with
// encoding/binary, and checks each number against the formula computed here
// (never against another Phasor call). It also shows health, reflection
// (v1alpha) and how to read a BadRequest's field violations. It exits 0 when
// every check passes and 1, naming the first mismatch, otherwise.
//
// Build (offline, Debian's Go packages, GOPATH mode): see client/go/README.md;
// the CMake target phasor_go_example does it and tests/e2e/test_go_client.py
// runs it against a real phasor-server.
//
//	phasor-go-example -target dns:///127.0.0.1:50051
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	phasorv1 "phasor.dev/api/phasor/v1"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
)

// [snippet: tensor decoding]
// elements is the element count of a shape (1 for a scalar).
func elements(t *phasorv1.Tensor) int {
	n := 1
	for _, extent := range t.GetShape() {
		n *= int(extent)
	}
	return n
}

// Float32s decodes a FLOAT32, FLOAT16 or BFLOAT16 Tensor into float32s.
// The bytes are little-endian and row-major; reading them through
// encoding/binary is correct on any host and whatever the slice's alignment.
func Float32s(t *phasorv1.Tensor) ([]float32, error) {
	n, data := elements(t), t.GetData()
	size := map[phasorv1.DType]int{phasorv1.DType_FLOAT32: 4,
		phasorv1.DType_FLOAT16: 2, phasorv1.DType_BFLOAT16: 2}[t.GetDtype()]
	if size == 0 {
		return nil, fmt.Errorf("dtype %v is not a float32/16 type", t.GetDtype())
	}
	if len(data) != n*size {
		return nil, fmt.Errorf("%d bytes for %d elements of %v", len(data), n, t.GetDtype())
	}
	out := make([]float32, n)
	for i := range out {
		switch t.GetDtype() {
		case phasorv1.DType_FLOAT32:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		case phasorv1.DType_BFLOAT16: // the upper half of a float32
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(data[2*i:])) << 16)
		case phasorv1.DType_FLOAT16:
			out[i] = Float16ToFloat32(binary.LittleEndian.Uint16(data[2*i:]))
		}
	}
	return out, nil
}

// Float16ToFloat32 widens an IEEE 754 binary16 value (exactly).
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exponent := uint32(h>>10) & 0x1f
	mantissa := uint32(h) & 0x3ff
	switch {
	case exponent == 0x1f: // Inf, NaN
		return math.Float32frombits(sign | 0x7f800000 | mantissa<<13)
	case exponent != 0: // normal: rebias 15 -> 127
		return math.Float32frombits(sign | (exponent+112)<<23 | mantissa<<13)
	default: // zero and subnormals: mantissa · 2^-24
		value := float32(mantissa) * float32(math.Ldexp(1, -24))
		if sign != 0 {
			return -value
		}
		return value
	}
}

// Float32Tensor encodes float32 values as a FLOAT32 Tensor.
func Float32Tensor(values []float32, shape ...int64) *phasorv1.Tensor {
	data := make([]byte, 4*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return &phasorv1.Tensor{Shape: shape, Dtype: phasorv1.DType_FLOAT32, Data: data}
}

// Int64Tensor encodes int64 values (positions, nanosecond timestamps).
func Int64Tensor(values []int64, shape ...int64) *phasorv1.Tensor {
	data := make([]byte, 8*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint64(data[8*i:], uint64(v))
	}
	return &phasorv1.Tensor{Shape: shape, Dtype: phasorv1.DType_INT64, Data: data}
}

// [end snippet]

// [snippet: BadRequest]
// FieldViolations returns the google.rpc.BadRequest field violations of a
// failed call as "field: description" lines (none for other errors).
func FieldViolations(err error) []string {
	var out []string
	for _, detail := range status.Convert(err).Details() {
		if bad, ok := detail.(*errdetails.BadRequest); ok {
			for _, v := range bad.GetFieldViolations() {
				out = append(out, v.GetField()+": "+v.GetDescription())
			}
		}
	}
	return out
}

// [end snippet]

// checker counts mismatches against the formula.
type checker struct{ failures int }

func (c *checker) near(what string, got float32, want, tolerance float64) {
	if math.Abs(float64(got)-want) > tolerance || math.IsNaN(float64(got)) {
		c.failures++
		fmt.Fprintf(os.Stderr, "MISMATCH %s: got %.9g, want %.9g (tolerance %g)\n",
			what, got, want, tolerance)
	}
}

func (c *checker) that(ok bool, format string, args ...interface{}) {
	if !ok {
		c.failures++
		fmt.Fprintf(os.Stderr, "FAILED "+format+"\n", args...)
	}
}

func main() {
	target := flag.String("target", "dns:///localhost:50051",
		"server address; dns:///host:port resolves every address of a headless Service")
	deadline := flag.Duration("deadline", 10*time.Second, "deadline of each call")
	flag.Parse()

	// [snippet: dial]
	const maxMessageBytes = 64 << 20 // phasor-server's default limit
	conn, err := grpc.Dial(*target,
		grpc.WithInsecure(), // grpc.WithTransportCredentials(...) for TLS
		// One subchannel per address the name resolves to, calls spread
		// over all of them (a Kubernetes headless Service).
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin": {}}]}`),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(maxMessageBytes),
			grpc.MaxCallSendMsgSize(maxMessageBytes)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	defer conn.Close()
	client := phasorv1.NewEncoderClient(conn)
	// [end snippet]

	call := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), *deadline)
	}
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
	var check checker

	// Health and reflection.
	// [snippet: health]
	ctx, cancel := call()
	health, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	cancel() // health.GetStatus() == healthpb.HealthCheckResponse_SERVING
	// [end snippet]
	if err != nil {
		fail("Health.Check", err)
	}
	fmt.Println("health:", health.GetStatus())
	check.that(health.GetStatus() == healthpb.HealthCheckResponse_SERVING, "health %v", health.GetStatus())
	services, err := listServices(conn, *deadline)
	if err != nil {
		fail("reflection", err)
	}
	fmt.Println("services:", services)
	check.that(contains(services, "phasor.v1.Encoder"), "reflection lists %v", services)

	// EncodePositions: PE[p, 2k] = sin(p·ω_k), PE[p, 2k+1] = cos(p·ω_k),
	// ω_k = base^(−2k/dim).
	const count, dim, base = 6, 8, 10000.0
	for _, dtype := range []phasorv1.DType{phasorv1.DType_FLOAT32, phasorv1.DType_FLOAT16, phasorv1.DType_BFLOAT16} {
		// [snippet: EncodePositions]
		ctx, cancel := call()
		reply, err := client.EncodePositions(ctx, &phasorv1.EncodePositionsRequest{
			Positions: &phasorv1.Positions{Kind: &phasorv1.Positions_Range_{
				Range: &phasorv1.Positions_Range{Start: 0, Count: count}}},
			Config: &phasorv1.EncodePositionsRequest_Spec{Spec: &phasorv1.EncoderSpec{
				Kind: &phasorv1.EncoderSpec_Positional{Positional: &phasorv1.PositionalSpec{
					Kind: &phasorv1.PositionalSpec_Sinusoidal{Sinusoidal: &phasorv1.SinusoidalSpec{Dim: dim}}}}}},
			OutputDtype: dtype,
		})
		cancel()
		if err != nil {
			fail("EncodePositions", err)
		}
		pe, err := Float32s(reply.GetEncodings()) // [count, dim], row-major
		// [end snippet]
		if err != nil {
			fail("EncodePositions decode", err)
		}
		// float32 within 2e-6; fp16 / bf16 round once more: half an ulp of
		// values in [-1, 1] is 2^-11 and 2^-8.
		tolerance := map[phasorv1.DType]float64{phasorv1.DType_FLOAT32: 2e-6,
			phasorv1.DType_FLOAT16: 1.0 / 2048, phasorv1.DType_BFLOAT16: 1.0 / 256}[dtype]
		check.that(len(pe) == count*dim, "EncodePositions %v: %d values", dtype, len(pe))
		for p := 0; p < count && len(pe) == count*dim; p++ {
			for k := 0; k < dim/2; k++ {
				omega := math.Pow(base, -2*float64(k)/dim)
				check.near(fmt.Sprintf("PE %v [%d,%d]", dtype, p, 2*k), pe[p*dim+2*k], math.Sin(float64(p)*omega), tolerance)
				check.near(fmt.Sprintf("PE %v [%d,%d]", dtype, p, 2*k+1), pe[p*dim+2*k+1], math.Cos(float64(p)*omega), tolerance)
			}
		}
		fmt.Printf("EncodePositions %v: [%d,%d], row 1 = %.6f\n", dtype, count, dim, pe[dim:2*dim])
	}

	// ApplyRope, HALF layout: pairs (i, i + D/2) turn by p·θ_i,
	// θ_i = base^(−2i/D).
	const tokens, heads, headDim = 3, 2, 8
	positions := []int64{5, 100, 70000}
	query := make([]float32, tokens*heads*headDim)
	for i := range query {
		query[i] = float32(i%7) - 2.5
	}
	ctx, cancel = call()
	rope, err := client.ApplyRope(ctx, &phasorv1.ApplyRopeRequest{
		Query:     Float32Tensor(query, tokens, heads, headDim),
		Positions: &phasorv1.Positions{Kind: &phasorv1.Positions_Values{Values: Int64Tensor(positions, tokens)}},
		Config: &phasorv1.ApplyRopeRequest_Spec{Spec: &phasorv1.EncoderSpec{
			Kind: &phasorv1.EncoderSpec_Rope{Rope: &phasorv1.RopeSpec{}}}}, // rotary_dim 0 = D
	})
	cancel()
	if err != nil {
		fail("ApplyRope", err)
	}
	rotated, err := Float32s(rope.GetQuery())
	if err != nil {
		fail("ApplyRope decode", err)
	}
	check.that(len(rotated) == len(query), "ApplyRope: %d values", len(rotated))
	half := headDim / 2
	for t := 0; t < tokens && len(rotated) == len(query); t++ {
		for h := 0; h < heads; h++ {
			row := (t*heads + h) * headDim
			for i := 0; i < half; i++ {
				angle := float64(positions[t]) * math.Pow(base, -2*float64(i)/headDim)
				x, y := float64(query[row+i]), float64(query[row+i+half])
				// |x|, |y| <= 4: a float32 rotation is good to about 1e-6 of that.
				check.near(fmt.Sprintf("rope [%d,%d,%d]", t, h, i), rotated[row+i], x*math.Cos(angle)-y*math.Sin(angle), 1e-5)
				check.near(fmt.Sprintf("rope [%d,%d,%d]", t, h, i+half), rotated[row+i+half], y*math.Cos(angle)+x*math.Sin(angle), 1e-5)
			}
		}
	}
	fmt.Printf("ApplyRope: [%d,%d,%d] float32, attention_factor %g\n", tokens, heads, headDim, rope.GetAttentionFactor())

	// EncodeObservations, time block only: τ = t − t_0 seconds, periods
	// P_k = min·(max/min)^(k/(n−1)) for the n = dim/2 pairs, columns
	// [sin(2πτ/P_k), cos(2πτ/P_k)] per k.
	const first = int64(1_700_000_000_000_000_000) // ns since the epoch
	stamps := []int64{first, first + 1_500_000_000, first + 3_600_000_000_000}
	values := []float32{1, 2, 3}
	const timeDim, minPeriod, maxPeriod = 6, 1.0, 86400.0
	ctx, cancel = call()
	observed, err := client.EncodeObservations(ctx, &phasorv1.EncodeObservationsRequest{
		Observations: &phasorv1.Observations{
			Timestamps: Int64Tensor(stamps, int64(len(stamps))),
			Values:     Float32Tensor(values, int64(len(values)), 1),
		},
		Config: &phasorv1.EncodeObservationsRequest_Spec{Spec: &phasorv1.EncoderSpec{
			Kind: &phasorv1.EncoderSpec_Temporal{Temporal: &phasorv1.TemporalSpec{
				Time: &phasorv1.TimeBlock{Dim: timeDim, MinPeriodSeconds: minPeriod, MaxPeriodSeconds: maxPeriod}}}}},
	})
	cancel()
	if err != nil {
		fail("EncodeObservations", err)
	}
	features, err := Float32s(observed.GetFeatures())
	if err != nil {
		fail("EncodeObservations decode", err)
	}
	shape := observed.GetFeatures().GetShape()
	check.that(len(shape) == 2 && shape[0] == int64(len(stamps)) && shape[1] == timeDim, "features shape %v", shape)
	for r := 0; r < len(stamps) && len(features) == len(stamps)*timeDim; r++ {
		tau := float64(stamps[r]-first) / 1e9
		for k := 0; k < timeDim/2; k++ {
			period := minPeriod * math.Pow(maxPeriod/minPeriod, float64(k)/float64(timeDim/2-1))
			angle := 2 * math.Pi * tau / period
			check.near(fmt.Sprintf("time [%d,%d]", r, 2*k), features[r*timeDim+2*k], math.Sin(angle), 2e-6)
			check.near(fmt.Sprintf("time [%d,%d]", r, 2*k+1), features[r*timeDim+2*k+1], math.Cos(angle), 2e-6)
		}
	}
	for _, entry := range observed.GetSchema() {
		fmt.Printf("schema: %s columns [%d, %d)\n", entry.GetBlock(), entry.GetOffset(), entry.GetOffset()+entry.GetWidth())
	}

	// A bad request: an odd dim is INVALID_ARGUMENT with a field violation.
	ctx, cancel = call()
	_, err = client.EncodePositions(ctx, &phasorv1.EncodePositionsRequest{
		Positions: &phasorv1.Positions{Kind: &phasorv1.Positions_Range_{Range: &phasorv1.Positions_Range{Count: 2}}},
		Config: &phasorv1.EncodePositionsRequest_Spec{Spec: &phasorv1.EncoderSpec{
			Kind: &phasorv1.EncoderSpec_Positional{Positional: &phasorv1.PositionalSpec{
				Kind: &phasorv1.PositionalSpec_Sinusoidal{Sinusoidal: &phasorv1.SinusoidalSpec{Dim: 7}}}}}},
	})
	cancel()
	violations := FieldViolations(err)
	fmt.Printf("dim 7: %v %v\n", status.Code(err), violations)
	check.that(status.Code(err) == codes.InvalidArgument, "dim 7 gave %v", status.Code(err))
	check.that(len(violations) == 1 && len(violations[0]) > 0 &&
		violations[0][:len("spec.positional.sinusoidal.dim: ")] == "spec.positional.sinusoidal.dim: ",
		"dim 7 violations %q", violations)

	if check.failures > 0 {
		fmt.Fprintf(os.Stderr, "%d checks failed\n", check.failures)
		os.Exit(1)
	}
	fmt.Println("all values match the formulas")
}

// [snippet: reflection]
// listServices asks the server's reflection service (v1alpha: gRPC 1.51,
// Debian 12's, serves no v1) for the names of its services.
func listServices(conn *grpc.ClientConn, deadline time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	err = stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	if err != nil {
		return nil, err
	}
	reply, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	stream.CloseSend()
	var names []string
	for _, service := range reply.GetListServicesResponse().GetService() {
		names = append(names, service.GetName())
	}
	sort.Strings(names)
	return names, nil
}

// [end snippet]

func contains(names []string, want string) bool {
	for _, name := range names {
		if name == want {
			return true
		}
	}
	return false
}
