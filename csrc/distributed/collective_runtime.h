#pragma once
// What makes a CollectiveGroup the group of an executor's runtime: the group as the resource the
// c_* ops reach, and the step hooks every collective pass needs (one trainer thread per rank, the
// ranks ending a dataset pass together: collective_group.h, even_steps.h). The Python facade's
// collective runtime calls these; they replace whatever collective group and hooks the resources
// held, so attaching twice leaves one set. Call between runs only (the resources are not locked).

#include <functional>
#include <memory>
#include <string>

#include "distributed/collective_group.h"
#include "framework/runtime.h"

namespace fleet::distributed {

// Sets `group` as the resources' collective group with its step hooks. `warn` receives the
// message of a pass that ended early on this rank (EvenStepsHook), from a trainer thread.
void AttachCollectiveGroup(framework::RuntimeResources& resources,
                           std::shared_ptr<CollectiveGroup> group,
                           std::function<void(std::string)> warn);

// Drops the collective group and every collective step hook (gradient merge included).
void DetachCollectiveGroup(framework::RuntimeResources& resources);

}  // namespace fleet::distributed
