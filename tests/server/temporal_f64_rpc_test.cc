// EncodeObservations with output_dtype FLOAT64 over the wire: unary, the
// stream and panels give float64 features computed on core's float64 path
// (not float32 widened), chunk == whole and panel == single series bytewise,
// and float64 content stays float64.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace phasor::server::testing {
namespace {

constexpr int64_t kNs = 1000000000;

std::vector<double> Doubles(const v1::Tensor& tensor) {
  std::vector<double> out(tensor.data().size() / sizeof(double));
  if (!out.empty()) std::memcpy(out.data(), tensor.data().data(), tensor.data().size());
  return out;
}

// Every block, a DST zone, fractional cyclic calendar fields.
v1::EncoderSpec FullSpec() {
  v1::EncoderSpec spec;
  v1::TemporalSpec* temporal = spec.mutable_temporal();
  temporal->mutable_content();
  temporal->mutable_time()->set_dim(8);
  temporal->mutable_time()->set_min_period_seconds(1);
  temporal->mutable_time()->set_max_period_seconds(1e8);
  v1::Time2VecBlock* t2v = temporal->mutable_time2vec();
  for (double w : {1e-6, 2 * M_PI / 86400, 2 * M_PI}) t2v->add_omega(w);
  for (double p : {0.5, 0.25, -1.0}) t2v->add_phi(p);
  v1::GapsBlock* gaps = temporal->mutable_gaps();
  gaps->set_first_observation(v1::GapsBlock::FLAG);
  gaps->set_transform(v1::GapsBlock::SINUSOIDAL);
  gaps->set_sinusoidal_dim(4);
  gaps->set_sinusoidal_min_period_seconds(60);
  gaps->set_sinusoidal_max_period_seconds(86400);
  gaps->set_include_mask(true);
  gaps->set_include_last_value(true);
  v1::CalendarBlock* calendar = temporal->mutable_calendar();
  calendar->set_time_zone("America/New_York");
  for (auto field : {v1::CalendarBlock::HOUR_OF_DAY, v1::CalendarBlock::DAY_OF_YEAR,
                     v1::CalendarBlock::WEEK_OF_YEAR, v1::CalendarBlock::MONTH_OF_YEAR}) {
    calendar->add_fields(field);
  }
  calendar->set_fractional(true);
  calendar->set_include_utc_offset(true);
  return spec;
}

constexpr int kChannels = 2;

// `rows` irregular rows around 2026's spring DST change in New York.
struct Series {
  std::vector<int64_t> times;
  std::vector<double> values;
  explicit Series(int rows, int64_t start_ns = 1772900000 * kNs) {
    int64_t t = start_ns;
    for (int r = 0; r < rows; ++r) {
      t += (r % 3 == 0 ? 0 : 1) * (int64_t{1234567} * (r + 1) % (7200 * kNs) + 1);
      times.push_back(t);
      values.push_back(r % 2 == 0 ? 0.1 * r : std::nan(""));
      values.push_back(r % 5 == 0 ? std::nan("") : -1.0 / (r + 1));
    }
  }
  v1::Observations Rows(int begin, int end) const {
    v1::Observations obs;
    *obs.mutable_timestamps() = Int64Tensor(
        std::vector<int64_t>(times.begin() + begin, times.begin() + end), {end - begin});
    *obs.mutable_values() = Float64Tensor(
        std::vector<double>(values.begin() + begin * kChannels,
                            values.begin() + end * kChannels),
        {end - begin, kChannels});
    return obs;
  }
};

class TemporalFloat64RpcTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = StartTestServer(TestOptions()); }

  v1::EncodeObservationsResponse Call(const v1::EncodeObservationsRequest& request) {
    v1::EncodeObservationsResponse response;
    const grpc::Status status =
        server_.stub->EncodeObservations(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  TestServer server_;
};

TEST_F(TemporalFloat64RpcTest, UnaryFloat64IsTheFloat64PathNotWidenedFloat32) {
  const Series series(400);
  v1::EncodeObservationsRequest request;
  *request.mutable_spec() = FullSpec();
  *request.mutable_observations() = series.Rows(0, 400);
  request.set_output_dtype(v1::FLOAT64);
  const v1::EncodeObservationsResponse f64 = Call(request);
  ASSERT_EQ(f64.features().dtype(), v1::FLOAT64);
  ASSERT_EQ(f64.features().shape_size(), 2);
  const int64_t width = f64.features().shape(1);
  EXPECT_EQ(f64.features().shape(0), 400);
  EXPECT_EQ(static_cast<int64_t>(f64.features().data().size()), 400 * width * 8);
  request.set_output_dtype(v1::FLOAT32);
  const v1::EncodeObservationsResponse f32 = Call(request);
  const std::vector<double> d = Doubles(f64.features());
  const std::vector<float> f = Floats(f32.features());
  ASSERT_EQ(d.size(), f.size());
  int64_t not_float = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    // Narrowed: the float32 output, to one float32 ulp or 7e-16 (compose.h).
    const float narrowed = static_cast<float>(d[i]);
    EXPECT_TRUE(narrowed == f[i] || std::nextafter(narrowed, f[i]) == f[i] ||
                std::fabs(static_cast<double>(narrowed) - f[i]) <= 7e-16)
        << i << ": " << d[i] << " vs " << f[i];
    not_float += static_cast<double>(narrowed) != d[i];
  }
  // Float64 carries more than float32 would: most values are not floats.
  EXPECT_GT(not_float, static_cast<int64_t>(d.size()) / 2);
  // The schema and state are those of the float32 call.
  ASSERT_EQ(f64.schema_size(), f32.schema_size());
  EXPECT_EQ(f64.state().SerializeAsString(), f32.state().SerializeAsString());
}

TEST_F(TemporalFloat64RpcTest, KnownAnglesToTheLastBit) {
  // time: one pair with period 60 s from the epoch; at 10 s the angle is
  // π/3, at 15 s π/2, at 45 s 3π/2. The phase resolves 2^-64 turn (the
  // step per ns is floored, continuous_time.h), so a quarter turn's cos is
  // within 2π·2^-64 = 3.4e-19 of 0 and its sin rounds to ±1.
  v1::EncodeObservationsRequest request;
  v1::TemporalSpec* temporal = request.mutable_spec()->mutable_temporal();
  temporal->mutable_time()->set_dim(2);
  temporal->mutable_time()->set_min_period_seconds(60);
  temporal->mutable_time()->set_max_period_seconds(60);
  temporal->mutable_time()->set_origin(v1::TimeBlock::UNIX_EPOCH);
  const std::vector<int64_t> times = {10 * kNs, 15 * kNs, 45 * kNs};
  *request.mutable_observations()->mutable_timestamps() = Int64Tensor(times, {3});
  request.set_output_dtype(v1::FLOAT64);
  const std::vector<double> out = Doubles(Call(request).features());
  ASSERT_EQ(out.size(), 6u);
  // sin(π/3) = √3/2 and cos(π/3) = 1/2, within 1.7e-16.
  EXPECT_NEAR(out[0], std::sqrt(3.0) / 2, 1.7e-16);
  EXPECT_NEAR(out[1], 0.5, 1.7e-16);
  EXPECT_EQ(out[2], 1.0);
  EXPECT_NEAR(out[3], 0.0, 3.5e-19);
  EXPECT_EQ(out[4], -1.0);
  EXPECT_NEAR(out[5], 0.0, 3.5e-19);
}

TEST_F(TemporalFloat64RpcTest, StreamChunksEqualTheWholeSeries) {
  const Series series(300);
  v1::EncodeObservationsRequest whole_request;
  *whole_request.mutable_spec() = FullSpec();
  *whole_request.mutable_observations() = series.Rows(0, 300);
  whole_request.set_output_dtype(v1::FLOAT64);
  const std::string whole = Call(whole_request).features().data();
  ASSERT_EQ(whole.size() % (300 * 8), 0u);

  auto context = Context();
  auto stream = server_.stub->EncodeObservationsStream(context.get());
  std::string chunked;
  const int starts[] = {0, 1, 77, 150, 151, 300};
  for (size_t c = 0; c + 1 < std::size(starts); ++c) {
    v1::EncodeObservationsRequest request;
    *request.mutable_observations() = series.Rows(starts[c], starts[c + 1]);
    if (c == 0) *request.mutable_spec() = FullSpec();
    // The dtype may change from chunk to chunk; every chunk here asks FLOAT64.
    request.set_output_dtype(v1::FLOAT64);
    ASSERT_TRUE(stream->Write(request));
    v1::EncodeObservationsResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.features().dtype(), v1::FLOAT64);
    chunked += response.features().data();
  }
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(chunked, whole);  // Bytewise.
}

TEST_F(TemporalFloat64RpcTest, PanelEqualsSingleSeriesCallsAndStreams) {
  std::vector<Series> panel;
  for (int s = 0; s < 12; ++s) panel.emplace_back(5 + 7 * s, (1772900000 + 86400 * s) * kNs);
  std::vector<int64_t> times;
  std::vector<double> values;
  std::vector<int64_t> offsets = {0};
  for (const Series& series : panel) {
    times.insert(times.end(), series.times.begin(), series.times.end());
    values.insert(values.end(), series.values.begin(), series.values.end());
    offsets.push_back(static_cast<int64_t>(times.size()));
  }
  const auto rows = static_cast<int64_t>(times.size());
  v1::EncodeObservationsRequest request;
  *request.mutable_spec() = FullSpec();
  *request.mutable_observations()->mutable_timestamps() = Int64Tensor(times, {rows});
  *request.mutable_observations()->mutable_values() =
      Float64Tensor(values, {rows, kChannels});
  *request.mutable_observations()->mutable_series_offsets() =
      Int64Tensor(offsets, {static_cast<int64_t>(offsets.size())});
  request.set_output_dtype(v1::FLOAT64);
  const v1::EncodeObservationsResponse whole = Call(request);
  ASSERT_EQ(whole.features().dtype(), v1::FLOAT64);
  const int64_t row_bytes = whole.features().shape(1) * 8;
  for (size_t s = 0; s < panel.size(); ++s) {
    v1::EncodeObservationsRequest single;
    *single.mutable_spec() = FullSpec();
    const int n = static_cast<int>(panel[s].times.size());
    *single.mutable_observations() = panel[s].Rows(0, n);
    single.set_output_dtype(v1::FLOAT64);
    EXPECT_EQ(whole.features().data().substr(offsets[s] * row_bytes, n * row_bytes),
              Call(single).features().data())
        << "series " << s;
  }
  // The same panel through the stream, as one message.
  auto context = Context();
  auto stream = server_.stub->EncodeObservationsStream(context.get());
  ASSERT_TRUE(stream->Write(request));
  v1::EncodeObservationsResponse streamed;
  ASSERT_TRUE(stream->Read(&streamed));
  stream->WritesDone();
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(streamed.features().data(), whole.features().data());
}

TEST_F(TemporalFloat64RpcTest, Float64ContentStaysFloat64) {
  v1::EncodeObservationsRequest request;
  request.mutable_spec()->mutable_temporal()->mutable_content()->set_scale(1.0 / 3.0);
  const std::vector<int64_t> times = {0, kNs};
  const std::vector<double> content = {0.1, 1.0 + 0x1p-52, -7.25, 1e-300};
  *request.mutable_observations()->mutable_timestamps() = Int64Tensor(times, {2});
  *request.mutable_observations()->mutable_content() = Float64Tensor(content, {2, 2});
  request.set_output_dtype(v1::FLOAT64);
  const std::vector<double> out = Doubles(Call(request).features());
  ASSERT_EQ(out.size(), content.size());
  for (size_t i = 0; i < content.size(); ++i) {
    EXPECT_EQ(out[i], content[i] * (1.0 / 3.0)) << i;
  }
  // A non-finite float64 content value names its index.
  std::vector<double> bad = content;
  bad[2] = INFINITY;
  *request.mutable_observations()->mutable_content() = Float64Tensor(bad, {2, 2});
  v1::EncodeObservationsResponse response;
  const grpc::Status status =
      server_.stub->EncodeObservations(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("observations.content[2]"));
}

TEST_F(TemporalFloat64RpcTest, IntegerOutputDtypesAreStillRefused) {
  v1::EncodeObservationsRequest request;
  request.mutable_spec()->mutable_temporal()->mutable_time()->set_dim(2);
  *request.mutable_observations()->mutable_timestamps() = Int64Tensor({0}, {1});
  request.set_output_dtype(v1::INT64);
  v1::EncodeObservationsResponse response;
  const grpc::Status status =
      server_.stub->EncodeObservations(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("output_dtype"));
}

}  // namespace
}  // namespace phasor::server::testing
