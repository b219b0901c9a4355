#pragma once
// What a PsClient::DenseShares holds (client.h): one slot of each server's shared segment, shared
// by client.cc's push, which sends from them, and client_dense_shares.cc, which fills them.

#include <memory>
#include <vector>

#include "ps/client/client.h"
#include "ps/client/detail/shm_slots.h"

namespace fleet::ps {

struct PsClient::DenseShares::Slots {
  std::vector<std::shared_ptr<detail::ShmSlots::Lease>> leases;  // per server; null: no block
  bool pushed = false;  // the leases went with a push, which releases them on its replies
};

}  // namespace fleet::ps
