#pragma once
// For the C++ tests of the async communicator's dense parameters: one real server on loopback
// holding an SGD dense table, and an async communicator on it whose one dense variable "w" (in
// the given root scope, every element at the table's start) pushes each gradient on its own, as
// with Adam, and makes a step wait for the thread's own last gradient (max_dense_staleness 0).

#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "core/lod_tensor.h"
#include "core/scope.h"
#include "distributed/communicator.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"

namespace fleet::distributed::testing_async {

struct SgdDenseJob {
  uint32_t table_id = 0;
  uint64_t dim = 0;
  float rate = 0.0f;
  float start = 0.0f;
  // The client reaches the server through shared memory (the gradients go in shares), not the
  // wire.
  bool shared_memory = false;
};

// Starts the server and the communicator (into `servers` and `communicator`); fails the calling
// test (ASSERT) if either does not start.
inline void StartAsyncSgdDense(const SgdDenseJob& job, Scope* root,
                               std::vector<std::unique_ptr<ps::PsServer>>* servers,
                               std::shared_ptr<Communicator>* communicator) {
  ps::proto::ServerConfig server;
  server.set_server_index(0);
  server.set_num_servers(1);
  ps::testing_servers::AddSgdDenseTable(&server, job.table_id, "dense", job.dim, job.rate,
                                        job.start);
  ps::ClientOptions options;
  ps::testing_servers::StartServers({server}, servers, &options);
  if (::testing::Test::HasFatalFailure()) return;
  if (job.shared_memory) {
    options.local_host = "127.0.0.1";
    options.local_shared_memory = true;
    options.local_socket = false;
  }
  auto client = ps::PsClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  LoDTensor* w = root->Var("w")->GetMutable<LoDTensor>();
  w->Resize({static_cast<int64_t>(job.dim)});
  float* values = w->mutable_data<float>();
  for (uint64_t i = 0; i < job.dim; ++i) values[i] = job.start;

  CommunicatorConfig config;
  config.mode = PsMode::kAsync;
  config.dense_table_id = job.table_id;
  config.dense = {DenseVar{"w", "w@GRAD", 0, job.dim}};
  config.max_merge_var_num = 1;  // every gradient its own push, as with Adam
  config.send_wait_times = 0;
  config.max_dense_staleness = 0;
  config.step_timeout = absl::Seconds(60);
  *communicator = MakeCommunicator(config, std::move(*client), root);
  (*communicator)->Start();
}

}  // namespace fleet::distributed::testing_async
