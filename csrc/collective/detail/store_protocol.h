#pragma once
// The TCP store's request protocol, apart from its sockets so that tests and the fuzz target
// (tests/fuzz/tcp_store_frame_fuzz.cc) drive the same code the server runs.
//
// A request is a detail::Frame whose op is one of the request codes below; the reply carries
// kOk, kNotFound, or kError with the message as its one part. A request the store cannot
// answer (unknown code, wrong part count, a counter that is not one) gets kError; only a frame
// that breaks the wire limits (see socket.h) ends the connection.
//
// kStoreHello (one part: the client's job identity) is answered by the server itself, not by
// HandleStoreRequest: a store that serves one job refuses a client of another (see tcp_store.h).

#include <cstdint>

#include "collective/detail/socket.h"
#include "collective/memory_store.h"

namespace fleet::collective::detail {

enum StoreOp : uint8_t {
  kStoreSet = 1,
  kStoreGet = 2,
  kStoreAdd = 3,
  kStoreCheck = 4,
  kStoreHello = 5,
  kStoreOk = 100,
  kStoreNotFound = 101,
  kStoreError = 102
};

// Answers one request against `data`. Never throws for any request content; throws what the
// store's memory throws (std::bad_alloc) when it runs out.
Frame HandleStoreRequest(MemoryStore* data, const Frame& request);

}  // namespace fleet::collective::detail
