#pragma once
// Adapts a Fleet Store to gloo::rendezvous::Store, so Gloo's connectFullMesh exchanges its pair
// addresses through Fleet's store. Keys are prefixed (one store can serve several groups), and
// Gloo's untimed get/wait use the group's rendezvous timeout instead of blocking forever.

#include <string>
#include <vector>

#include "collective/store.h"
#include "gloo/rendezvous/store.h"

namespace fleet::collective::detail {

class GlooStore : public gloo::rendezvous::Store {
 public:
  // `store` must outlive this adapter.
  GlooStore(collective::Store* store, std::string prefix, Duration timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->Set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::string value = store_->Get(prefix_ + key, timeout_);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> prefixed;
    for (const auto& key : keys) prefixed.push_back(prefix_ + key);
    store_->Wait(prefixed, timeout);
  }

 private:
  collective::Store* store_;
  std::string prefix_;
  Duration timeout_;
};

}  // namespace fleet::collective::detail
