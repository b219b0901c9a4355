// The local transport of the parameter server: a server also listens on a Unix-domain socket
// named after its endpoint, and a client on the server's host (ClientOptions.local_host) calls
// it there, with the same checks and replies as over TCP; a client on another host, or facing a
// server without the socket, calls over TCP. Real servers on loopback addresses.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/client/client.h"
#include "ps/detail/endpoint.h"
#include "ps/server/server.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kTable = 3;
constexpr uint64_t kDim = 8;
// 64k rows of 8 floats: 2 MB a pull reply, several times a Unix socket's buffer, so a message
// crosses in many writes as the dense tables' do.
constexpr int64_t kKeys = 65536;
constexpr float kRate = 0.25f;

// A port nobody listens on at `host` right now (the kernel's pick for a bound socket); 0 when
// the address cannot be bound.
int FreePort(const char* host) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = 0;
  int port = 0;
  socklen_t size = sizeof(address);
  if (inet_pton(AF_INET, host, &address.sin_addr) == 1 &&
      bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

ServerOptions OptionsOf(bool local_transport, const std::string& job_id = "") {
  ServerOptions options;
  options.config.set_server_index(0);
  options.config.set_num_servers(1);
  proto::TableConfig* table = options.config.add_tables();
  table->set_table_id(kTable);
  table->set_name("rows");
  table->set_type(proto::SPARSE);
  table->set_dim(kDim);
  table->mutable_optimizer()->set_learning_rate(kRate);
  table->mutable_optimizer()->mutable_sgd();
  table->mutable_initializer()->mutable_zero();
  options.local_transport = local_transport;
  options.job_id = job_id;
  return options;
}

// Starts a server on a free port of `host` (another process may take a picked port before the
// server binds it: a few picks are tried).
std::unique_ptr<PsServer> StartOn(const char* host, ServerOptions options) {
  absl::Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int port = FreePort(host);
    if (port == 0) continue;
    options.address = absl::StrCat(host, ":", port);
    auto server = PsServer::Start(options);
    if (server.ok()) return std::move(*server);
    last = server.status();
  }
  ADD_FAILURE() << "no server started on " << host << ": " << last;
  return nullptr;
}

ClientOptions ClientOf(const PsServer& server, const std::string& local_host,
                       const std::string& job_id = "") {
  ClientOptions options;
  options.endpoints = {server.endpoint()};
  options.local_host = local_host;
  options.job_id = job_id;
  options.connect_timeout = absl::Seconds(20);
  return options;
}

// An SGD push of every row from zero and a pull of them through `client`: the values the
// server computed come back.
void ExpectPushAndPullWork(PsClient* client) {
  std::vector<int64_t> keys(kKeys);
  std::vector<float> grads(kKeys * kDim);
  for (int64_t k = 0; k < kKeys; ++k) {
    keys[k] = k * 7919;
    for (uint64_t j = 0; j < kDim; ++j) grads[k * kDim + j] = static_cast<float>((k + j) % 11);
  }
  ASSERT_TRUE(client->PushSparse(kTable, keys, grads).Wait().ok());
  std::vector<float> pulled(kKeys * kDim, 1.0f);
  ASSERT_TRUE(client->PullSparse(kTable, keys, absl::MakeSpan(pulled)).Wait().ok());
  for (size_t i = 0; i < pulled.size(); ++i) {
    ASSERT_FLOAT_EQ(pulled[i], -kRate * grads[i]) << "float " << i;
  }
}

TEST(LocalTransportAddress, IsNamedAfterTheEndpointAndAbsentWhereNoClientCouldDeriveIt) {
  EXPECT_EQ(detail::LocalTransportAddress("127.0.0.1:6170"),
            "unix-abstract:fleet-ps/127.0.0.1:6170");
  EXPECT_EQ(detail::LocalTransportAddress("dns:///node-3:6170"),
            "unix-abstract:fleet-ps/node-3:6170");
  EXPECT_EQ(detail::LocalTransportAddress("[::1]:6170"), "unix-abstract:fleet-ps/[::1]:6170");
  EXPECT_EQ(detail::LocalTransportAddress("127.0.0.1:0"), "");
  EXPECT_EQ(detail::LocalTransportAddress("unix:/tmp/ps.sock"), "");
  EXPECT_EQ(detail::LocalTransportAddress(std::string(120, 'h') + ":6170"), "");
  EXPECT_EQ(detail::EndpointHost("ipv4:127.0.0.2:6170"), "127.0.0.2");
  EXPECT_EQ(detail::EndpointHost("[::1]:6170"), "[::1]");
  EXPECT_EQ(detail::EndpointHost("unix:/tmp/ps.sock"), "");
}

TEST(LocalTransport, AClientOnTheServersHostCallsItOverItsUnixSocket) {
  auto server = StartOn("127.0.0.1", OptionsOf(/*local_transport=*/true));
  ASSERT_NE(server, nullptr);
  const std::string local = detail::LocalTransportAddress(server->endpoint());
  ASSERT_EQ(server->local_endpoint(), local);
  EXPECT_NE(server->Describe().find(local), std::string::npos) << server->Describe();
  auto client = PsClient::Connect(ClientOf(*server, "127.0.0.1"));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->target(0), local);
  ExpectPushAndPullWork(client->get());
}

TEST(LocalTransport, RefusesAClientOfAnotherJobAsTcpDoes) {
  auto server = StartOn("127.0.0.1", OptionsOf(/*local_transport=*/true, "job-a"));
  ASSERT_NE(server, nullptr);
  for (const std::string local_host : {"127.0.0.1", ""}) {
    auto client = PsClient::Connect(ClientOf(*server, local_host, "job-b"));
    ASSERT_FALSE(client.ok()) << "local_host '" << local_host << "'";
    EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition) << client.status();
    EXPECT_NE(client.status().message().find("job-a"), std::string::npos) << client.status();
    EXPECT_NE(client.status().message().find("job-b"), std::string::npos) << client.status();
  }
}

TEST(LocalTransport, FallsBackToTcpWithANoticeWhenTheServerHasNoSocket) {
  auto server = StartOn("127.0.0.1", OptionsOf(/*local_transport=*/false));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->local_endpoint(), "");
  testing::internal::CaptureStderr();
  auto client = PsClient::Connect(ClientOf(*server, "127.0.0.1"));
  const std::string notice = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->target(0), server->endpoint());
  EXPECT_NE(notice.find(absl::StrCat("at ", server->endpoint(), " is on this host")),
            std::string::npos)
      << notice;
  EXPECT_NE(notice.find("over TCP"), std::string::npos) << notice;
  ExpectPushAndPullWork(client->get());
}

TEST(LocalTransport, AClientOnAnotherHostCallsOverTcp) {
  // The server's host is 127.0.0.2; its socket exists, but a client whose own address is
  // 127.0.0.1 is on another "host" as the job lists them, and must stay on TCP.
  auto server = StartOn("127.0.0.2", OptionsOf(/*local_transport=*/true));
  ASSERT_NE(server, nullptr);
  ASSERT_FALSE(server->local_endpoint().empty());
  testing::internal::CaptureStderr();
  auto remote = PsClient::Connect(ClientOf(*server, "127.0.0.1"));
  const std::string output = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ((*remote)->target(0), server->endpoint());
  EXPECT_EQ(output.find("local transport"), std::string::npos) << output;
  ExpectPushAndPullWork(remote->get());
  auto local = PsClient::Connect(ClientOf(*server, "127.0.0.2"));
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ((*local)->target(0), server->local_endpoint());
}

TEST(LocalTransport, AServerOnPortZeroHasNoSocket) {
  ServerOptions options = OptionsOf(/*local_transport=*/true);
  options.address = "127.0.0.1:0";
  auto server = PsServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->local_endpoint(), "");
  auto client = PsClient::Connect(ClientOf(**server, "127.0.0.1"));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->target(0), (*server)->endpoint());
}

}  // namespace
}  // namespace fleet::ps
