// Fuzz target: the TCP store's server side on arbitrary bytes, as if they had arrived on its
// port: frames are decoded with the wire limits (detail/socket.h) and each is answered against
// one in-memory store (detail/store_protocol.h), until the bytes end or a frame is refused.
//
// Besides crashes, sanitizer reports and leaks, it checks: decoding never holds more than the
// limits allow, only fleet errors come out, every reply encodes and decodes back to itself, and
// a refused frame says why.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "collective/detail/socket.h"
#include "collective/detail/store_protocol.h"
#include "collective/memory_store.h"
#include "core/errors.h"

namespace {

using fleet::collective::detail::ByteSource;
using fleet::collective::detail::Frame;

class MemorySource : public ByteSource {
 public:
  MemorySource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool ReadExact(void* out, size_t n, bool eof_ok) override {
    if (pos_ == size_ && eof_ok) return false;
    if (size_ - pos_ < n) throw fleet::Unavailable("connection lost: closed by peer");
    std::memcpy(out, data_ + pos_, n);
    pos_ += n;
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "contract broken: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace detail = fleet::collective::detail;
  fleet::collective::MemoryStore store;
  MemorySource source(data, size);
  const std::string peer = "the fuzzer";
  try {
    Frame request;
    while (detail::ReadFrame(&source, &request, peer)) {
      Check(request.parts.size() <= detail::kMaxFrameParts, "part count within the limit");
      const Frame reply = detail::HandleStoreRequest(&store, request);
      Check(reply.op == detail::kStoreOk || reply.op == detail::kStoreNotFound ||
                reply.op == detail::kStoreError,
            "a reply code");
      const std::string wire = detail::EncodeFrame(reply);
      MemorySource back(reinterpret_cast<const uint8_t*>(wire.data()), wire.size());
      Frame decoded;
      Check(detail::ReadFrame(&back, &decoded, peer), "a reply decodes");
      Check(decoded.op == reply.op && decoded.parts == reply.parts, "a reply round-trips");
    }
  } catch (const fleet::InvalidArgument& e) {
    Check(std::strstr(e.what(), "malformed frame from the fuzzer") != nullptr,
          "a refused frame says why");
  } catch (const fleet::Unavailable&) {
    // The bytes ended inside a frame: the server drops that connection.
  }
  return 0;
}
