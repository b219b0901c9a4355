#include "raw_call.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace fleet::ps {

absl::StatusOr<std::string> RawCall(const std::string& endpoint, const std::string& method,
                                    const std::string& request, absl::Duration timeout) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  grpc::GenericStub stub(
      grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer reply_buffer;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request_buffer, &reply_buffer,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat(method, " at ", endpoint, ": ", status.error_message()));
  }
  std::vector<grpc::Slice> slices;
  if (!reply_buffer.Dump(&slices).ok()) {
    return absl::InternalError(absl::StrCat(method, " at ", endpoint, ": unreadable reply"));
  }
  std::string reply;
  for (const auto& s : slices) reply.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return reply;
}

}  // namespace fleet::ps
