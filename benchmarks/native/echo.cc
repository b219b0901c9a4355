#include "echo.h"

#include <grpcpp/grpcpp.h>

#include <climits>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "echo.grpc.pb.h"

namespace fleet::bench {

class EchoServiceImpl final : public proto::EchoService::Service {
 public:
  grpc::Status Echo(grpc::ServerContext*, const proto::EchoRequest* request,
                    proto::EchoReply* reply) override {
    // The reply is built from the request bytes, as a pull builds rows from the table.
    // Copies the request bytes once, then doubles the filled prefix: a few large copies even
    // when a short request asks for a long reply.
    const std::string& in = request->payload();
    std::string* out = reply->mutable_payload();
    out->resize(request->reply_bytes());
    if (in.empty() || out->empty()) return grpc::Status::OK;
    size_t filled = std::min(in.size(), out->size());
    std::memcpy(out->data(), in.data(), filled);
    while (filled < out->size()) {
      const size_t n = std::min(filled, out->size() - filled);
      std::memcpy(out->data() + filled, out->data(), n);
      filled += n;
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

absl::StatusOr<std::unique_ptr<EchoClient>> EchoClient::Connect(
    const std::vector<std::string>& endpoints, absl::Duration timeout) {
  std::unique_ptr<EchoClient> client(new EchoClient());
  client->endpoints_ = endpoints;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  const absl::Time deadline = absl::Now() + timeout;
  for (const std::string& endpoint : endpoints) {
    auto stub = std::make_unique<Stub>();
    stub->channel = grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
    if (!stub->channel->WaitForConnected(absl::ToChronoTime(deadline))) {
      return absl::UnavailableError(absl::StrCat("cannot connect to echo server at ", endpoint));
    }
    stub->stub = proto::EchoService::NewStub(stub->channel);
    client->stubs_.push_back(std::move(stub));
  }
  return client;
}

absl::Status EchoClient::Echo(absl::Span<const char> request, absl::Span<char> reply,
                              absl::Duration timeout) {
  struct Piece {
    grpc::ClientContext context;
    proto::EchoRequest request;
    proto::EchoReply reply;
    grpc::Status status;
    absl::Notification done;
  };
  const size_t n = stubs_.size();
  std::vector<Piece> pieces(n);
  const auto deadline = absl::ToChronoTime(absl::Now() + timeout);
  for (size_t s = 0; s < n; ++s) {
    const size_t in_begin = request.size() * s / n, in_end = request.size() * (s + 1) / n;
    Piece& p = pieces[s];
    p.context.set_deadline(deadline);
    p.request.mutable_payload()->assign(request.data() + in_begin, in_end - in_begin);
    p.request.set_reply_bytes(reply.size() * (s + 1) / n - reply.size() * s / n);
    stubs_[s]->stub->async()->Echo(&p.context, &p.request, &p.reply, [&p](grpc::Status st) {
      p.status = std::move(st);
      p.done.Notify();
    });
  }
  absl::Status result;
  for (size_t s = 0; s < n; ++s) {
    Piece& p = pieces[s];
    p.done.WaitForNotification();
    const size_t out_begin = reply.size() * s / n;
    const size_t out_size = reply.size() * (s + 1) / n - out_begin;
    if (!p.status.ok()) {
      result.Update(
          absl::Status(static_cast<absl::StatusCode>(p.status.error_code()),
                       absl::StrCat("Echo at ", endpoints_[s], ": ", p.status.error_message())));
    } else if (p.reply.payload().size() != out_size) {
      result.Update(absl::InternalError(absl::StrCat("Echo at ", endpoints_[s], ": short reply")));
    } else {
      std::memcpy(reply.data() + out_begin, p.reply.payload().data(), out_size);
    }
  }
  return result;
}

}  // namespace fleet::bench
