#pragma once
// The rendezvous of a communicator that one rank creates an identity for (NCCL's ncclUniqueId):
// rank 0 makes the id and publishes it in the group's store, the other ranks wait for it there.
// Kept apart from the NCCL backend, and free of CUDA, so that the exchange and its errors are
// tested on machines without a GPU.

#include <functional>
#include <string>

#include "collective/store.h"

namespace fleet::collective {

// Rank 0: calls make_id() and publishes its bytes under `key`; every rank returns those bytes.
// Throws InvalidArgument when the id does not have `id_bytes` bytes (on rank 0, or as read by a
// peer: a store shared with another program), Timeout naming the key, the store and rank 0 when
// rank 0 did not publish within `timeout`. `where` names the group and this rank for messages.
std::string ExchangeUniqueId(Store* store, const std::string& key, int rank, size_t id_bytes,
                             const std::function<std::string()>& make_id, Duration timeout,
                             const std::string& where);

}  // namespace fleet::collective
