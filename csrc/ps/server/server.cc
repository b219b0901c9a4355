#include "ps/server/server.h"

#include <grpcpp/grpcpp.h>

#include <climits>
#include <cstdio>
#include <random>

#include "absl/strings/str_cat.h"
#include "ps/detail/endpoint.h"
#include "ps/server/detail/barrier.h"
#include "ps/server/detail/round_pool.h"
#include "ps/server/detail/service.h"
#include "ps/server/detail/table_set.h"

namespace fleet::ps {
namespace {

// 64 random bits and the start time: two starts of a server never share one.
std::string NewIncarnation() {
  std::random_device random;
  const uint64_t bits = (uint64_t{random()} << 32) ^ random();
  return absl::StrCat(absl::Hex(bits, absl::kZeroPad16), "-", absl::ToUnixMillis(absl::Now()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Start(const ServerOptions& options) {
  if (auto s = detail::CheckEndpoint(options.address, true, "parameter server address"); !s.ok()) {
    return s;
  }
  if (options.max_threads < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter server: max_threads must be at least 2, got ", options.max_threads));
  }
  if (options.stop_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("parameter server: stop_grace is negative");
  }
  std::unique_ptr<PsServer> server(new PsServer());
  auto tables = detail::TableSet::Create(options.config, options.sharding);
  if (!tables.ok()) return tables.status();
  server->tables_ = std::move(*tables);
  if (!options.load_dirname.empty()) {
    auto loaded = server->tables_->Load(options.load_dirname, /*all=*/true, 0);
    if (!loaded.ok()) return loaded.status();
  }
  const detail::BarrierSet::Log to_stderr = [](const std::string& line) {
    std::fprintf(stderr, "parameter server: %s\n", line.c_str());
  };
  server->barriers_ = std::make_unique<detail::BarrierSet>(options.log ? options.log : to_stderr,
                                                           options.worker_restarts);
  server->incarnation_ = NewIncarnation();
  PsServer* self = server.get();
  server->service_ = std::make_unique<detail::PsServiceImpl>(
      server->tables_.get(), server->barriers_.get(), [self] { self->RequestStop(); },
      options.job_id, server->incarnation_, options.load_dirname,
      detail::RoundPool::ThreadsFor(options.round_threads));

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &port);
  // A worker on this host reaches the server over a Unix-domain socket when it can (see
  // ClientOptions.local_host for why); gRPC reports a bound Unix socket as port 1.
  const std::string local_address =
      options.local_transport ? detail::LocalTransportAddress(options.address) : "";
  int local_port = 0;
  if (!local_address.empty()) {
    builder.AddListeningPort(local_address, grpc::InsecureServerCredentials(), &local_port);
  }
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(INT_MAX);
  builder.SetMaxSendMessageSize(INT_MAX);
  // Refuse to share a port with another process (gRPC sets SO_REUSEPORT by default on Linux).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  grpc::ResourceQuota quota("fleet-ps-server");
  quota.SetMaxThreads(options.max_threads);
  builder.SetResourceQuota(quota);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0 || (!local_address.empty() && local_port == 0)) {
    return absl::UnavailableError(absl::StrCat(
        "parameter server cannot listen on ", options.address,
        local_address.empty() ? "" : absl::StrCat(" and its local transport ", local_address)));
  }
  server->local_endpoint_ = local_address;
  const std::string& address = options.address;
  server->endpoint_ = absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
  server->stopper_ = std::thread([self, grace = options.stop_grace] {
    self->WaitForStopRequest(absl::InfiniteDuration());
    self->Shutdown(grace);
  });
  return server;
}

PsServer::~PsServer() {
  Shutdown(absl::Seconds(5));
  if (stopper_.joinable()) stopper_.join();
}

const proto::ServerConfig& PsServer::config() const { return tables_->config(); }

std::vector<proto::TableStats> PsServer::TableStats() const { return tables_->Stats(); }

const RpcMeter& PsServer::rpc_meter() const { return service_->meter(); }

std::string PsServer::Describe() const {
  const auto& config = tables_->config();
  return absl::StrCat("parameter server ", config.server_index(), " of ", config.num_servers(),
                      " listening on ", endpoint_,
                      local_endpoint_.empty() ? "" : absl::StrCat(" and ", local_endpoint_), "\n",
                      tables_->Describe());
}

void PsServer::RequestStop() {
  absl::MutexLock lock(&mu_);
  stop_requested_ = true;
}

bool PsServer::WaitForStopRequest(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&stop_requested_), timeout);
}

void PsServer::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    stop_requested_ = true;
    if (shutting_down_) {
      mu_.Await(absl::Condition(&shut_down_));
      return;
    }
    shutting_down_ = true;
  }
  if (barriers_) barriers_->Close();
  if (server_) {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server_->Wait();
  }
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
}

}  // namespace fleet::ps
