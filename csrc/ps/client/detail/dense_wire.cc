#include "ps/client/detail/dense_wire.h"

#include "absl/strings/str_cat.h"
#include "fleet/ps/ps.grpc.pb.h"

namespace fleet::ps::detail {

std::string PsMethod(const char* method) {
  return absl::StrCat("/", proto::PsService::service_full_name(), "/", method);
}

}  // namespace fleet::ps::detail
