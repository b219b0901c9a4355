// A table that grows past the memory the server process may have fails that call with
// RESOURCE_EXHAUSTED (ps/detail/service.cc), a load with ResourceExhausted naming the table and
// file (ps/sparse_table.cc); the server goes on.
//
// The process runs out of memory for real: a forked child (a gtest death test) lowers its
// address-space limit (RLIMIT_AS) a few MB above what it uses, then grows a table until a call
// fails. Without the guards the std::bad_alloc of the table's slab or index would end it.
#include <gtest/gtest.h>
#include <unistd.h>  // _exit

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "memory_limit.h"
#include "ps/server/detail/barrier.h"
#include "ps/server/detail/service.h"
#include "ps/server/detail/table_set.h"
#include "ps/table/sparse_table.h"
#include "ps/table/table_file.h"

namespace fleet::ps::detail {
namespace {

using testing_memory::kSkipUnderAddressSanitizer;
using testing_memory::kUnderAddressSanitizer;
using testing_memory::LimitMemoryTo;

std::string KeyBytes(int64_t first, size_t n) {
  std::vector<int64_t> keys(n);
  std::iota(keys.begin(), keys.end(), first);
  return std::string(reinterpret_cast<const char*>(keys.data()), n * sizeof(int64_t));
}

// Exit codes of the child, for the parent's message.
enum ChildExit : int {
  kGuarded = 0,      // the call failed with RESOURCE_EXHAUSTED (and old rows still serve)
  kNoSetUp = 2,      // the tables, the part file or the limit could not be set up
  kNeverFailed = 3,  // everything fitted: the limit did not bite
  kOtherError = 4,   // a pull failed with another code
  kNotServing = 5,   // after the failure, rows created before could not be pulled
};

// A server of one sparse table (id 1, dim 8, Adagrad: 16 floats a row), or nullptr.
std::unique_ptr<TableSet> OneTableServer() {
  proto::ServerConfig config;
  config.set_server_index(0);
  config.set_num_servers(1);
  proto::TableConfig* table = config.add_tables();
  table->set_table_id(1);
  table->set_name("emb");
  table->set_type(proto::SPARSE);
  table->set_dim(8);
  table->mutable_optimizer()->set_learning_rate(0.1f);
  table->mutable_optimizer()->mutable_adagrad();
  auto tables = TableSet::Create(config, Sharding{});
  return tables.ok() ? std::move(*tables) : nullptr;
}

int PullUntilOutOfMemory() {
  std::unique_ptr<TableSet> tables = OneTableServer();
  if (tables == nullptr) return kNoSetUp;
  BarrierSet barriers;
  PsServiceImpl service(tables.get(), &barriers, [] {});
  if (!LimitMemoryTo(size_t{384} << 20)) return kNoSetUp;

  constexpr size_t kBatch = size_t{1} << 20;  // 76 MB of rows and 32 MB of reply a batch
  for (int64_t first = 0; first < (int64_t{1} << 30); first += kBatch) {
    proto::PullSparseRequest request;
    request.set_table_id(1);
    request.set_keys(KeyBytes(first, kBatch));
    proto::PullSparseReply reply;
    if (!service.PullSparse(nullptr, &request, &reply).ok()) return kOtherError;
    if (reply.status().code() == 0) continue;
    if (reply.status().code() != static_cast<int>(absl::StatusCode::kResourceExhausted) ||
        reply.status().message().find("out of memory") == std::string::npos) {
      std::fprintf(stderr, "pull failed with code %d: %s\n", reply.status().code(),
                   reply.status().message().c_str());
      return kOtherError;
    }
    // The server still serves: the first rows are there, at the size a pull asks for.
    proto::PullSparseRequest again;
    again.set_table_id(1);
    again.set_keys(KeyBytes(0, 1000));
    proto::PullSparseReply old_rows;
    service.PullSparse(nullptr, &again, &old_rows);
    const bool served =
        old_rows.status().code() == 0 && old_rows.values().size() == 1000 * 8 * sizeof(float);
    return first > 0 && served ? kGuarded : kNotServing;
  }
  return kNeverFailed;
}

// Saves 1.2M rows (86 MB, so the checksum and the rows each take two threads), then loads them
// into a table holding a few rows with 32 MB of room: too little for the rows' slab. The table
// is left empty, not partly loaded.
int LoadUntilOutOfMemory() {
  const std::string path = testing::TempDir() + "ps_load_memory_part";
  {
    std::unique_ptr<TableSet> tables = OneTableServer();
    if (tables == nullptr) return kNoSetUp;
    SparseTable* table = *(*tables).Sparse(1);
    std::vector<int64_t> keys(size_t{1200} << 10);
    std::iota(keys.begin(), keys.end(), int64_t{-600000});
    std::vector<float> values(keys.size() * 8);
    if (!table->Pull(keys, absl::MakeSpan(values)).ok()) return kNoSetUp;
    if (!table->Save(path, proto::BASE).ok()) return kNoSetUp;
  }
  std::unique_ptr<TableSet> fresh = OneTableServer();
  if (fresh == nullptr) return kNoSetUp;
  SparseTable* table = *fresh->Sparse(1);
  const std::vector<int64_t> held = {1, 2, 3};
  std::vector<float> held_values(held.size() * 8);
  if (!table->Pull(held, absl::MakeSpan(held_values)).ok()) return kNoSetUp;
  auto part = TableFileReader::Open(path);
  if (!part.ok()) return kNoSetUp;
  if (!LimitMemoryTo(size_t{32} << 20)) return kNoSetUp;
  TableFileReader* parts[] = {part->get()};
  auto loaded = table->Load(parts, [](int64_t) { return true; });
  if (loaded.ok()) return kNeverFailed;
  const std::string message(loaded.status().message());
  if (loaded.status().code() != absl::StatusCode::kResourceExhausted ||
      message.find("out of memory") == std::string::npos ||
      message.find("'emb' is left empty") == std::string::npos || table->RowCount() != 0) {
    std::fprintf(stderr, "load failed with: %s\n", loaded.status().ToString().c_str());
    return kOtherError;
  }
  return kGuarded;
}

TEST(PsServiceMemoryTest, RunningOutOfMemoryFailsTheCallNotTheServer) {
  if (kUnderAddressSanitizer) {
    GTEST_SKIP() << kSkipUnderAddressSanitizer;
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // _exit: the child ends without exit handlers, one of which (OpenBLAS's) joins a worker thread
  // that keeps retrying an allocation under the lowered limit.
  EXPECT_EXIT(::_exit(PullUntilOutOfMemory()), testing::ExitedWithCode(kGuarded), "")
      << "exit codes: 2 no set-up, 3 the limit never bit, 4 another error, 5 not serving after";
}

TEST(PsServiceMemoryTest, RunningOutOfMemoryInALoadIsAStatusNamingTheTable) {
  if (kUnderAddressSanitizer) {
    GTEST_SKIP() << kSkipUnderAddressSanitizer;
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // _exit: the child ends without exit handlers, one of which (OpenBLAS's) joins a worker thread
  // that keeps retrying an allocation under the lowered limit.
  EXPECT_EXIT(::_exit(LoadUntilOutOfMemory()), testing::ExitedWithCode(kGuarded), "")
      << "exit codes: 2 no set-up, 3 the load fitted, 4 another error";
}

}  // namespace
}  // namespace fleet::ps::detail
