// libFuzzer target: random and mutated serialized requests fed to every PsService handler in
// process (no network), on a server with a sparse table (Adagrad, count filter) and a dense
// table (Adam). The first input byte picks the method; the rest is the request as bytes.
// Paths in Save, Load and CommitSave requests are pinned to a scratch directory (the fuzzer must
// not write elsewhere) and barrier timeouts to a millisecond. A handler may return any error in
// its reply; what must not happen is a crash, a sanitizer report, a hang or unbounded memory.
// Seeds: tests/fuzz/corpus/ps_service (tests/fuzz/ps_make_seeds.py writes them).

#include <google/protobuf/stubs/logging.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "ps/server/detail/barrier.h"
#include "ps/server/detail/service.h"
#include "ps/server/detail/table_set.h"

namespace {

using namespace fleet::ps;  // NOLINT: a test harness

struct Server {
  std::unique_ptr<detail::TableSet> tables;
  std::unique_ptr<detail::BarrierSet> barriers;
  std::unique_ptr<detail::PsServiceImpl> service;
};

std::string* scratch = nullptr;
Server* server = nullptr;
uint64_t runs = 0;

proto::ServerConfig Config() {
  proto::ServerConfig config;
  config.set_num_servers(1);
  proto::TableConfig* sparse = config.add_tables();
  sparse->set_table_id(1);
  sparse->set_type(proto::SPARSE);
  sparse->set_dim(4);
  sparse->set_num_shards(2);
  sparse->mutable_optimizer()->set_learning_rate(0.1f);
  sparse->mutable_optimizer()->mutable_adagrad();
  sparse->mutable_count_filter()->set_min_count(2);
  proto::TableConfig* dense = config.add_tables();
  dense->set_table_id(2);
  dense->set_type(proto::DENSE);
  dense->set_dim(100);
  dense->set_dense_block_size(16);
  dense->mutable_optimizer()->set_learning_rate(0.1f);
  dense->mutable_optimizer()->mutable_adam();
  dense->mutable_overflow()->set_action(proto::OverflowConfig::CLIP);
  return config;
}

// A fresh server (and scratch directory) now and then, so that rows and files stay bounded.
void Reset() {
  delete server;
  std::filesystem::remove_all(*scratch);
  std::filesystem::create_directories(*scratch);
  server = new Server;
  server->tables = *detail::TableSet::Create(Config(), Sharding());
  server->barriers = std::make_unique<detail::BarrierSet>();
  server->service =
      std::make_unique<detail::PsServiceImpl>(server->tables.get(), server->barriers.get(), [] {});
}

template <class Request, class Reply, class Handler>
void Run(const uint8_t* data, size_t size, Handler handler) {
  Request request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  if constexpr (std::is_same_v<Request, proto::SaveRequest> ||
                std::is_same_v<Request, proto::LoadRequest> ||
                std::is_same_v<Request, proto::CommitSaveRequest>) {
    if (!request.dirname().empty()) request.set_dirname(*scratch);
  }
  if constexpr (std::is_same_v<Request, proto::BarrierRequest>) {
    request.set_timeout_ms(request.timeout_ms() % 2);
  }
  Reply reply;
  (server->service.get()->*handler)(nullptr, &request, &reply);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char dir[] = "/tmp/ps_service_fuzz.XXXXXX";
  if (mkdtemp(dir) == nullptr) std::abort();
  // Mutated strings that are not UTF-8 fail to parse, as they should; do not log each one.
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  scratch = new std::string(dir);
  std::atexit([] { std::filesystem::remove_all(*scratch); });
  Reset();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (++runs % 5000 == 0) Reset();
  using S = detail::PsServiceImpl;
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 12) {
    case 0:
      Run<proto::PullSparseRequest, proto::PullSparseReply>(body, n, &S::PullSparse);
      break;
    case 1:
      Run<proto::PushSparseRequest, proto::PushReply>(body, n, &S::PushSparse);
      break;
    case 2:
      Run<proto::PullDenseRequest, proto::PullDenseReply>(body, n, &S::PullDense);
      break;
    case 3:
      Run<proto::PushDenseRequest, proto::PushReply>(body, n, &S::PushDense);
      break;
    case 4:
      Run<proto::BarrierRequest, proto::BarrierReply>(body, n, &S::Barrier);
      break;
    case 5:
      Run<proto::SaveRequest, proto::SaveLoadReply>(body, n, &S::Save);
      break;
    case 6:
      Run<proto::LoadRequest, proto::SaveLoadReply>(body, n, &S::Load);
      break;
    case 7:
      Run<proto::ShrinkRequest, proto::ShrinkReply>(body, n, &S::Shrink);
      break;
    case 8:
      Run<proto::StatsRequest, proto::StatsReply>(body, n, &S::Stats);
      break;
    case 9:
      Run<proto::HeartbeatRequest, proto::HeartbeatReply>(body, n, &S::Heartbeat);
      break;
    case 10:
      Run<proto::CommitSaveRequest, proto::CommitSaveReply>(body, n, &S::CommitSave);
      break;
    default:
      Run<proto::StopRequest, proto::StopReply>(body, n, &S::Stop);
      break;
  }
  return 0;
}
