// A dataset pass's feed threads get the configured CPU priority (core/thread_priority.h), read
// back from the kernel (/proc/self/task/<tid>/stat: nice and scheduling policy), and the
// batches they produce do not depend on it; where the kernel refuses the change, the pass warns
// once and feeds the same batches.

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_priority.h"
#include "data/dataset.h"
#include "gtest/gtest.h"

namespace fleet::data {
namespace {

constexpr ThreadPriority kAll[] = {ThreadPriority::kNormal, ThreadPriority::kBatch,
                                   ThreadPriority::kLow, ThreadPriority::kIdle};

struct TaskPriority {
  int nice = 0;
  int policy = 0;  // SCHED_OTHER, SCHED_BATCH, SCHED_IDLE, ...
};

// Fields 19 (nice) and 41 (policy) of a task's stat, counted after the parenthesised name.
TaskPriority ReadTaskPriority(const std::string& tid) {
  std::ifstream in("/proc/self/task/" + tid + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::vector<std::string> f;
  for (std::string field; fields >> field;) f.push_back(field);
  // f[0] is field 3 (state).
  return TaskPriority{std::stoi(f.at(19 - 3)), std::stoi(f.at(41 - 3))};
}

std::string TaskName(const std::string& tid) {
  std::ifstream in("/proc/self/task/" + tid + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// The ids of this process's threads called `name`.
std::vector<std::string> ThreadsNamed(const std::string& name) {
  std::vector<std::string> tids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    const std::string tid = entry.path().filename();
    if (TaskName(tid) == name) tids.push_back(tid);
  }
  return tids;
}

TaskPriority PriorityOfNewThreadWith(ThreadPriority priority) {
  TaskPriority seen;
  std::thread t([&] {
    absl::Status status = LowerCurrentThreadPriority(priority);
    ASSERT_TRUE(status.ok()) << status;
    seen = ReadTaskPriority(std::to_string(syscall(SYS_gettid)));
  });
  t.join();
  return seen;
}

TEST(ThreadPriority, SetsTheCallingThreadOnly) {
  const std::string self = std::to_string(syscall(SYS_gettid));
  const TaskPriority before = ReadTaskPriority(self);
  TaskPriority low = PriorityOfNewThreadWith(ThreadPriority::kLow);
  EXPECT_EQ(low.nice, 19);
  EXPECT_EQ(low.policy, SCHED_OTHER);
  TaskPriority batch = PriorityOfNewThreadWith(ThreadPriority::kBatch);
  EXPECT_EQ(batch.nice, before.nice);
  EXPECT_EQ(batch.policy, SCHED_BATCH);
  TaskPriority idle = PriorityOfNewThreadWith(ThreadPriority::kIdle);
  EXPECT_EQ(idle.policy, SCHED_IDLE);
  TaskPriority normal = PriorityOfNewThreadWith(ThreadPriority::kNormal);
  EXPECT_EQ(normal.nice, before.nice);
  EXPECT_EQ(normal.policy, before.policy);
  const TaskPriority after = ReadTaskPriority(self);
  EXPECT_EQ(after.nice, before.nice);
  EXPECT_EQ(after.policy, before.policy);
}

TEST(ThreadPriority, NamesRoundTripAndUnknownNamesAreRefused) {
  for (ThreadPriority p : {ThreadPriority::kNormal, ThreadPriority::kBatch, ThreadPriority::kLow,
                           ThreadPriority::kIdle}) {
    auto parsed = ThreadPriorityFromName(ThreadPriorityName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  auto bad = ThreadPriorityFromName("high");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'high'"), std::string::npos) << bad.status();
}

class FeedPriorityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fleet_feed_priority_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    // Two files of 40 samples: "1 <id>" for an int64 slot `ids`, "1 <label>" for `label`.
    for (int f = 0; f < 2; ++f) {
      std::string path = dir_ / ("part-" + std::to_string(f));
      std::ofstream out(path);
      for (int i = 0; i < 40; ++i) out << "1 " << f * 100 + i << " 1 " << (i % 2) << "\n";
      files_.push_back(path);
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  DataFeedConfig Config(ThreadPriority priority) const {
    DataFeedConfig config;
    config.slots.push_back(MakeSlotSpec("ids", DType::kInt64, 1, Shape{-1, 1}));
    config.slots.push_back(MakeSlotSpec("label", DType::kInt64, 0, Shape{-1, 1}));
    config.batch_size = 4;
    config.threads = 2;
    config.feed_priority = priority;
    return config;
  }

  // Starts a pass into a one-batch channel and, while its feed threads are held in Put by the
  // full channel (so that they are alive), reads the priority of each thread called
  // `thread_name`; then drains the pass and returns every batch's ids in order of arrival.
  std::vector<int64_t> RunPass(Dataset* dataset, const std::string& thread_name,
                               ThreadPriority expected) {
    Channel<Batch> channel(1, "test channel");
    std::unique_ptr<BatchSource> pass = dataset->NewPass();
    pass->Start(&channel);
    std::optional<Batch> first = channel.Get();  // a feed thread has run
    std::vector<std::string> tids = ThreadsNamed(thread_name);
    EXPECT_FALSE(tids.empty()) << "no thread called " << thread_name;
    for (const auto& tid : tids) {
      TaskPriority p = ReadTaskPriority(tid);
      if (expected == ThreadPriority::kIdle) {
        EXPECT_EQ(p.policy, SCHED_IDLE) << thread_name << " " << tid;
      } else if (expected == ThreadPriority::kBatch) {
        EXPECT_EQ(p.policy, SCHED_BATCH) << thread_name << " " << tid;
        EXPECT_EQ(p.nice, 0) << thread_name << " " << tid;
      } else {
        EXPECT_EQ(p.policy, SCHED_OTHER) << thread_name << " " << tid;
        EXPECT_EQ(p.nice, expected == ThreadPriority::kLow ? 19 : 0) << thread_name << " " << tid;
      }
    }
    std::vector<int64_t> ids;
    for (std::optional<Batch> b = std::move(first); b; b = channel.Get()) {
      const LoDTensor& t = b->tensors[0];
      for (int64_t i = 0; i < t.numel(); ++i) ids.push_back(t.data<int64_t>()[i]);
    }
    pass->Join();
    return ids;
  }

  std::filesystem::path dir_;
  std::vector<std::string> files_;
};

TEST_F(FeedPriorityTest, QueueReadersGetThePriorityAndTheSameSamples) {
  std::vector<int64_t> reference;
  for (ThreadPriority p : kAll) {
    QueueDataset dataset(Config(p), files_);
    std::vector<int64_t> ids = RunPass(&dataset, "data_reader", p);
    std::sort(ids.begin(), ids.end());  // two readers interleave their files
    ASSERT_EQ(ids.size(), 80u) << ThreadPriorityName(p);
    if (reference.empty()) reference = ids;
    EXPECT_EQ(ids, reference) << ThreadPriorityName(p);
  }
}

// Makes setpriority and sched_setscheduler fail with EPERM for this thread and the threads it
// starts from now on, as a sandbox's seccomp profile may; false where that cannot be done.
bool RefusePriorityChanges() {
#if defined(__x86_64__)
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_sched_setscheduler, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_setpriority, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
#else
  return false;
#endif
}

// In a child whose priority changes are refused: a queue pass of 2 readers at kIdle. Exit 0 when
// it warned exactly once, naming the priority, and fed all 80 samples; 2 when the refusal could
// not be set up, 3 when the warnings were wrong, 4 when samples were lost.
int RunPassWithPriorityRefused(const std::vector<std::string>& files, DataFeedConfig config) {
  if (!RefusePriorityChanges()) return 2;
  std::atomic<int> warnings{0};
  std::atomic<bool> named{false};
  config.feed_priority = ThreadPriority::kIdle;
  config.warn = [&](const std::string& message) {
    warnings.fetch_add(1);
    if (message.find("idle") != std::string::npos) named.store(true);
  };
  QueueDataset dataset(config, files);
  Channel<Batch> channel(4, "test channel");
  std::unique_ptr<BatchSource> pass = dataset.NewPass();
  pass->Start(&channel);
  size_t samples = 0;
  while (std::optional<Batch> b = channel.Get()) samples += b->tensors[0].numel();
  pass->Join();
  if (warnings.load() != 1 || !named.load()) return 3;
  return samples == 80 ? 0 : 4;
}

TEST_F(FeedPriorityTest, ARefusedPriorityWarnsOnceAndTheFeedRunsOn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // _exit: the child ends without exit handlers (a filter cannot be taken back, so it must not
  // reach the parent; the child is a fresh run of this one test).
  EXPECT_EXIT(::_exit(RunPassWithPriorityRefused(files_, Config(ThreadPriority::kNormal))),
              testing::ExitedWithCode(0), "")
      << "exit codes: 2 no seccomp filter, 3 not exactly one warning naming 'idle', 4 samples lost";
}

TEST_F(FeedPriorityTest, InMemoryProducersGetThePriorityAndTheSameBatches) {
  std::vector<int64_t> reference;
  for (ThreadPriority p : kAll) {
    InMemoryDataset dataset(Config(p), files_);
    dataset.LoadIntoMemory();
    dataset.LocalShuffle(7);
    dataset.SetBatching(4, 1);  // one producer: batches come out in the shuffled order
    std::vector<int64_t> ids = RunPass(&dataset, "data_producer", p);
    ASSERT_EQ(ids.size(), 80u) << ThreadPriorityName(p);
    if (reference.empty()) reference = ids;
    EXPECT_EQ(ids, reference) << ThreadPriorityName(p);
  }
}

}  // namespace
}  // namespace fleet::data
