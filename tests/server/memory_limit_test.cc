// DetectMemoryLimit and ChooseMemoryBudget (server/memory_limit.h) on fake
// /proc and cgroup trees in a temporary directory: cgroup v1 (as on a host
// or in a Docker container without a cgroup namespace), cgroup v2 (a
// Kubernetes pod on a current node, with and without a cgroup namespace),
// "no limit" spellings, a parent's limit binding its child, and the
// fallback to physical memory.
#include "server/memory_limit.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace phasor::server {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kGiB = int64_t{1} << 30;
// MemTotal of the fake hosts: 16 GiB.
constexpr const char* kMemInfo =
    "MemTotal:       16777216 kB\nMemFree:         8000000 kB\n";

// A fake root directory, removed at the end of the test.
class FakeRoot {
 public:
  FakeRoot() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "phasor-memory-limit-XXXXXX").string();
    root_ = mkdtemp(pattern.data());
  }
  ~FakeRoot() { std::filesystem::remove_all(root_); }

  void Write(const std::string& path, const std::string& text) const {
    const std::filesystem::path full = root_ + path;
    std::filesystem::create_directories(full.parent_path());
    std::ofstream(full) << text;
  }
  void MakeDirectory(const std::string& path) const {
    std::filesystem::create_directories(root_ + path);
  }
  const std::string& path() const { return root_; }

 private:
  std::string root_;
};

// A cgroup v1 host: the memory hierarchy at /sys/fs/cgroup/memory, the
// process in /kubepods/pod1/ctr.
void WriteV1(const FakeRoot& root, const std::string& mount_root = "/",
             const std::string& cgroup_path = "/kubepods/pod1/ctr") {
  root.Write("/proc/meminfo", kMemInfo);
  root.Write("/proc/self/cgroup",
             absl::StrCat("12:pids:/kubepods/pod1/ctr\n"
                          "4:memory:", cgroup_path, "\n"
                          "1:name=systemd:/kubepods/pod1/ctr\n"
                          "0::/\n"));
  root.Write("/proc/self/mountinfo",
             absl::StrCat("22 27 0:21 / /proc rw,relatime - proc proc rw\n"
                          "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
                          "32 31 0:29 ", mount_root,
                          " /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup "
                          "cgroup rw,cpu,cpuacct\n"
                          "35 31 0:32 ", mount_root,
                          " /sys/fs/cgroup/memory rw,relatime shared:12 - cgroup cgroup "
                          "rw,memory\n"
                          "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"));
}

TEST(DetectMemoryLimit, CgroupV1) {
  FakeRoot root;
  WriteV1(root);
  const std::string memory = "/sys/fs/cgroup/memory";
  root.Write(memory + "/memory.limit_in_bytes", "9223372036854771712\n");
  root.Write(memory + "/kubepods/memory.limit_in_bytes", "9223372036854771712\n");
  root.Write(memory + "/kubepods/pod1/memory.limit_in_bytes", "9223372036854771712\n");
  root.Write(memory + "/kubepods/pod1/ctr/memory.limit_in_bytes", "1073741824\n");
  const absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(root.path());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, kGiB);
  EXPECT_THAT(limit->source, StartsWith("cgroup v1 "));
  EXPECT_THAT(limit->source, EndsWith("/kubepods/pod1/ctr/memory.limit_in_bytes"));
}

TEST(DetectMemoryLimit, CgroupV1ParentLimitBindsTheChild) {
  FakeRoot root;
  WriteV1(root);
  const std::string memory = "/sys/fs/cgroup/memory";
  root.Write(memory + "/kubepods/pod1/memory.limit_in_bytes", "536870912\n");
  root.Write(memory + "/kubepods/pod1/ctr/memory.limit_in_bytes", "9223372036854771712\n");
  const absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(root.path());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, kGiB / 2);
  EXPECT_THAT(limit->source, EndsWith("/kubepods/pod1/memory.limit_in_bytes"));
}

TEST(DetectMemoryLimit, CgroupV1HierarchicalLimitCoversHiddenAncestors) {
  // A Docker container without a cgroup namespace: the mount shows the
  // container's own cgroup as its root, its parents are not visible.
  FakeRoot root;
  WriteV1(root, /*mount_root=*/"/docker/abc", /*cgroup_path=*/"/docker/abc");
  const std::string memory = "/sys/fs/cgroup/memory";
  root.Write(memory + "/memory.limit_in_bytes", "9223372036854771712\n");
  root.Write(memory + "/memory.stat",
             "cache 0\nrss 100\nhierarchical_memory_limit 805306368\n"
             "hierarchical_memsw_limit 9223372036854771712\n");
  const absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(root.path());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, 768 << 20);
  EXPECT_THAT(limit->source, HasSubstr("memory.stat hierarchical_memory_limit"));
}

TEST(DetectMemoryLimit, CgroupV1PathOutsideTheMountReadsTheMountPoint) {
  FakeRoot root;
  WriteV1(root, /*mount_root=*/"/docker/abc", /*cgroup_path=*/"/somewhere/else");
  root.Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "2147483648\n");
  const absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(root.path());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, 2 * kGiB);
}

// A cgroup v2 node: /sys/fs/cgroup is the unified hierarchy.
void WriteV2(const FakeRoot& root, const std::string& cgroup_path) {
  root.Write("/proc/meminfo", kMemInfo);
  root.Write("/proc/self/cgroup", absl::StrCat("0::", cgroup_path, "\n"));
  root.Write("/proc/self/mountinfo",
             "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
             "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - "
             "cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n");
}

TEST(DetectMemoryLimit, CgroupV2Pod) {
  // Kubernetes on a v2 node without a cgroup namespace: the pod's and the
  // container's cgroups, the container limited to 1 GiB.
  FakeRoot root;
  const std::string pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-pod1.slice";
  const std::string container = pod + "/cri-containerd-abc.scope";
  WriteV2(root, container);
  root.Write("/sys/fs/cgroup/kubepods.slice/memory.max", "max\n");
  root.Write("/sys/fs/cgroup" + pod + "/memory.max", "2147483648\n");
  root.Write("/sys/fs/cgroup" + container + "/memory.max", "1073741824\n");
  const absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(root.path());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, kGiB);
  EXPECT_THAT(limit->source, StartsWith("cgroup v2 "));
  EXPECT_THAT(limit->source, EndsWith("cri-containerd-abc.scope/memory.max"));
}

TEST(DetectMemoryLimit, CgroupV2InACgroupNamespace) {
  // With a cgroup namespace the container sees its own cgroup as "/".
  FakeRoot root;
  WriteV2(root, "/");
  root.Write("/sys/fs/cgroup/memory.max", "1073741824\n");
  const absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(root.path());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, kGiB);
}

TEST(DetectMemoryLimit, CgroupV2MaxMeansNoLimit) {
  FakeRoot root;
  WriteV2(root, "/user.slice/session-1.scope");
  root.Write("/sys/fs/cgroup/user.slice/memory.max", "max\n");
  root.Write("/sys/fs/cgroup/user.slice/session-1.scope/memory.max", "max\n");
  const absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(root.path());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, 16 * kGiB);
  EXPECT_THAT(limit->source, EndsWith("/proc/meminfo MemTotal"));
}

TEST(DetectMemoryLimit, ALimitAbovePhysicalMemoryIsNoLimit) {
  FakeRoot root;
  WriteV2(root, "/big");
  root.Write("/sys/fs/cgroup/big/memory.max", absl::StrCat(64 * kGiB, "\n"));
  const absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(root.path());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, 16 * kGiB);
}

TEST(DetectMemoryLimit, EscapedMountPoint) {
  // mountinfo writes a space in a path as \040.
  FakeRoot root;
  root.Write("/proc/meminfo", kMemInfo);
  root.Write("/proc/self/cgroup", "0::/a\n");
  root.Write("/proc/self/mountinfo",
             "30 23 0:26 / /cgroup\\040root rw - cgroup2 cgroup2 rw\n");
  root.Write("/cgroup root/a/memory.max", "1073741824\n");
  const absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(root.path());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, kGiB);
}

TEST(DetectMemoryLimit, NoCgroupFilesMeansPhysicalMemory) {
  FakeRoot root;
  root.Write("/proc/meminfo", kMemInfo);
  const absl::StatusOr<MemoryLimit> limit = DetectMemoryLimit(root.path());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, 16 * kGiB);
}

TEST(DetectMemoryLimit, NothingReadableIsNotFound) {
  FakeRoot root;
  root.Write("/proc/meminfo", "MemTotal: lots\n");
  EXPECT_EQ(DetectMemoryLimit(root.path()).status().code(), absl::StatusCode::kNotFound);
}

TEST(ChooseMemoryBudget, FlagOrAFractionOfTheLimit) {
  FakeRoot root;
  WriteV2(root, "/");
  root.Write("/sys/fs/cgroup/memory.max", "1073741824\n");
  const MemoryBudgetSize automatic = ChooseMemoryBudget(0, root.path());
  EXPECT_EQ(automatic.bytes, static_cast<int64_t>(kGiB * kMemoryBudgetFraction));
  EXPECT_THAT(automatic.source, HasSubstr("1073741824 bytes (cgroup v2 "));
  const MemoryBudgetSize configured = ChooseMemoryBudget(12345, root.path());
  EXPECT_EQ(configured.bytes, 12345);
  EXPECT_EQ(configured.source, "--memory_budget_bytes");
  // Nothing to read: sysconf's physical memory, still positive.
  FakeRoot empty;
  const MemoryBudgetSize fallback = ChooseMemoryBudget(0, empty.path());
  EXPECT_GT(fallback.bytes, 0);
  EXPECT_THAT(fallback.source, HasSubstr("sysconf"));
}

}  // namespace
}  // namespace phasor::server
