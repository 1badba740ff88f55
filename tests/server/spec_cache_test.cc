// SpecCache (server/spec_cache.h): bounds, eviction order, concurrent use;
// and EncodeObservations and RopeTables through ServerCaches: a cached call
// answers the same bytes as an uncached one, and a different spec never
// hits.
#include "server/spec_cache.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "server/handlers.h"
#include "server/profiles.h"

namespace phasor::server {
namespace {

TEST(SpecCache, FindsWhatWasInserted) {
  SpecCache<int> cache(SpecCacheLimits{});
  EXPECT_EQ(cache.Find("a"), nullptr);
  cache.Insert("a", std::make_shared<const int>(1), sizeof(int));
  cache.Insert("b", std::make_shared<const int>(2), sizeof(int));
  ASSERT_NE(cache.Find("a"), nullptr);
  EXPECT_EQ(*cache.Find("a"), 1);
  EXPECT_EQ(*cache.Find("b"), 2);
  EXPECT_EQ(cache.Find("c"), nullptr);
  EXPECT_EQ(cache.hits(), 3);
  EXPECT_EQ(cache.misses(), 2);
  // Keys are bytes: an embedded NUL is part of the key.
  cache.Insert(std::string("x\0y", 3), std::make_shared<const int>(3), sizeof(int));
  EXPECT_EQ(cache.Find("x"), nullptr);
  EXPECT_EQ(*cache.Find(std::string("x\0y", 3)), 3);
}

TEST(SpecCache, ReplacesAnEntryUnderTheSameKey) {
  SpecCache<int> cache(SpecCacheLimits{});
  cache.Insert("k", std::make_shared<const int>(1), 0);
  const size_t bytes = cache.bytes();
  cache.Insert("k", std::make_shared<const int>(2), 0);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.bytes(), bytes);
  EXPECT_EQ(*cache.Find("k"), 2);
}

TEST(SpecCache, EntryCountIsBoundedLeastRecentlyUsedFirst) {
  SpecCache<int> cache(SpecCacheLimits{/*max_entries=*/3});
  for (int i = 0; i < 3; ++i) {
    cache.Insert(absl::StrCat("k", i), std::make_shared<const int>(i), 0);
  }
  ASSERT_NE(cache.Find("k0"), nullptr);  // k1 is now the oldest.
  cache.Insert("k3", std::make_shared<const int>(3), 0);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.Find("k1"), nullptr);
  EXPECT_NE(cache.Find("k0"), nullptr);
  EXPECT_NE(cache.Find("k2"), nullptr);
  EXPECT_NE(cache.Find("k3"), nullptr);
}

TEST(SpecCache, ChargedBytesAreBounded) {
  const SpecCacheLimits limits{/*max_entries=*/1000, /*max_bytes=*/64 << 10};
  SpecCache<int> cache(limits);
  // 10,000 distinct 1 KiB keys (a client sending a new spec every call).
  for (int i = 0; i < 10000; ++i) {
    std::string key(1024, 'k');
    key += std::to_string(i);
    cache.Insert(key, std::make_shared<const int>(i), 100);
    ASSERT_LE(cache.bytes(), limits.max_bytes);
  }
  EXPECT_GT(cache.size(), 0u);
  EXPECT_LE(cache.size() * (1024 + 100), limits.max_bytes);
  // The most recent one is there.
  EXPECT_NE(cache.Find(std::string(1024, 'k') + "9999"), nullptr);
}

TEST(SpecCache, AnEntryOverAnEighthOfTheBytesIsNotKept) {
  const SpecCacheLimits limits{/*max_entries=*/10, /*max_bytes=*/8 << 10};
  SpecCache<int> cache(limits);
  cache.Insert("small", std::make_shared<const int>(1), 0);
  cache.Insert("huge", std::make_shared<const int>(2), 1024);
  EXPECT_EQ(cache.Find("huge"), nullptr);
  EXPECT_NE(cache.Find("small"), nullptr);  // Not flushed by it either.
  SpecCache<int> off(SpecCacheLimits{/*max_entries=*/0});
  off.Insert("k", std::make_shared<const int>(1), 0);
  EXPECT_EQ(off.Find("k"), nullptr);
}

TEST(SpecCache, EvictedValuesStayValidForTheirHolders) {
  SpecCache<std::string> cache(SpecCacheLimits{/*max_entries=*/1});
  cache.Insert("a", std::make_shared<const std::string>("alpha"), 5);
  const std::shared_ptr<const std::string> held = cache.Find("a");
  cache.Insert("b", std::make_shared<const std::string>("beta"), 4);
  EXPECT_EQ(cache.Find("a"), nullptr);
  EXPECT_EQ(*held, "alpha");
}

TEST(SpecCache, ConcurrentFindsAndInsertsStayConsistent) {
  const SpecCacheLimits limits{/*max_entries=*/64, /*max_bytes=*/1 << 20};
  SpecCache<int64_t> cache(limits);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 5000; ++i) {
        const int64_t key = (i * 7 + t) % 200;
        const std::string name = absl::StrCat("key", key);
        if (std::shared_ptr<const int64_t> hit = cache.Find(name)) {
          // A hit is always the value stored under that key.
          ASSERT_EQ(*hit, key * 3);
        } else {
          cache.Insert(name, std::make_shared<const int64_t>(key * 3), 8);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(cache.size(), limits.max_entries);
  EXPECT_LE(cache.bytes(), limits.max_bytes);
  EXPECT_EQ(cache.hits() + cache.misses(), 4 * 5000);
}

// --- EncodeObservations through the caches ---------------------------------

int64_t Ns(int64_t seconds) { return seconds * 1000000000; }

v1::Tensor Tensor(const std::string& bytes, std::vector<int64_t> shape, v1::DType dtype) {
  v1::Tensor tensor;
  for (int64_t extent : shape) tensor.add_shape(extent);
  tensor.set_dtype(dtype);
  tensor.set_data(bytes);
  return tensor;
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Eight rows of two channels with every block but content on, calendar in
// `zone`.
v1::EncodeObservationsRequest Request(const std::string& zone) {
  v1::EncodeObservationsRequest request;
  std::vector<int64_t> times;
  std::vector<float> values;
  for (int t = 0; t < 8; ++t) {
    times.push_back(Ns(int64_t{1710054000} + 1800 * t));  // Across a DST change.
    values.push_back(t % 3 == 0 ? std::nanf("") : 0.5f * t);
    values.push_back(-1.0f * t);
  }
  v1::Observations* observations = request.mutable_observations();
  *observations->mutable_timestamps() = Tensor(Bytes(times), {8}, v1::INT64);
  *observations->mutable_values() = Tensor(Bytes(values), {8, 2}, v1::FLOAT32);
  observations->add_channel_names("hr");
  observations->add_channel_names("spo2");
  v1::TemporalSpec* spec = request.mutable_spec()->mutable_temporal();
  spec->mutable_content();
  spec->mutable_time()->set_dim(6);
  spec->mutable_time()->set_min_period_seconds(60);
  spec->mutable_time()->set_max_period_seconds(86400);
  spec->mutable_gaps();
  spec->mutable_calendar()->set_time_zone(zone);
  spec->mutable_calendar()->add_fields(v1::CalendarBlock::HOUR_OF_DAY);
  spec->mutable_calendar()->add_fields(v1::CalendarBlock::DAY_OF_WEEK);
  return request;
}

class CachedObservationsTest : public ::testing::Test {
 protected:
  // The serialized response, with `caches` (may be null).
  std::string Encode(const v1::EncodeObservationsRequest& request,
                     ServerCaches* caches) {
    const auto alive = [] { return absl::OkStatus(); };
    ExecutionOptions execution;
    execution.max_threads = 1;
    HandlerContext context{&profiles_, execution, RequestLimits{}, /*metrics=*/nullptr,
                           alive};
    context.caches = caches;
    v1::EncodeObservationsResponse response;
    const absl::Status status =
        HandleEncodeObservations(context, request, /*stream=*/nullptr, &response);
    EXPECT_TRUE(status.ok()) << status;
    return response.SerializeAsString();
  }

  ProfileRegistry profiles_;
};

TEST_F(CachedObservationsTest, HitsAnswerTheSameBytesAsUncachedCalls) {
  ServerCaches caches;
  const v1::EncodeObservationsRequest request = Request("America/New_York");
  const std::string uncached = Encode(request, nullptr);
  ASSERT_FALSE(uncached.empty());
  const std::string first = Encode(request, &caches);
  EXPECT_EQ(caches.specs.misses(), 1);
  EXPECT_EQ(caches.layouts.misses(), 1);
  EXPECT_EQ(caches.encoders.misses(), 1);
  const std::string second = Encode(request, &caches);
  EXPECT_EQ(caches.specs.hits(), 1);
  EXPECT_EQ(caches.layouts.hits(), 1);
  EXPECT_EQ(caches.encoders.hits(), 1);
  EXPECT_EQ(first, uncached);
  EXPECT_EQ(second, uncached);
  // float64 output: the same spec, encoders of the other precision.
  v1::EncodeObservationsRequest wide = request;
  wide.set_output_dtype(v1::FLOAT64);
  const std::string wide_uncached = Encode(wide, nullptr);
  EXPECT_EQ(Encode(wide, &caches), wide_uncached);
  EXPECT_EQ(caches.encoders.misses(), 2);
  EXPECT_EQ(Encode(wide, &caches), wide_uncached);
  EXPECT_EQ(caches.encoders.hits(), 2);
  EXPECT_EQ(caches.encoders.size(), 2u);
}

TEST_F(CachedObservationsTest, ADifferentSpecOrChannelCountDoesNotHit) {
  ServerCaches caches;
  const std::string new_york = Encode(Request("America/New_York"), &caches);
  const std::string berlin = Encode(Request("Europe/Berlin"), &caches);
  EXPECT_EQ(caches.specs.hits(), 0);
  EXPECT_EQ(caches.specs.size(), 2u);
  EXPECT_NE(new_york, berlin);
  EXPECT_EQ(berlin, Encode(Request("Europe/Berlin"), nullptr));
  // Same spec, one channel: the spec hits, the layout does not.
  v1::EncodeObservationsRequest one_channel = Request("Europe/Berlin");
  std::vector<float> values(8, 1.0f);
  *one_channel.mutable_observations()->mutable_values() =
      Tensor(Bytes(values), {8, 1}, v1::FLOAT32);
  one_channel.mutable_observations()->clear_channel_names();
  const std::string narrow = Encode(one_channel, &caches);
  EXPECT_EQ(caches.specs.hits(), 1);
  EXPECT_EQ(caches.layouts.hits(), 0);
  EXPECT_EQ(caches.encoders.hits(), 0);
  EXPECT_EQ(narrow, Encode(one_channel, nullptr));
  // Channel names are not part of the layout key, and are still applied.
  v1::EncodeObservationsRequest renamed = Request("Europe/Berlin");
  renamed.mutable_observations()->set_channel_names(0, "pulse");
  const std::string renamed_bytes = Encode(renamed, &caches);
  EXPECT_EQ(renamed_bytes, Encode(renamed, nullptr));
  EXPECT_NE(renamed_bytes, berlin);
}

TEST_F(CachedObservationsTest, ManyDistinctSpecsKeepTheCacheBounded) {
  ServerCaches caches;
  v1::EncodeObservationsRequest request = Request("UTC");
  for (int i = 0; i < 600; ++i) {
    request.mutable_spec()->mutable_temporal()->mutable_time()->set_max_period_seconds(
        86400 + i);
    Encode(request, &caches);
  }
  EXPECT_LE(caches.specs.size(), SpecCacheLimits{}.max_entries);
  EXPECT_LE(caches.specs.bytes(), SpecCacheLimits{}.max_bytes);
  EXPECT_LE(caches.layouts.bytes(), SpecCacheLimits{}.max_bytes);
  EXPECT_LE(caches.encoders.size(), 256u);
  EXPECT_LE(caches.encoders.bytes(), SpecCacheLimits{}.max_bytes);
  EXPECT_EQ(caches.specs.hits(), 0);
}

TEST_F(CachedObservationsTest, ConcurrentCallsShareTheCachesAndAgree) {
  ServerCaches caches;
  const std::vector<std::string> zones = {"UTC", "America/New_York", "Asia/Kolkata"};
  std::vector<std::string> expected;
  for (const std::string& zone : zones) expected.push_back(Encode(Request(zone), nullptr));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 60; ++i) {
        const size_t z = static_cast<size_t>(i + t) % zones.size();
        if (Encode(Request(zones[z]), &caches) != expected[z]) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  EXPECT_EQ(caches.specs.size(), zones.size());
  EXPECT_GE(caches.specs.hits(), 4 * 60 - 4 * static_cast<int64_t>(zones.size()));
}

// RopeTables through ServerCaches::rope_plans: a plan is shared by the
// sequence lengths whose frequencies agree (core/rope_scaling.h
// RopeSeqLenBucket) and only by them; hits answer the uncached bytes.
TEST(CachedRopePlansTest, PlansAreKeyedByWhatTheScalingReads) {
  ProfileRegistry profiles;
  const auto tables = [&](int64_t count, ServerCaches* caches) {
    const auto alive = [] { return absl::OkStatus(); };
    ExecutionOptions execution;
    execution.max_threads = 1;
    HandlerContext context{&profiles, execution, RequestLimits{}, /*metrics=*/nullptr,
                           alive};
    context.caches = caches;
    v1::RopeTablesRequest request;
    v1::RopeSpec* rope = request.mutable_spec()->mutable_rope();
    rope->set_rotary_dim(8);
    rope->set_max_position_embeddings(16);
    rope->mutable_scaling()->mutable_dynamic()->set_factor(2);
    request.mutable_positions()->mutable_range()->set_count(count);
    v1::RopeTablesResponse response;
    const absl::Status status = HandleRopeTables(context, request, &response);
    EXPECT_TRUE(status.ok()) << status;
    return response.SerializeAsString();
  };
  ServerCaches caches;
  // Up to L0 = 16 positions dynamic NTK is plain RoPE: one plan.
  EXPECT_EQ(tables(4, &caches), tables(4, nullptr));
  EXPECT_EQ(tables(16, &caches), tables(16, nullptr));
  EXPECT_EQ(caches.rope_plans.misses(), 1);
  EXPECT_EQ(caches.rope_plans.hits(), 1);
  // Past it, every length scales differently.
  EXPECT_EQ(tables(17, &caches), tables(17, nullptr));
  EXPECT_EQ(tables(18, &caches), tables(18, nullptr));
  EXPECT_EQ(caches.rope_plans.size(), 3u);
  EXPECT_EQ(tables(18, &caches), tables(18, nullptr));
  EXPECT_EQ(caches.rope_plans.hits(), 2);
}

}  // namespace
}  // namespace phasor::server
