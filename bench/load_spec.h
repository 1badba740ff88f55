// The spec of phasor_load's EncodeObservations calls (bench/phasor_load.cc),
// shared with bench/handler_bench.cc so that both measure the same request:
// content, time sinusoid dim 30 (1 s to 10 years), nine CYCLIC calendar
// fields (second of minute to quarter) in America/New_York.
#ifndef PHASOR_BENCH_LOAD_SPEC_H_
#define PHASOR_BENCH_LOAD_SPEC_H_

#include "phasor/v1/encoder.pb.h"

namespace phasor::bench {

inline void SetLoadObservationsSpec(v1::TemporalSpec* spec) {
  spec->mutable_content();
  spec->mutable_time()->set_dim(30);
  spec->mutable_time()->set_min_period_seconds(1.0);
  spec->mutable_time()->set_max_period_seconds(10 * 365.2425 * 86400.0);
  v1::CalendarBlock* calendar = spec->mutable_calendar();
  calendar->set_time_zone("America/New_York");
  for (int field = v1::CalendarBlock::SECOND_OF_MINUTE; field <= v1::CalendarBlock::QUARTER;
       ++field) {
    calendar->add_fields(static_cast<v1::CalendarBlock::Field>(field));
  }
  calendar->set_encoding(v1::CalendarBlock::CYCLIC);
}

}  // namespace phasor::bench

#endif  // PHASOR_BENCH_LOAD_SPEC_H_
