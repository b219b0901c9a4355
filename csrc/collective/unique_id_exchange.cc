#include "collective/unique_id_exchange.h"

#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace fleet::collective {

std::string ExchangeUniqueId(Store* store, const std::string& key, int rank, size_t id_bytes,
                             const std::function<std::string()>& make_id, Duration timeout,
                             const std::string& where) {
  FLEET_ENFORCE(store != nullptr, InvalidArgument, where, ": no store to exchange the id through");
  std::string id;
  if (rank == 0) {
    id = make_id();
    FLEET_ENFORCE(id.size() == id_bytes, InvalidArgument, where, ": made an id of ", id.size(),
                  " bytes, expected ", id_bytes);
    store->Set(key, id);
    return id;
  }
  try {
    id = store->Get(key, timeout);
  } catch (const Timeout& e) {
    throw Timeout(absl::StrCat(where, ": rank 0 did not publish the communicator id '", key,
                               "' in ", store->Describe(), " within ", timeout.count(),
                               " ms (is rank 0 running, and on a GPU?): ", e.what()));
  }
  FLEET_ENFORCE(id.size() == id_bytes, InvalidArgument, where, ": the id under '", key, "' in ",
                store->Describe(), " has ", id.size(), " bytes, expected ", id_bytes,
                " (is another program using this store?)");
  return id;
}

}  // namespace fleet::collective
