#pragma once
// Store: the key-value rendezvous through which the ranks of a group find each other.
//
// A store holds byte strings under string keys. Keys are written once per rendezvous (Set
// replaces, but callers use fresh keys) and read by peers that may start later, so reads block
// until the key appears or a deadline passes. Implementations: MemoryStore (ranks as threads of
// one process, for tests and groups of one), TcpStore (a small server run by one rank, see
// tcp_store.h) and FileStore (a directory on a shared filesystem, see file_store.h).
//
// Every method is thread-safe. Only Get and Wait block; they throw fleet::Timeout naming the keys
// still missing and the store (Describe()) when the deadline passes. A store that cannot be
// reached throws fleet::Unavailable.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fleet::collective {

using Duration = std::chrono::milliseconds;

class Store {
 public:
  virtual ~Store() = default;

  // Stores `value` (any bytes) under `key`, replacing what was there.
  virtual void Set(const std::string& key, const std::string& value) = 0;
  // The value under `key`, or nullopt when it is not there yet. Never waits for the key.
  virtual std::optional<std::string> TryGet(const std::string& key) = 0;
  // Atomically adds `delta` to the decimal integer under `key` (0 when missing) and returns the
  // new value. Throws InvalidArgument when the key holds something else.
  virtual int64_t Add(const std::string& key, int64_t delta) = 0;
  // True when every key exists. Never waits.
  virtual bool Check(const std::vector<std::string>& keys) = 0;
  // Where the store lives, for error messages ("TCP store at 127.0.0.1:6000").
  virtual std::string Describe() const = 0;

  // Blocks until `key` exists and returns its value; Timeout after `timeout`.
  virtual std::string Get(const std::string& key, Duration timeout);
  // Blocks until every key exists; Timeout after `timeout` naming the keys still missing.
  virtual void Wait(const std::vector<std::string>& keys, Duration timeout);

  // The subset of `keys` that does not exist yet, in the given order. Never waits.
  std::vector<std::string> Missing(const std::vector<std::string>& keys);
};

// Parses the decimal integer an Add left under `key`; InvalidArgument naming the key otherwise.
int64_t ParseCounter(const std::string& key, const std::string& value);

}  // namespace fleet::collective
