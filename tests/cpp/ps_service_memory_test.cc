// ps/detail/service.cc: a table that grows past the memory the server process may have makes
// that call fail with RESOURCE_EXHAUSTED; the server goes on serving the rows it has.
//
// The process runs out of memory for real: a forked child (a gtest death test) lowers its
// address-space limit (RLIMIT_AS) a few hundred MB above what it uses, then pulls new keys, a
// million at a time, straight through the service's handler until a call fails. Without the
// handler's guard the std::bad_alloc of the table's slab or index would end the process.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "ps/detail/barrier.h"
#include "ps/detail/service.h"
#include "ps/detail/table_set.h"

namespace fleet::ps::detail {
namespace {

// Bytes of address space this process has mapped (/proc/self/statm, first field, in pages).
size_t MappedBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long pages = 0;
  const int read = std::fscanf(f, "%lu", &pages);
  std::fclose(f);
  return read == 1 ? pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

std::string KeyBytes(int64_t first, size_t n) {
  std::vector<int64_t> keys(n);
  std::iota(keys.begin(), keys.end(), first);
  return std::string(reinterpret_cast<const char*>(keys.data()), n * sizeof(int64_t));
}

// Exit codes of the child, for the parent's message.
enum ChildExit : int {
  kGuarded = 0,      // a pull failed with RESOURCE_EXHAUSTED, and old rows still serve
  kNoSetUp = 2,      // the tables or the limit could not be set up
  kNeverFailed = 3,  // a billion keys fitted: the limit did not bite
  kOtherError = 4,   // a pull failed with another code
  kNotServing = 5,   // after the failure, rows created before could not be pulled
};

int PullUntilOutOfMemory() {
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
  if (!tables.ok()) return kNoSetUp;
  BarrierSet barriers;
  PsServiceImpl service(tables->get(), &barriers, [] {});

  const rlim_t limit = MappedBytes() + (rlim_t{384} << 20);
  const rlimit as{limit, limit};
  if (MappedBytes() == 0 || ::setrlimit(RLIMIT_AS, &as) != 0) return kNoSetUp;

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

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kUnderAddressSanitizer = true;
#else
constexpr bool kUnderAddressSanitizer = false;
#endif
#else
constexpr bool kUnderAddressSanitizer = false;
#endif

TEST(PsServiceMemoryTest, RunningOutOfMemoryFailsTheCallNotTheServer) {
  if (kUnderAddressSanitizer) {
    GTEST_SKIP() << "AddressSanitizer maps terabytes of shadow memory and aborts on a failed "
                    "allocation instead of throwing std::bad_alloc";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(PullUntilOutOfMemory()), testing::ExitedWithCode(kGuarded), "")
      << "exit codes: 2 no set-up, 3 the limit never bit, 4 another error, 5 not serving after";
}

}  // namespace
}  // namespace fleet::ps::detail
