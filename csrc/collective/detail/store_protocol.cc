#include "collective/detail/store_protocol.h"

#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace fleet::collective::detail {

Frame HandleStoreRequest(MemoryStore* data, const Frame& request) {
  const auto& parts = request.parts;
  try {
    switch (request.op) {
      case kStoreSet:
        FLEET_ENFORCE(parts.size() == 2, InvalidArgument, "SET takes a key and a value, got ",
                      parts.size(), " parts");
        data->Set(parts[0], parts[1]);
        return {kStoreOk, {}};
      case kStoreGet: {
        FLEET_ENFORCE(parts.size() == 1, InvalidArgument, "GET takes one key, got ", parts.size(),
                      " parts");
        auto value = data->TryGet(parts[0]);
        if (!value) return {kStoreNotFound, {}};
        return {kStoreOk, {*std::move(value)}};
      }
      case kStoreAdd:
        FLEET_ENFORCE(parts.size() == 2, InvalidArgument, "ADD takes a key and a delta, got ",
                      parts.size(), " parts");
        return {kStoreOk, {absl::StrCat(data->Add(parts[0], ParseCounter(parts[0], parts[1])))}};
      case kStoreCheck:
        return {kStoreOk, {data->Check(parts) ? "1" : "0"}};
      default:
        throw InvalidArgument(absl::StrCat("unknown request code ", int{request.op}));
    }
  } catch (const Error& e) {
    return {kStoreError, {e.what()}};
  }
  // Anything else (std::bad_alloc storing or copying a value) is a failure of the store, not of
  // the request: it goes to the server, which reports it with the client and closes that
  // connection (tcp_store.cc).
}

}  // namespace fleet::collective::detail
