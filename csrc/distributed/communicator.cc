#include "distributed/communicator.h"

#include "distributed/detail/async_communicator.h"
#include "distributed/detail/geo_communicator.h"
#include "distributed/detail/step_merge_communicator.h"

namespace fleet::distributed {

const char* PsModeName(PsMode mode) {
  switch (mode) {
    case PsMode::kSync:
      return "sync";
    case PsMode::kHalfAsync:
      return "half_async";
    case PsMode::kAsync:
      return "async";
    case PsMode::kGeo:
      return "geo";
  }
  return "unknown";
}

std::shared_ptr<Communicator> MakeCommunicator(CommunicatorConfig config,
                                               std::shared_ptr<ps::PsClient> client, Scope* root) {
  switch (config.mode) {
    case PsMode::kSync:
    case PsMode::kHalfAsync:
      return std::make_shared<detail::StepMergeCommunicator>(std::move(config), std::move(client),
                                                             root);
    case PsMode::kAsync:
      return std::make_shared<detail::AsyncCommunicator>(std::move(config), std::move(client),
                                                         root);
    case PsMode::kGeo:
      return std::make_shared<detail::GeoCommunicator>(std::move(config), std::move(client), root);
  }
  throw InvalidArgument("unknown parameter-server mode");
}

namespace {

// GEO's next-batch row prefetch, or null (another mode, or prefetch_sparse off).
const detail::GeoRowPrefetch* GeoPrefetch(const Communicator& communicator) {
  const auto* geo = dynamic_cast<const detail::GeoCommunicator*>(&communicator);
  return geo == nullptr ? nullptr : geo->row_prefetch();
}

}  // namespace

int64_t PrefetchedPulls(const Communicator& communicator) {
  if (const auto* geo = GeoPrefetch(communicator)) return geo->served();
  const auto* async = dynamic_cast<const detail::AsyncCommunicator*>(&communicator);
  return async == nullptr ? 0 : async->prefetched_pulls();
}

TrainerWaits AsyncTrainerWaits(const Communicator& communicator) {
  if (const auto* geo = GeoPrefetch(communicator)) {
    TrainerWaits waits;
    waits.sparse_prefetch = geo->waited();
    waits.sparse_pull = geo->pulled_at_step();
    return waits;
  }
  const auto* async = dynamic_cast<const detail::AsyncCommunicator*>(&communicator);
  return async == nullptr ? TrainerWaits{} : async->trainer_waits();
}

}  // namespace fleet::distributed
