#include "trainer/compute_segments.h"

#include <algorithm>
#include <unordered_map>

namespace fleet::trainer {

ComputeSegments CutAfterLastAccess(const framework::PreparedProgram& compute,
                                   const std::vector<std::string>& gradients) {
  const auto& ops = compute.ops;
  ComputeSegments out;
  if (ops.empty()) {
    out.segments.push_back(std::make_unique<framework::PreparedProgram>());
    out.final_after.assign(gradients.size(), 0);
    return out;
  }
  std::unordered_map<std::string, size_t> last_access;  // op index + 1; absent: never touched
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const auto* slots : {&ops[i].spec.inputs, &ops[i].spec.outputs}) {
      for (const auto& [slot, names] : *slots) {
        for (const auto& name : names) last_access[name] = i + 1;
      }
    }
  }
  auto end_of = [&](const std::string& gradient) {
    auto it = last_access.find(gradient);
    return it == last_access.end() ? ops.size() : it->second;
  };
  // Segment k is ops [ends[k-1], ends[k]): the ends are unique, ascending and at least 1, so
  // no segment is empty; the program's end is the last.
  std::vector<size_t> ends{ops.size()};
  for (const auto& g : gradients) ends.push_back(end_of(g));
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  size_t begin = 0;
  for (size_t end : ends) {
    auto segment = std::make_unique<framework::PreparedProgram>();
    segment->ops.assign(ops.begin() + static_cast<std::ptrdiff_t>(begin),
                        ops.begin() + static_cast<std::ptrdiff_t>(end));
    out.segments.push_back(std::move(segment));
    begin = end;
  }
  for (const auto& g : gradients) {
    auto at = std::lower_bound(ends.begin(), ends.end(), end_of(g));
    out.final_after.push_back(static_cast<size_t>(at - ends.begin()));
  }
  return out;
}

}  // namespace fleet::trainer
