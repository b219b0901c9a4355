#pragma once
// FileStore: a Store kept as files in a directory that every rank can read and write (a shared
// filesystem across machines, or a local directory for one machine). Chosen with
// FLEET_GLOO_STORE_PATH. One file per key, written to a temporary name and renamed into place so a
// reader never sees half a value; Add serialises writers with flock(2) on a per-key lock file.
//
// Use a fresh directory per job: keys left by an earlier job would satisfy this job's waits.

#include <string>

#include "collective/store.h"

namespace fleet::collective {

class FileStore : public Store {
 public:
  // Creates `dir` (and its parents) when missing; throws Unavailable naming it when it cannot.
  explicit FileStore(std::string dir);

  void Set(const std::string& key, const std::string& value) override;
  std::optional<std::string> TryGet(const std::string& key) override;
  int64_t Add(const std::string& key, int64_t delta) override;
  bool Check(const std::vector<std::string>& keys) override;
  std::string Describe() const override;

 private:
  // The file holding `key`: the key hex-encoded, so any bytes are a valid key.
  std::string PathOf(const std::string& key) const;
  void WriteAtomically(const std::string& path, const std::string& value);

  std::string dir_;
};

}  // namespace fleet::collective
