#include "ps/detail/transport.h"

namespace fleet::ps::detail {
grpc::ChannelArguments WorkerChannelArguments() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Reconnect soon after a server comes (back) up rather than after gRPC's default backoff.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

std::shared_ptr<grpc::Channel> ConnectLocal(const std::string& address,
                                            const grpc::ChannelArguments& args,
                                            absl::Time deadline) {
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    // A Unix socket that nobody listens on fails at once (ECONNREFUSED): no retry is waited for.
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) return nullptr;
    if (!channel->WaitForStateChange(state, absl::ToChronoTime(deadline))) return nullptr;
    state = channel->GetState(/*try_to_connect=*/true);
  }
  return channel;
}

}  // namespace fleet::ps::detail
