#pragma once
// The work of an overlapped data-parallel step after the barrier that ends the compute program,
// as tasks that any replica may run (work sharing at the join).
//
// After that barrier each replica reduces the gradients it still owns and runs its part of the
// first update phase. How much of that is left differs from replica to replica and from step
// to step (how far a replica got with its reductions before the barrier, a replica preempted
// there), and the step's join waits for the slowest. A replica's part is cut here into tasks:
// groups of its update ops that share no written variable with another group, each tied to the
// reduction of the gradient it reads. A replica runs its own tasks in order and then takes the
// ones another replica has not started yet. The tasks run the same reductions and the same ops
// on the same variables, only on another thread, so the parameters are bit for bit the same.

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "framework/executor.h"

namespace fleet::trainer {

// `update` cut into groups of its ops such that no op of a group writes a variable that an op
// of another group reads or writes: the groups may run in any order, or at once, with the
// results of running `update` whole. Each group keeps its ops in program order; groups are
// ordered by their first op. Like compute segments, the groups declare no variables: bind each
// one after the whole program is bound to the same scope. A program of no ops has no groups.
std::vector<std::unique_ptr<framework::PreparedProgram>> CutIntoIndependentGroups(
    const framework::PreparedProgram& update);

// Whether an op of `program` reads or writes `name`.
bool Touches(const framework::PreparedProgram& program, const std::string& name);

// Per variable an op of `segments` (a compute program cut in order) reads or writes: how many
// segments have run once the last op touching it has.
std::unordered_map<std::string, size_t> SegmentsThroughLastAccess(
    const std::vector<std::unique_ptr<framework::PreparedProgram>>& segments);

// How many of those segments every replica must have run before `group` may run (before the
// barrier that ends the compute program): the most of `through` over the variables the group
// reads or writes, 0 when the compute program touches none of them.
size_t SegmentsBeforeGroup(const framework::PreparedProgram& group,
                           const std::unordered_map<std::string, size_t>& through);

}  // namespace fleet::trainer
