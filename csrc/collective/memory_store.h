#pragma once
// MemoryStore: a Store inside one process, for ranks that are threads of the same process (tests,
// groups of one). Thread-safe.

#include <mutex>
#include <string>
#include <unordered_map>

#include "collective/store.h"

namespace fleet::collective {

class MemoryStore : public Store {
 public:
  void Set(const std::string& key, const std::string& value) override;
  std::optional<std::string> TryGet(const std::string& key) override;
  int64_t Add(const std::string& key, int64_t delta) override;
  bool Check(const std::vector<std::string>& keys) override;
  std::string Describe() const override { return "in-process store"; }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::string> values_;
};

}  // namespace fleet::collective
