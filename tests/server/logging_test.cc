// server/logging.h records, server/call_log.h's rate limit and access log,
// and server/process_metrics.h, without a server. The binary's own log lines
// are checked end to end by tests/e2e/test_logging.py.
#include "server/logging.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/call_log.h"
#include "server/process_metrics.h"

namespace phasor::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const absl::Time kTime = absl::FromUnixMicros(1764570600123456);  // 2025-12-01T06:30:00.123456Z

TEST(LogRecordTest, JsonIsOneObjectWithTimeLevelEventFirst) {
  LogRecord record(LogLevel::kWarning, "call");
  record.Add("method", "/phasor.v1.Encoder/ApplyRope")
      .Add("port", 50051)
      .Add("seconds", 0.25)
      .Add("tls", false)
      .Add("profiles", std::vector<std::string>{"a", "b"})
      .Add("message", "line one\nline \"two\"");
  const std::string line = record.Format(LogFormat::kJson, kTime);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(line);
  std::vector<std::string> keys;
  for (const auto& [key, value] : parsed.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"time", "level", "event", "method", "port",
                                            "seconds", "tls", "profiles", "message"}));
  EXPECT_EQ(parsed["time"], "2025-12-01T06:30:00.123456Z");
  EXPECT_EQ(parsed["level"], "warning");
  EXPECT_EQ(parsed["event"], "call");
  EXPECT_EQ(parsed["port"], 50051);
  EXPECT_EQ(parsed["seconds"], 0.25);
  EXPECT_EQ(parsed["tls"], false);
  EXPECT_EQ(parsed["profiles"], nlohmann::ordered_json::array({"a", "b"}));
  EXPECT_EQ(parsed["message"], "line one\nline \"two\"");
}

TEST(LogRecordTest, JsonReplacesInvalidUtf8) {
  LogRecord record(LogLevel::kInfo, "call");
  record.Add("message", std::string("bad \xff\xfe bytes"));
  const std::string line = record.Format(LogFormat::kJson, kTime);
  const nlohmann::json parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed["message"], "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes");  // U+FFFD twice
}

TEST(LogRecordTest, TextIsLogfmtOnOneLine) {
  LogRecord record(LogLevel::kError, "start_failed");
  record.Add("error", "grpc_address: cannot listen on 1.2.3.4:5\nsecond line")
      .Add("port", 7)
      .Add("empty", "")
      .Add("token", "plain")
      .Add("profiles", std::vector<std::string>{"a", "b"});
  const std::string line = record.Format(LogFormat::kText, kTime);
  EXPECT_EQ(line,
            "time=2025-12-01T06:30:00.123456Z level=error event=start_failed "
            "error=\"grpc_address: cannot listen on 1.2.3.4:5\\nsecond line\" port=7 "
            "empty=\"\" token=plain profiles=a,b");
}

TEST(CutForLogTest, KeepsShortTextAndCutsLongTextOnACharacterBoundary) {
  EXPECT_EQ(CutForLog("short", 10), "short");
  EXPECT_EQ(CutForLog("0123456789", 10), "0123456789");
  EXPECT_EQ(CutForLog("0123456789abc", 10), "0123456789...(3 more bytes)");
  // "é" is two bytes; a cut at an odd byte backs up to the character start.
  std::string accents;
  for (int i = 0; i < 100; ++i) accents += "\xC3\xA9";
  const std::string cut = CutForLog(accents, 11);
  EXPECT_THAT(cut, StartsWith(accents.substr(0, 10) + "...("));
  EXPECT_THAT(cut, HasSubstr("190 more bytes"));
}

// Runs `body` and returns the lines it wrote to stderr.
template <typename Body>
std::vector<std::string> StderrLines(Body body) {
  testing::internal::CaptureStderr();
  body();
  const std::string text = testing::internal::GetCapturedStderr();
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(CallLogTest, FailedCallsAreRateLimitedAndTheDroppedOnesCounted) {
  CallLogOptions options;
  options.format = LogFormat::kJson;
  options.failed_call_burst = 3;
  options.failed_calls_per_second = 1e-6;  // No refill within the test.
  CallLog log(options);
  const std::vector<std::string> lines = StderrLines([&log] {
    for (int i = 0; i < 10; ++i) {
      log.Record("/phasor.v1.Encoder/EncodePositions", grpc::StatusCode::INVALID_ARGUMENT,
                 "ipv4:127.0.0.1:1234", absl::Milliseconds(2), "dim: must be even");
    }
    log.Record("/phasor.v1.Encoder/EncodePositions", grpc::StatusCode::OK,
               "ipv4:127.0.0.1:1234", absl::Milliseconds(2), "");
  });
  ASSERT_EQ(lines.size(), 3u);
  for (const std::string& line : lines) {
    const nlohmann::json record = nlohmann::json::parse(line);
    EXPECT_EQ(record["event"], "call");
    EXPECT_EQ(record["level"], "warning");
    EXPECT_EQ(record["code"], "INVALID_ARGUMENT");
    EXPECT_EQ(record["peer"], "ipv4:127.0.0.1:1234");
    EXPECT_EQ(record["message"], "dim: must be even");
    EXPECT_DOUBLE_EQ(record["duration_seconds"].get<double>(), 0.002);
    EXPECT_EQ(record["suppressed"], 0);
  }
}

TEST(CallLogTest, TheLineAfterAGapCountsWhatWasDropped) {
  CallLogOptions options;
  options.format = LogFormat::kJson;
  options.failed_call_burst = 1;
  options.failed_calls_per_second = 20;  // One line per 50 ms.
  CallLog log(options);
  const std::vector<std::string> lines = StderrLines([&log] {
    for (int i = 0; i < 5; ++i) {
      log.Record("/m", grpc::StatusCode::INTERNAL, "p", absl::ZeroDuration(), "boom");
    }
    absl::SleepFor(absl::Milliseconds(120));
    log.Record("/m", grpc::StatusCode::INTERNAL, "p", absl::ZeroDuration(), "boom");
  });
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["suppressed"], 0);
  EXPECT_EQ(nlohmann::json::parse(lines[1])["suppressed"], 4);
  EXPECT_EQ(nlohmann::json::parse(lines[1])["level"], "error");  // The server's fault.
}

TEST(CallLogTest, AccessLogWritesEveryCallAndCutsClientBytes) {
  CallLogOptions options;
  options.format = LogFormat::kText;
  options.access_log = true;
  options.failed_call_burst = 1;
  options.failed_calls_per_second = 1e-6;
  CallLog log(options);
  const std::string long_message(5000, 'x');
  const std::vector<std::string> lines = StderrLines([&] {
    for (int i = 0; i < 4; ++i) {
      log.Record("/phasor.v1.Encoder/Describe", grpc::StatusCode::OK, "ipv6:[::1]:5",
                 absl::Microseconds(150), "");
    }
    log.Record("/phasor.v1.Encoder/Describe", grpc::StatusCode::NOT_FOUND, "ipv6:[::1]:5",
               absl::Microseconds(150), long_message);
    log.Record("/phasor.v1.Encoder/Describe", grpc::StatusCode::NOT_FOUND, "ipv6:[::1]:5",
               absl::Microseconds(150), long_message);
  });
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_THAT(lines[0], HasSubstr(" level=info event=call method=/phasor.v1.Encoder/Describe "
                                  "code=OK peer=ipv6:[::1]:5 duration_seconds=0.00015"));
  EXPECT_THAT(lines[5], HasSubstr("level=warning"));
  EXPECT_THAT(lines[5], HasSubstr("code=NOT_FOUND"));
  EXPECT_THAT(lines[5], HasSubstr("...(4744 more bytes)"));
  EXPECT_LT(lines[5].size(), 600u);
}

TEST(CallLogTest, NothingToLogMeansNoInterceptor) {
  CallLogOptions options;
  options.failed_calls_per_second = 0;
  CallLog log(options);
  EXPECT_FALSE(log.logs_anything());
  options.access_log = true;
  EXPECT_TRUE(CallLog(options).logs_anything());
}

TEST(ProcessCollectorTest, ExportsTheStandardProcessMetrics) {
  const std::vector<prometheus::MetricFamily> families = ProcessCollector().Collect();
  std::map<std::string, const prometheus::MetricFamily*> by_name;
  for (const auto& family : families) by_name[family.name] = &family;
  for (const char* name :
       {"process_cpu_seconds_total", "process_resident_memory_bytes",
        "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
        "process_start_time_seconds"}) {
    ASSERT_TRUE(by_name.count(name)) << name;
    ASSERT_EQ(by_name[name]->metric.size(), 1u) << name;
  }
  EXPECT_EQ(by_name["process_cpu_seconds_total"]->type, prometheus::MetricType::Counter);
  EXPECT_EQ(by_name["process_open_fds"]->type, prometheus::MetricType::Gauge);
  const auto gauge = [&](const char* name) { return by_name[name]->metric[0].gauge.value; };
  EXPECT_GT(gauge("process_resident_memory_bytes"), 1 << 20);
  EXPECT_GE(gauge("process_virtual_memory_bytes"), gauge("process_resident_memory_bytes"));
  EXPECT_GE(gauge("process_open_fds"), 3);  // stdin, stdout, stderr
  EXPECT_LE(gauge("process_open_fds"), gauge("process_max_fds"));
  const double now = absl::ToUnixMicros(absl::Now()) / 1e6;
  // This test process started at most a few minutes ago (a slow machine),
  // not in the future; /proc's start time has clock-tick resolution.
  EXPECT_LE(gauge("process_start_time_seconds"), now + 1);
  EXPECT_GT(gauge("process_start_time_seconds"), now - 600);
  EXPECT_GE(by_name["process_cpu_seconds_total"]->metric[0].counter.value, 0);
}

}  // namespace
}  // namespace phasor::server
