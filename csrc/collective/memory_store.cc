#include "collective/memory_store.h"

#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace fleet::collective {

void MemoryStore::Set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[key] = value;
}

std::optional<std::string> MemoryStore::TryGet(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

int64_t MemoryStore::Add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(key);
  int64_t n = it == values_.end() ? 0 : ParseCounter(key, it->second);
  FLEET_ENFORCE(!__builtin_add_overflow(n, delta, &n), InvalidArgument, "store key '", key,
                "': adding ", delta, " overflows the counter");
  values_[key] = absl::StrCat(n);
  return n;
}

bool MemoryStore::Check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& key : keys) {
    if (values_.count(key) == 0) return false;
  }
  return true;
}

}  // namespace fleet::collective
