#include "trainer/barrier_tasks.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

namespace fleet::trainer {

namespace {

// Union-find over op indices.
size_t Root(std::vector<size_t>& parent, size_t i) {
  while (parent[i] != i) {
    parent[i] = parent[parent[i]];
    i = parent[i];
  }
  return i;
}

template <typename Fn>
void ForEachName(const framework::PreparedProgram& program, Fn fn) {
  for (const auto& op : program.ops) {
    for (const auto* slots : {&op.spec.inputs, &op.spec.outputs}) {
      for (const auto& [slot, names] : *slots) {
        for (const auto& name : names) fn(name);
      }
    }
  }
}

}  // namespace

std::vector<std::unique_ptr<framework::PreparedProgram>> CutIntoIndependentGroups(
    const framework::PreparedProgram& update) {
  const auto& ops = update.ops;
  std::vector<size_t> parent(ops.size());
  std::iota(parent.begin(), parent.end(), size_t{0});
  auto join = [&](size_t a, size_t b) { parent[Root(parent, a)] = Root(parent, b); };
  // A variable some op writes ties together every op that reads or writes it; one that no op
  // writes (a learning rate, Adam's beta powers in this phase) may be read by any group.
  std::unordered_map<std::string, size_t> writer;  // a writing op of each written variable
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const auto& [slot, names] : ops[i].spec.outputs) {
      for (const auto& name : names) {
        auto [it, first] = writer.emplace(name, i);
        if (!first) join(i, it->second);
      }
    }
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const auto& [slot, names] : ops[i].spec.inputs) {
      for (const auto& name : names) {
        auto it = writer.find(name);
        if (it != writer.end()) join(i, it->second);
      }
    }
  }
  std::vector<std::unique_ptr<framework::PreparedProgram>> groups;
  std::unordered_map<size_t, size_t> group_of_root;
  for (size_t i = 0; i < ops.size(); ++i) {
    auto [it, first] = group_of_root.emplace(Root(parent, i), groups.size());
    if (first) groups.push_back(std::make_unique<framework::PreparedProgram>());
    groups[it->second]->ops.push_back(ops[i]);
  }
  return groups;
}

bool Touches(const framework::PreparedProgram& program, const std::string& name) {
  bool touched = false;
  ForEachName(program, [&](const std::string& n) { touched = touched || n == name; });
  return touched;
}

std::unordered_map<std::string, size_t> SegmentsThroughLastAccess(
    const std::vector<std::unique_ptr<framework::PreparedProgram>>& segments) {
  std::unordered_map<std::string, size_t> through;
  for (size_t k = 0; k < segments.size(); ++k) {
    ForEachName(*segments[k], [&](const std::string& name) { through[name] = k + 1; });
  }
  return through;
}

size_t SegmentsBeforeGroup(const framework::PreparedProgram& group,
                           const std::unordered_map<std::string, size_t>& through) {
  size_t need = 0;
  ForEachName(group, [&](const std::string& name) {
    auto at = through.find(name);
    if (at != through.end()) need = std::max(need, at->second);
  });
  return need;
}

}  // namespace fleet::trainer
