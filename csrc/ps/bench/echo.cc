#include "ps/bench/echo.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "fleet/ps/ps.grpc.pb.h"

namespace fleet::ps::bench {

class EchoServiceImpl final : public proto::EchoService::Service {
 public:
  grpc::Status Echo(grpc::ServerContext*, const proto::EchoRequest* request,
                    proto::EchoReply* reply) override {
    // The reply is built from the request bytes, as a pull builds rows from the table.
    const std::string& in = request->payload();
    std::string* out = reply->mutable_payload();
    out->resize(request->reply_bytes());
    for (size_t at = 0; !in.empty() && at < out->size(); at += in.size()) {
      std::memcpy(out->data() + at, in.data(), std::min(in.size(), out->size() - at));
    }
    return grpc::Status::OK;
  }
};

absl::StatusOr<std::unique_ptr<EchoServer>> EchoServer::Start(const std::string& address) {
  std::unique_ptr<EchoServer> server(new EchoServer());
  server->service_ = std::make_unique<EchoServiceImpl>();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(INT_MAX);
  builder.SetMaxSendMessageSize(INT_MAX);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("echo server cannot listen on ", address));
  }
  server->endpoint_ = absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
  return server;
}

EchoServer::~EchoServer() { Shutdown(absl::Seconds(5)); }

void EchoServer::RequestStop() {
  absl::MutexLock lock(&mu_);
  stop_requested_ = true;
}

bool EchoServer::WaitForStopRequest(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&stop_requested_), timeout);
}

void EchoServer::Shutdown(absl::Duration grace) {
  if (server_ == nullptr) return;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  server_.reset();
}

struct EchoClient::Stub {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<proto::EchoService::Stub> stub;
};

EchoClient::~EchoClient() = default;

absl::StatusOr<std::unique_ptr<EchoClient>> EchoClient::Connect(const std::string& endpoint,
                                                                absl::Duration timeout) {
  std::unique_ptr<EchoClient> client(new EchoClient());
  client->endpoint_ = endpoint;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  client->stub_ = std::make_unique<Stub>();
  client->stub_->channel =
      grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
  if (!client->stub_->channel->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    return absl::UnavailableError(absl::StrCat("cannot connect to echo server at ", endpoint));
  }
  client->stub_->stub = proto::EchoService::NewStub(client->stub_->channel);
  return client;
}

absl::Status EchoClient::Echo(absl::Span<const char> request, absl::Span<char> reply,
                              absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  proto::EchoRequest message;
  message.mutable_payload()->assign(request.data(), request.size());
  message.set_reply_bytes(reply.size());
  proto::EchoReply answer;
  grpc::Status status;
  absl::Notification done;
  stub_->stub->async()->Echo(&context, &message, &answer, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("Echo at ", endpoint_, ": ", status.error_message()));
  }
  if (answer.payload().size() != reply.size()) {
    return absl::InternalError(absl::StrCat("Echo at ", endpoint_, ": short reply"));
  }
  std::memcpy(reply.data(), answer.payload().data(), reply.size());
  return absl::OkStatus();
}

double MemcpySeconds(size_t bytes, int iterations) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    if (bytes > 0) src[0] = static_cast<char>(i);  // each copy moves different bytes
    std::memcpy(dst.data(), src.data(), bytes);
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  // Read the destination so the copies cannot be optimised away.
  volatile char sink = bytes ? dst[bytes - 1] : 0;
  (void)sink;
  return elapsed.count() / (iterations > 0 ? iterations : 1);
}

}  // namespace fleet::ps::bench
