// Float64 output of the temporal encoder (core/compose.h): the time
// sinusoid and the CYCLIC calendar columns against a __float128 reference
// (tests/quad_reference.h) for instants across 1900–2200, DST edges and the
// extremes of int64; float64 narrowed to float32 against the float32 path;
// chunks, panels and threads on the float64 path; float64 content.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/calendar.h"
#include "core/compose.h"
#include "core/continuous_time.h"
#include "gtest/gtest.h"
#include "tests/quad_reference.h"
#include "tests/status_matchers.h"
#include "tests/temporal_test_data.h"

extern "C" __float128 fmodq(__float128, __float128);

namespace phasor {
namespace {

using testing::Quad;
using testing::TwoPiQuad;

// The bound for float64 encodings (the kernels promise 1.7e-16).
constexpr double kF64Bound = 4e-16;

// 2π to ~2^-190, summed in quad (113 bits).
int64_t CivilNs(absl::CivilSecond civil, const absl::TimeZone& zone, int64_t extra_ns = 0) {
  return absl::ToUnixNanos(absl::FromCivil(civil, zone)) + extra_ns;
}

// Instants over [1900, 2200), the boundaries, DST edges in New York (a
// nanosecond either side of 2026's changes) and the int64 extremes
// (INT64_MIN is NaT, so INT64_MIN + 1).
std::vector<int64_t> Instants(int random_count, uint64_t seed) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  const int64_t lo = CivilNs(absl::CivilSecond(1900, 1, 1, 0, 0, 0), utc);
  const int64_t hi = CivilNs(absl::CivilSecond(2200, 1, 1, 0, 0, 0), utc);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(lo, hi - 1);
  std::vector<int64_t> out;
  for (int i = 0; i < random_count; ++i) out.push_back(pick(rng));
  const int64_t edges[] = {
      lo, hi - 1, 0, -1, 1,
      // 2026-03-08 02:00 EST -> 03:00 EDT is 07:00Z; 2026-11-01 02:00 EDT ->
      // 01:00 EST is 06:00Z.
      CivilNs(absl::CivilSecond(2026, 3, 8, 7, 0, 0), utc) - 1,
      CivilNs(absl::CivilSecond(2026, 3, 8, 7, 0, 0), utc),
      CivilNs(absl::CivilSecond(2026, 11, 1, 6, 0, 0), utc) - 1,
      CivilNs(absl::CivilSecond(2026, 11, 1, 6, 0, 0), utc),
      // Leap day, a 53-week ISO year's last day, a year's last nanosecond.
      CivilNs(absl::CivilSecond(2024, 2, 29, 23, 59, 59), utc, 999999999),
      CivilNs(absl::CivilSecond(2026, 12, 31, 12, 0, 0), utc),
      CivilNs(absl::CivilSecond(2199, 12, 31, 23, 59, 59), utc, 999999999),
      std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min() + 1,
      // 2^53 + 1 ns and 2^62 + 1 ns.
      (int64_t{1} << 53) + 1, (int64_t{1} << 62) + 1};
  out.insert(out.end(), std::begin(edges), std::end(edges));
  std::sort(out.begin(), out.end());
  return out;
}

// sin, cos of 2π·elapsed/P in quad: elapsed (< 2^65) and P_ns = P·1e9 (a
// 53-bit times a 30-bit integer) are exact in quad's 113 bits and fmodq is
// exact, so only the last division and the sine round (~1e-33).
void QuadSinCos(__int128 elapsed_ns, double period_seconds, Quad* s, Quad* c) {
  const Quad period_ns = Quad(period_seconds) * Quad(1e9);
  const Quad r = fmodq(Quad(elapsed_ns), period_ns);
  const Quad angle = TwoPiQuad() * (r / period_ns);
  *s = sinq(angle);
  *c = cosq(angle);
}

double AbsDiff(double value, Quad exact) {
  return static_cast<double>(fabsl(static_cast<long double>(Quad(value) - exact)));
}

struct Ladder {
  int64_t dim;
  double min_period_seconds;
  double max_period_seconds;
};

TEST(TimeSinusoidFloat64, WithinFourE16OfQuadFrom1900To2200AndAtTheExtremes) {
  const std::vector<int64_t> times = Instants(2500, 11);
  const Ladder ladders[] = {
      {16, 1.0, 10 * 365.2425 * 86400.0},  // The default ladder.
      {12, 1e-9, 1e15},                    // Every period accepted.
      {6, 0.3, 7.7},                       // Periods no power of ten divides.
      {200, 1e-3, 3.15e9},                 // dim > 128: row by row.
  };
  const int64_t origins[] = {0, times.front(), times[times.size() / 2]};
  double max_f64 = 0;
  double max_f32_path = 0;
  for (const Ladder& ladder : ladders) {
    const TimeSinusoid exact(ladder.dim, ladder.min_period_seconds,
                             ladder.max_period_seconds, SinusoidAccuracy::kFloat64);
    const TimeSinusoid fast(ladder.dim, ladder.min_period_seconds,
                            ladder.max_period_seconds, SinusoidAccuracy::kFloat32);
    const std::vector<double> periods = exact.periods_seconds();
    for (int64_t origin : origins) {
      std::vector<double> rows(times.size() * ladder.dim);
      std::vector<double> fast_rows(rows.size());
      exact.EncodeRows(times, origin, rows.data(), ladder.dim);
      fast.EncodeRows(times, origin, fast_rows.data(), ladder.dim);
      for (size_t r = 0; r < times.size(); ++r) {
        const __int128 elapsed = ElapsedNs(times[r], origin);
        // Encode (one row) is EncodeRows' row, bit for bit.
        std::vector<double> one(ladder.dim);
        exact.Encode(elapsed, one.data());
        for (int64_t k = 0; k < ladder.dim / 2; ++k) {
          Quad s = 0;
          Quad c = 0;
          QuadSinCos(elapsed, periods[k], &s, &c);
          const double* row = &rows[r * ladder.dim + 2 * k];
          const double* fast_row = &fast_rows[r * ladder.dim + 2 * k];
          const double error = std::max(AbsDiff(row[0], s), AbsDiff(row[1], c));
          ASSERT_LE(error, kF64Bound)
              << "t=" << times[r] << " origin=" << origin << " P=" << periods[k];
          ASSERT_EQ(one[2 * k], row[0]);
          ASSERT_EQ(one[2 * k + 1], row[1]);
          max_f64 = std::max(max_f64, error);
          max_f32_path = std::max(
              max_f32_path, std::max(AbsDiff(fast_row[0], s), AbsDiff(fast_row[1], c)));
        }
      }
    }
  }
  std::printf("time sinusoid max |float64 - quad| = %.3g (float32 path's doubles: %.3g)\n",
              max_f64, max_f32_path);
  // The float64 path is the tighter one.
  EXPECT_LE(max_f64, 2e-16);
  EXPECT_LT(max_f64, max_f32_path);
}

TEST(Time2VecFloat64, WithinFourE16OfQuadFrom1900To2200) {
  const std::vector<int64_t> times = Instants(3000, 13);
  Time2VecBlock block;
  // Up to ω = 2π rad/s over 300 years (~2^33 turns) and φ far from [−π, π].
  block.omega = {1e-6, 2 * M_PI / 86400, 2 * M_PI / 3600, 2 * M_PI, 0.7, 1e-9, 3.3};
  block.phi = {0.1, 0.2, -3.0, 100.5, 1e6, 0.0, -0.25};
  double max_sin = 0;
  double max_sin_f32_path = 0;
  double max_linear_ulps = 0;
  for (double unit_seconds : {1.0, 86400.0, 1e-3}) {
    block.unit_seconds = unit_seconds;
    const Time2Vec exact(block, SinusoidAccuracy::kFloat64);
    const Time2Vec fast(block, SinusoidAccuracy::kFloat32);
    const int width = static_cast<int>(block.omega.size());
    std::vector<double> row(width);
    std::vector<double> fast_row(width);
    for (int64_t origin : {int64_t{0}, times.front()}) {
      for (int64_t t : times) {
        const __int128 elapsed = ElapsedNs(t, origin);
        exact.Encode(elapsed, row.data());
        fast.Encode(elapsed, fast_row.data());
        // τ exactly: elapsed / (unit·1e9), both exact in quad.
        const Quad unit_ns = Quad(unit_seconds) * Quad(1e9);
        for (int i = 0; i < width; ++i) {
          const Quad x = Quad(block.omega[i]) * Quad(elapsed) / unit_ns + Quad(block.phi[i]);
          if (i == 0) {
            const double ulp = std::nextafter(std::fabs(static_cast<double>(x)),
                                              INFINITY) -
                               std::fabs(static_cast<double>(x));
            const double ulps = AbsDiff(row[0], x) / ulp;
            ASSERT_LE(ulps, 1.0) << "t=" << t << " unit=" << unit_seconds;
            max_linear_ulps = std::max(max_linear_ulps, ulps);
            continue;
          }
          const Quad exact_sin = sinq(x);
          const double error = AbsDiff(row[i], exact_sin);
          ASSERT_LE(error, kF64Bound) << "t=" << t << " term " << i << " unit="
                                      << unit_seconds << " origin=" << origin;
          max_sin = std::max(max_sin, error);
          max_sin_f32_path = std::max(max_sin_f32_path, AbsDiff(fast_row[i], exact_sin));
        }
      }
    }
  }
  std::printf("time2vec max |float64 sin - quad| = %.3g (float32 path's doubles: %.3g), "
              "linear term within %.2f ulp\n",
              max_sin, max_sin_f32_path, max_linear_ulps);
}

TEST(Time2VecFloat64, PhaseBeyondDoubleRangeIsNaN) {
  Time2VecBlock block;
  block.omega = {1.0, 1e300, 0.5};
  block.phi = {0.0, 0.25, 0.0};
  const Time2Vec exact(block, SinusoidAccuracy::kFloat64);
  double out[3];
  exact.Encode(0, out);  // τ = 0: sin φ.
  EXPECT_EQ(out[1], std::sin(0.25));
  exact.Encode(ElapsedNs(std::numeric_limits<int64_t>::max(), 0), out);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_TRUE(std::isfinite(out[2]));  // The other terms are unaffected.
}

// x/P of a CYCLIC field in quad, from the local time (calendar.h's table).
Quad QuadPhase(CalendarField field, const LocalTime& t, bool fractional) {
  const Quad clock_s = Quad(t.hour * 3600 + t.minute * 60 + t.second) +
                       Quad(t.subsecond_ns) / Quad(1e9);
  const Quad day_fraction = fractional ? clock_s / Quad(86400) : Quad(0);
  const Quad sub = fractional ? Quad(t.subsecond_ns) / Quad(1e9) : Quad(0);
  switch (field) {
    case CalendarField::kSecondOfMinute:
      return (Quad(t.second) + sub) / Quad(60);
    case CalendarField::kMinuteOfHour:
      return (Quad(t.minute) + (fractional ? (Quad(t.second) + sub) / Quad(60) : 0)) /
             Quad(60);
    case CalendarField::kHourOfDay:
      return (Quad(t.hour) +
              (fractional ? (Quad(t.minute * 60 + t.second) + sub) / Quad(3600) : 0)) /
             Quad(24);
    case CalendarField::kDayOfWeek:
      return (Quad(t.weekday) + day_fraction) / Quad(7);
    case CalendarField::kDayOfMonth:
      return (Quad(t.date.day() - 1) + day_fraction) / Quad(t.days_in_month);
    case CalendarField::kDayOfYear:
      return (Quad(t.day_of_year - 1) + day_fraction) / Quad(t.days_in_year);
    case CalendarField::kWeekOfYear:
      return (Quad(t.iso_week - 1) +
              (fractional ? (Quad(t.weekday) + day_fraction) / Quad(7) : 0)) /
             Quad(t.iso_weeks_in_year);
    case CalendarField::kMonthOfYear:
      return (Quad(t.date.month() - 1) +
              (fractional ? (Quad(t.date.day() - 1) + day_fraction) /
                                Quad(t.days_in_month)
                          : 0)) /
             Quad(12);
    case CalendarField::kQuarter:
      return (Quad((t.date.month() - 1) / 3) +
              (fractional ? (Quad((t.date.month() - 1) % 3) +
                             (Quad(t.date.day() - 1) + day_fraction) /
                                 Quad(t.days_in_month)) /
                                Quad(3)
                          : 0)) /
             Quad(4);
    default:  // Years and flags have no cycle.
      break;
  }
  return 0;
}

TEST(CalendarFloat64, CyclicWithinFourE16OfQuadFrom1900To2200) {
  const std::vector<CalendarField> fields = {
      CalendarField::kSecondOfMinute, CalendarField::kMinuteOfHour,
      CalendarField::kHourOfDay,      CalendarField::kDayOfWeek,
      CalendarField::kDayOfMonth,     CalendarField::kDayOfYear,
      CalendarField::kWeekOfYear,     CalendarField::kMonthOfYear,
      CalendarField::kQuarter};
  const std::vector<int64_t> times = Instants(3000, 12);
  double max_error = 0;
  double max_f32_path = 0;
  int64_t checked = 0;
  for (const char* zone_name :
       {"UTC", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu"}) {
    const absl::StatusOr<absl::TimeZone> zone = LoadIanaTimeZone(zone_name, "zone");
    ASSERT_TRUE(zone.ok()) << zone_name;
    for (bool fractional : {false, true}) {
      CalendarBlock block;
      block.time_zone = zone_name;
      block.fields = fields;
      block.encoding = CalendarEncoding::kCyclic;
      block.fractional = fractional;
      const CalendarEncoder exact(block, *zone, /*sum_d_model=*/0,
                                  /*max_table_rows=*/1000, SinusoidAccuracy::kFloat64);
      const CalendarEncoder fast(block, *zone, /*sum_d_model=*/0,
                                 /*max_table_rows=*/1000, SinusoidAccuracy::kFloat32);
      CalendarEncoder::Writer writer(exact);
      CalendarEncoder::Writer fast_writer(fast);
      std::vector<double> row(exact.width());
      std::vector<double> fast_row(fast.width());
      for (int64_t t : times) {
        writer.Encode(t, row.data());
        fast_writer.Encode(t, fast_row.data());
        const LocalTime local = LocalTimeAt(*zone, t);
        for (size_t f = 0; f < fields.size(); ++f) {
          const Quad angle = TwoPiQuad() * QuadPhase(fields[f], local, fractional);
          const Quad s = sinq(angle);
          const Quad c = cosq(angle);
          const double error =
              std::max(AbsDiff(row[2 * f], s), AbsDiff(row[2 * f + 1], c));
          ASSERT_LE(error, kF64Bound)
              << zone_name << " t=" << t << " field=" << CalendarFieldName(fields[f])
              << " fractional=" << fractional;
          max_error = std::max(max_error, error);
          max_f32_path =
              std::max(max_f32_path, std::max(AbsDiff(fast_row[2 * f], s),
                                              AbsDiff(fast_row[2 * f + 1], c)));
          ++checked;
        }
      }
    }
  }
  std::printf("calendar cyclic: %lld pairs, max |float64 - quad| = %.3g "
              "(float32 path's doubles: %.3g)\n",
              static_cast<long long>(checked), max_error, max_f32_path);
  EXPECT_LE(max_error, 2e-16);
}

// The float64 features of a spec, as EncodeObservations writes them.
struct DoubleResult {
  absl::Status status;
  std::vector<double> features;
  SeriesState state;
};

DoubleResult EncodeF64(const TemporalSpec& spec, const ObservationsView& obs,
                       const SeriesState* state_in, ExecutionOptions options = {}) {
  DoubleResult result;
  absl::StatusOr<FeatureLayout> layout = TemporalFeatureLayout(
      spec, obs.num_channels, obs.has_content() ? obs.content_dim : 0);
  if (!layout.ok()) {
    result.status = layout.status();
    return result;
  }
  result.features.resize(obs.num_rows() * layout->width);
  result.status = EncodeObservations(spec, obs, state_in, options,
                                     absl::MakeSpan(result.features), &result.state);
  return result;
}

// Float64 narrowed to float32 against the float32 output. Both round a
// double once; the two doubles differ only in the sinusoid and CYCLIC
// columns, by at most the float32 path's angle error (≤ 5.2e-16 rad before
// the sine, continuous_time.h) plus the float64 path's (≤ 1.7e-16): so the
// float32 values are equal, or one float32 ulp apart where the exact value
// lies that close to a float32 rounding boundary, or, for a sine or cosine
// within ~1e-8 of zero (where a float32 ulp is below that absolute
// difference), up to 7e-16 apart. Returns the count of unequal values.
int64_t CompareNarrowed(const std::vector<double>& f64, const std::vector<float>& f32,
                        int64_t* beyond_one_ulp) {
  EXPECT_EQ(f64.size(), f32.size());
  int64_t differing = 0;
  for (size_t i = 0; i < std::min(f64.size(), f32.size()); ++i) {
    const float narrowed = static_cast<float>(f64[i]);
    if (narrowed == f32[i]) continue;
    ++differing;
    if (std::nextafter(narrowed, f32[i]) == f32[i]) continue;
    ++*beyond_one_ulp;
    EXPECT_LE(std::fabs(static_cast<double>(narrowed) - f32[i]), 7e-16)
        << "value " << i << ": float64 " << f64[i] << " float32 " << f32[i];
    EXPECT_LT(std::fabs(f64[i]), 1e-8) << "value " << i;
  }
  return differing;
}

TEST(EncodeObservationsFloat64, NarrowedMatchesTheFloat32Output) {
  int64_t values = 0;
  int64_t differing = 0;
  int64_t beyond_one_ulp = 0;
  for (GapTransform transform :
       {GapTransform::kRaw, GapTransform::kLog1p, GapTransform::kSinusoidal}) {
    const TemporalSpec spec = FullSpec(FirstObservationPolicy::kFlag, transform);
    const WideSeries wide(3000, 21);
    const LongSeries events(3000, 22);
    for (const ObservationsView& obs :
         {wide.View(0, wide.rows(), /*with_content=*/true),
          events.View(0, events.rows(), false)}) {
      TemporalSpec s = spec;
      if (!obs.has_content()) s.content.reset();
      const Result f32 = Encode(s, obs, nullptr);
      const DoubleResult f64 = EncodeF64(s, obs, nullptr);
      PHASOR_ASSERT_OK(f32.status);
      PHASOR_ASSERT_OK(f64.status);
      differing += CompareNarrowed(f64.features, f32.features, &beyond_one_ulp);
      values += static_cast<int64_t>(f64.features.size());
      ExpectSameState(f64.state, f32.state);
    }
  }
  std::printf("float64 -> float32: %lld of %lld values differ from the float32 "
              "output, %lld by more than one float32 ulp (all within 7e-16)\n",
              static_cast<long long>(differing), static_cast<long long>(values),
              static_cast<long long>(beyond_one_ulp));
  // Tiny gaps (a few ns against a 60 s period) give sines near 1e-10.
  EXPECT_LE(differing, values / 10000);
}

TEST(EncodeObservationsFloat64, ChunksThreadsAndPanelsGiveTheSameBytes) {
  const TemporalSpec spec = FullSpec(FirstObservationPolicy::kSinceOrigin,
                                     GapTransform::kSinusoidal);
  const WideSeries wide(2000, 31);
  const ObservationsView all = wide.View(0, wide.rows(), true);
  const DoubleResult whole = EncodeF64(spec, all, nullptr);
  PHASOR_ASSERT_OK(whole.status);
  // Chunked, the state carried between the calls.
  std::vector<double> chunked;
  SeriesState state;
  const SeriesState* in = nullptr;
  for (int64_t begin = 0; begin < wide.rows(); begin += 333) {
    const int64_t end = std::min(wide.rows(), begin + 333);
    const DoubleResult part = EncodeF64(spec, wide.View(begin, end, true), in);
    PHASOR_ASSERT_OK(part.status);
    chunked.insert(chunked.end(), part.features.begin(), part.features.end());
    state = part.state;
    in = &state;
  }
  EXPECT_EQ(chunked, whole.features);
  ExpectSameState(state, whole.state);
  // Threads: 1 == 4, small grains.
  ExecutionOptions threads;
  threads.max_threads = 4;
  threads.grain_elements = 1000;
  const DoubleResult parallel = EncodeF64(spec, all, nullptr, threads);
  PHASOR_ASSERT_OK(parallel.status);
  EXPECT_EQ(parallel.features, whole.features);
  // A panel of the whole series and two halves of it.
  const int64_t half = wide.rows() / 2;
  const int64_t offsets[] = {0, half, wide.rows()};
  const PanelView panel{all, offsets, {}};
  std::vector<double> panel_out(whole.features.size());
  std::vector<SeriesState> states(2);
  PHASOR_ASSERT_OK(EncodePanel(spec, panel, {}, {}, threads, absl::MakeSpan(panel_out),
                        absl::MakeSpan(states)));
  const DoubleResult first = EncodeF64(spec, wide.View(0, half, true), nullptr);
  const DoubleResult second = EncodeF64(spec, wide.View(half, wide.rows(), true), nullptr);
  std::vector<double> separate = first.features;
  separate.insert(separate.end(), second.features.begin(), second.features.end());
  EXPECT_EQ(panel_out, separate);
  // A float32 output for a float64 call's size is refused, and vice versa.
  std::vector<double> short_out(whole.features.size() - 1);
  EXPECT_EQ(EncodeObservations(spec, all, nullptr, {}, absl::MakeSpan(short_out), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EncodeObservationsFloat64, Float64ContentIsScaledInDouble) {
  TemporalSpec spec;
  spec.content = ContentBlock{1.0 / 3.0};
  const std::vector<int64_t> times = {0, 1000, 2000};
  const std::vector<double> content = {0.1, 1e-300, 1.0 + 0x1p-52,
                                       -7.25, 3.0000000000000004, 1e300};
  ObservationsView obs;
  obs.timestamps = times;
  obs.content_f64 = content;
  obs.content_dim = 2;
  // 3 rows x 2 columns, not 6 rows x 1.
  std::vector<double> out(6);
  std::vector<float> out32(6);
  ObservationsView too_short = obs;
  too_short.content_f64 = absl::MakeConstSpan(content).subspan(0, 4);
  EXPECT_EQ(EncodeObservations(spec, too_short, nullptr, {}, absl::MakeSpan(out), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  PHASOR_ASSERT_OK(EncodeObservations(spec, obs, nullptr, {}, absl::MakeSpan(out), nullptr));
  PHASOR_ASSERT_OK(EncodeObservations(spec, obs, nullptr, {}, absl::MakeSpan(out32), nullptr));
  for (size_t i = 0; i < content.size(); ++i) {
    EXPECT_EQ(out[i], content[i] * (1.0 / 3.0)) << i;
    EXPECT_EQ(out32[i], static_cast<float>(content[i] * (1.0 / 3.0))) << i;
  }
  // Both dtypes at once, or a non-finite value, are refused.
  const std::vector<float> content32(6, 1.0f);
  ObservationsView both = obs;
  both.content = content32;
  EXPECT_EQ(EncodeObservations(spec, both, nullptr, {}, absl::MakeSpan(out), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<double> bad = content;
  bad[3] = std::nan("");
  ObservationsView with_nan = obs;
  with_nan.content_f64 = bad;
  const absl::Status status =
      EncodeObservations(spec, with_nan, nullptr, {}, absl::MakeSpan(out), nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("observations.content[3]"), std::string::npos)
      << status.message();
}

}  // namespace
}  // namespace phasor
