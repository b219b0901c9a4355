// client.h is the client's whole public surface and holds no gRPC (issue 23): this file includes
// it first and alone, and fails to compile if a gRPC header came with it.
#include "ps/client/client.h"

#if defined(GRPCPP_SUPPORT_STATUS_H) || defined(GRPCPP_GRPCPP_H) || defined(GRPC_GRPC_H)
#error "ps/client/client.h includes gRPC headers; keep them in ps/client/detail/"
#endif

#include <gtest/gtest.h>

namespace fleet::ps {
namespace {

// Options are checked before any channel exists, so a caller sees the endpoint at fault.
TEST(PsClientHeaderTest, AMalformedEndpointIsRefusedNamingIt) {
  ClientOptions options;
  options.endpoints = {"127.0.0.1:1", "no-port-here"};
  auto client = PsClient::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(client.status().message().find("endpoint of server 1"), std::string::npos)
      << client.status();
  EXPECT_NE(client.status().message().find("no-port-here"), std::string::npos) << client.status();
}

}  // namespace
}  // namespace fleet::ps
