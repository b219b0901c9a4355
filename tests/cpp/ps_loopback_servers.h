#pragma once
// For the C++ tests that run a PS client against real servers on loopback: starts one server per
// config, in index order, and says their endpoints in the client options the test connects with.

#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "ps/client/client.h"
#include "ps/server/server.h"

namespace fleet::ps::testing_servers {

// Adds a dense table of `dim` floats in blocks of 1024, updated by SGD at `rate` from `start`.
inline void AddSgdDenseTable(proto::ServerConfig* config, uint32_t id, const char* name,
                             uint64_t dim, float rate, float start) {
  proto::TableConfig* table = config->add_tables();
  table->set_table_id(id);
  table->set_name(name);
  table->set_type(proto::DENSE);
  table->set_dim(dim);
  table->set_dense_block_size(1024);
  table->mutable_optimizer()->set_learning_rate(rate);
  table->mutable_optimizer()->mutable_sgd();
  table->mutable_initializer()->mutable_constant()->set_value(start);
}

// Adds a sparse table of rows of `dim` floats, zero at first, updated by SGD at `rate`.
inline void AddSgdSparseTable(proto::ServerConfig* config, uint32_t id, const char* name,
                              uint64_t dim, float rate) {
  proto::TableConfig* table = config->add_tables();
  table->set_table_id(id);
  table->set_name(name);
  table->set_type(proto::SPARSE);
  table->set_dim(dim);
  table->mutable_optimizer()->set_learning_rate(rate);
  table->mutable_optimizer()->mutable_sgd();
  table->mutable_initializer()->mutable_zero();
}

// Adds a table of `dim` floats (a row's, or the whole dense table's in blocks of 1024) updated by
// Adam at rate 0.01, every value 0.5 at first: the tables of the sync round tests.
inline void AddAdamTable(proto::ServerConfig* config, uint32_t id, proto::TableType type,
                         uint64_t dim) {
  proto::TableConfig* table = config->add_tables();
  table->set_table_id(id);
  table->set_name(type == proto::DENSE ? "dense" : "rows");
  table->set_type(type);
  table->set_dim(dim);
  if (type == proto::DENSE) table->set_dense_block_size(1024);
  table->mutable_optimizer()->set_learning_rate(0.01f);
  table->mutable_optimizer()->mutable_adam();
  table->mutable_initializer()->mutable_constant()->set_value(0.5f);
}

// Starts a server for each config; fails the calling test (ASSERT) if one does not start.
inline void StartServers(const std::vector<proto::ServerConfig>& configs,
                         std::vector<std::unique_ptr<PsServer>>* servers, ClientOptions* options) {
  for (const proto::ServerConfig& config : configs) {
    ServerOptions server_options;
    server_options.config = config;
    auto server = PsServer::Start(server_options);
    ASSERT_TRUE(server.ok()) << server.status();
    options->endpoints.push_back((*server)->endpoint());
    servers->push_back(std::move(*server));
  }
}

// The configs of `num_servers` servers sharing one SGD dense table (AddSgdDenseTable's).
inline std::vector<proto::ServerConfig> ServersOfOneSgdDenseTable(uint32_t num_servers, uint32_t id,
                                                                  const char* name, uint64_t dim,
                                                                  float rate, float start) {
  std::vector<proto::ServerConfig> configs(num_servers);
  for (uint32_t i = 0; i < num_servers; ++i) {
    configs[i].set_server_index(i);
    configs[i].set_num_servers(num_servers);
    AddSgdDenseTable(&configs[i], id, name, dim, rate, start);
  }
  return configs;
}

// The configs of `num_servers` servers sharing one SGD sparse table (AddSgdSparseTable's).
inline std::vector<proto::ServerConfig> ServersOfOneSgdSparseTable(uint32_t num_servers,
                                                                   uint32_t id, const char* name,
                                                                   uint64_t dim, float rate) {
  std::vector<proto::ServerConfig> configs(num_servers);
  for (uint32_t i = 0; i < num_servers; ++i) {
    configs[i].set_server_index(i);
    configs[i].set_num_servers(num_servers);
    AddSgdSparseTable(&configs[i], id, name, dim, rate);
  }
  return configs;
}

// StartServers, then one client connected to them; fails the calling test if either fails.
inline void StartServersAndConnect(const std::vector<proto::ServerConfig>& configs,
                                   std::vector<std::unique_ptr<PsServer>>* servers,
                                   std::unique_ptr<PsClient>* client) {
  ClientOptions options;
  StartServers(configs, servers, &options);
  if (::testing::Test::HasFatalFailure()) return;
  auto connected = PsClient::Connect(options);
  ASSERT_TRUE(connected.ok()) << connected.status();
  *client = std::move(*connected);
}

// Two jobs of the same servers, each with one client: `wire` on loopback TCP and `shm` through
// the shared segment (no Unix socket: these servers have none), with `max_keys` keys per request
// when nonzero. The pair the shared-memory tests compare bit for bit; fails the calling test if a
// server does not start or a client does not connect.
struct WireAndShmJobs {
  void Start(const std::vector<proto::ServerConfig>& configs, size_t max_keys = 0) {
    ClientOptions wire_options, shm_options;
    StartServers(configs, &wire_servers, &wire_options);
    StartServers(configs, &shm_servers, &shm_options);
    if (::testing::Test::HasFatalFailure()) return;
    if (max_keys > 0)
      wire_options.max_keys_per_request = shm_options.max_keys_per_request = max_keys;
    shm_options.local_host = "127.0.0.1";
    shm_options.local_shared_memory = true;
    shm_options.local_socket = false;
    auto wire_client = PsClient::Connect(wire_options);
    ASSERT_TRUE(wire_client.ok()) << wire_client.status();
    wire = std::move(*wire_client);
    auto shm_client = PsClient::Connect(shm_options);
    ASSERT_TRUE(shm_client.ok()) << shm_client.status();
    shm = std::move(*shm_client);
  }

  std::vector<std::unique_ptr<PsServer>> wire_servers, shm_servers;
  std::unique_ptr<PsClient> wire, shm;
};

// Two jobs of the same servers, each with a client per worker, for the tests that compare a
// two-call exchange (a push, then a pull) in one job with the one-call push-pull in the other,
// bit for bit: the clients share memory with their servers when `shared_memory` (no Unix socket:
// these servers have none), with `max_keys` keys per request when nonzero. Fails the calling test
// if a server does not start, or a client does not connect or does not get the transport asked for.
struct TwoCallAndOneCallJobs {
  void Start(const std::vector<proto::ServerConfig>& configs, int workers, bool shared_memory,
             size_t max_keys = 0) {
    ClientOptions two_call_options, one_call_options;
    StartServers(configs, &two_call_servers, &two_call_options);
    StartServers(configs, &one_call_servers, &one_call_options);
    if (::testing::Test::HasFatalFailure()) return;
    for (ClientOptions* options : {&two_call_options, &one_call_options}) {
      options->local_host = "127.0.0.1";
      options->local_shared_memory = shared_memory;
      options->local_socket = false;
      if (max_keys > 0) options->max_keys_per_request = max_keys;
    }
    for (int w = 0; w < workers; ++w) {
      for (auto [options, clients] :
           {std::pair{&two_call_options, &two_call}, std::pair{&one_call_options, &one_call}}) {
        auto client = PsClient::Connect(*options);
        ASSERT_TRUE(client.ok()) << client.status();
        for (size_t s = 0; s < configs.size(); ++s) {
          ASSERT_EQ((*client)->shared_memory(s), shared_memory) << "server " << s;
        }
        clients->push_back(std::move(*client));
      }
    }
  }

  std::vector<std::unique_ptr<PsServer>> two_call_servers, one_call_servers;
  std::vector<std::unique_ptr<PsClient>> two_call, one_call;  // a client per worker
};

}  // namespace fleet::ps::testing_servers
