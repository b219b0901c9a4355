#include "collective/gloo_backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collective/detail/gloo_store.h"
#include "collective/detail/ring_allreduce.h"
#include "core/errors.h"
#include "gloo/allgather.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"

namespace fleet::collective {
namespace {

std::string Seconds(Duration d) { return absl::StrCat(d.count() / 1000.0, " s"); }

// Every rank announces itself under <prefix>joined/<rank> (with `value`: its liveness endpoint,
// or its hostname), then waits for all the others, so a rank that never comes is reported by
// number instead of as an anonymous Gloo key timeout. Returns every rank's value, by rank.
std::vector<std::string> WaitForAllRanks(Store* store, const std::string& prefix, int rank,
                                         int size, const std::string& value,
                                         const GlooOptions& options) {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(absl::StrCat(prefix, "joined/", r));
  store->Set(keys[rank], value);
  try {
    store->Wait(keys, options.timeout);
  } catch (const Timeout&) {
    std::vector<int> missing;
    std::vector<std::string> where;
    for (int r = 0; r < size; ++r) {
      if (store->Check({keys[r]})) continue;
      missing.push_back(r);
      if (r < static_cast<int>(options.rank_addresses.size())) {
        where.push_back(absl::StrCat(r, " at ", options.rank_addresses[r]));
      }
    }
    const std::string addresses =
        where.empty() ? "" : absl::StrCat(absl::StrJoin(where, ", "), "; ");
    throw Timeout(absl::StrCat(
        "rendezvous of group '", options.name, "' timed out after ", Seconds(options.timeout),
        ": rank(s) [", absl::StrJoin(missing, ", "), "] of ", size, " did not join (", addresses,
        "this is rank ", rank, ", store: ", store->Describe(), ")"));
  }
  std::vector<std::string> values;
  for (const auto& key : keys) values.push_back(store->Get(key, options.timeout));
  return values;
}

// "host:port", bracketing an IPv6 host.
std::string Endpoint(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

// The host of "host:port" (brackets kept for IPv6).
std::string HostOf(const std::string& endpoint) { return endpoint.substr(0, endpoint.rfind(':')); }

template <typename T>
detail::ReduceFn ReduceFunction(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return &gloo::sum<T>;
    case ReduceOp::kMax:
      return &gloo::max<T>;
    case ReduceOp::kMin:
      return &gloo::min<T>;
  }
  throw Internal("unknown ReduceOp");
}

}  // namespace

std::unique_ptr<GlooBackend> GlooBackend::Connect(Store* store, int rank, int size,
                                                  const GlooOptions& options) {
  FLEET_ENFORCE(size >= 1 && rank >= 0 && rank < size, InvalidArgument, "group '", options.name,
                "': rank ", rank, " is outside a group of size ", size);
  const std::string prefix = absl::StrCat("fleet/", options.name, "/");
  std::unique_ptr<LivenessListener> liveness;
  std::string announced = options.hostname;
  if (options.name_gone_ranks && size > 1) {
    liveness = std::make_unique<LivenessListener>(options.hostname, 0);
    announced = Endpoint(options.hostname, liveness->port());
  }
  std::vector<std::string> joined = WaitForAllRanks(store, prefix, rank, size, announced, options);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(options.timeout);
  const std::string where = absl::StrCat("group '", options.name, "' (rank ", rank, " of ", size,
                                         ", transport on ", options.hostname, ")");
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    detail::GlooStore gloo_store(store, prefix + "gloo/", options.timeout);
    context->connectFullMesh(gloo_store, device);
  } catch (const Timeout& e) {
    throw Timeout(absl::StrCat("connecting ", where, ": ", e.what()));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Unavailable(absl::StrCat("connecting ", where, " failed: ", e.what()));
  }
  std::unique_ptr<GlooBackend> backend(new GlooBackend(rank, size, options.name, context));
  if (liveness != nullptr) {
    backend->liveness_ = std::move(liveness);
    backend->liveness_endpoints_ = std::move(joined);
  }
  backend->Barrier(BarrierOptions{options.timeout});
  return backend;
}

GlooBackend::GlooBackend(int rank, int size, std::string name,
                         std::shared_ptr<gloo::Context> context)
    : rank_(rank),
      size_(size),
      name_(std::move(name)),
      context_(std::move(context)),
      where_(absl::StrCat("group '", name_, "' (rank ", rank_, " of ", size_, ")")),
      checker_(context_) {}

GlooBackend::~GlooBackend() = default;

std::string GlooBackend::GoneRanks(bool peer_failed) const {
  if (liveness_endpoints_.empty()) return "";
  constexpr Duration kProbeTimeout(500);
  // A dying process closes its sockets one by one: Gloo may see a connection drop before the
  // listener of that process is gone, so after a peer's failure look again for a while. After
  // a timeout the peers are slow or frozen (alive), and one look says so.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::vector<int> gone;
  while (true) {
    gone = UnreachableRanks(liveness_endpoints_, rank_, kProbeTimeout);
    if (!gone.empty() || !peer_failed || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (gone.empty()) {
    return absl::StrCat("; every other rank of ", size_, " still runs (one may be stuck)");
  }
  std::vector<std::string> hosts;
  for (int r : gone) {
    const std::string host = HostOf(liveness_endpoints_[r]);
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  return absl::StrCat("; rank(s) ", absl::StrJoin(gone, ", "), " of ", size_, " on host(s) ",
                      absl::StrJoin(hosts, ", "),
                      " are gone (their process exited or was killed, or the host is down or "
                      "unreachable)");
}

template <typename Fn>
void GlooBackend::Run(const detail::CallSignature& call, Duration timeout, Fn&& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t tag = next_tag_++;
  detail::CallSignature numbered = call;
  numbered.sequence = tag;
  const auto start = std::chrono::steady_clock::now();
  try {
    checker_.Check(numbered, tag, timeout, where_);
    // The check used part of the time; the data movement gets the rest.
    const auto used =
        std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - start);
    fn(tag, std::max(timeout - used, Duration(1)));
  } catch (const Timeout& e) {
    throw Timeout(absl::StrCat(e.what(), GoneRanks(false)));
  } catch (const Unavailable& e) {
    throw Unavailable(absl::StrCat(e.what(), GoneRanks(true)));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string message = absl::StrCat(detail::DescribeCall(numbered), " #", tag, " in ",
                                             where_, " failed: ", e.what());
    if (std::strstr(e.what(), "Timed out") != nullptr) {
      throw Timeout(absl::StrCat(message, GoneRanks(false)));
    }
    throw Unavailable(absl::StrCat(message, GoneRanks(true)));
  }
}

void GlooBackend::AllReduce(const void* in, void* out, size_t count, DType dtype,
                            const AllReduceOptions& options) {
  FLEET_ENFORCE(dtype != DType::kBool, InvalidArgument, "all-reduce in group '", name_,
                "': dtype bool is not supported (use float32, float64, int32 or int64)");
  const size_t bytes = count * SizeOf(dtype);
  const auto* in_begin = static_cast<const char*>(in);
  const auto* out_begin = static_cast<const char*>(out);
  FLEET_ENFORCE(in == out || in_begin + bytes <= out_begin || out_begin + bytes <= in_begin,
                InvalidArgument, "all-reduce in group '", name_,
                "': the input and output buffers overlap without being the same buffer");
  const std::vector<int64_t> shape =
      options.shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(count)} : options.shape;
  const auto call = detail::MakeSignature(detail::kAllReduce, DTypeName(dtype), shape, bytes,
                                          static_cast<int>(options.op), -1, 0);
  Run(call, options.timeout, [&](uint32_t tag, Duration timeout) {
    if (count == 0) return;
    VisitDType(dtype, [&](auto t) {
      using T = decltype(t);
      if constexpr (!std::is_same_v<T, bool>) {
        detail::RingAllReduce(context_, in, out, count, sizeof(T), ReduceFunction<T>(options.op),
                              tag, timeout, &ring_scratch_);
      }
    });
  });
}

void GlooBackend::AllGather(const void* in, void* out, size_t bytes_per_rank,
                            const AllGatherOptions& options) {
  const auto call = detail::MakeSignature(detail::kAllGather, options.element_type, options.shape,
                                          bytes_per_rank, -1, -1, 0);
  Run(call, options.timeout, [&](uint32_t tag, Duration timeout) {
    if (bytes_per_rank == 0) return;
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<char*>(static_cast<const char*>(in)), bytes_per_rank);
    opts.setOutput(static_cast<char*>(out), bytes_per_rank * size_);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::allgather(opts);
  });
}

void GlooBackend::Broadcast(void* data, size_t bytes, const BroadcastOptions& options) {
  FLEET_ENFORCE(options.root >= 0 && options.root < size_, InvalidArgument, "broadcast in group '",
                name_, "': root ", options.root, " is outside a group of size ", size_);
  const auto call = detail::MakeSignature(detail::kBroadcast, options.element_type, options.shape,
                                          bytes, -1, options.root, 0);
  Run(call, options.timeout, [&](uint32_t tag, Duration timeout) {
    if (bytes == 0) return;
    gloo::BroadcastOptions opts(context_);
    if (rank_ == options.root) opts.setInput(static_cast<char*>(data), bytes);
    opts.setOutput(static_cast<char*>(data), bytes);
    opts.setRoot(options.root);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::broadcast(opts);
  });
}

void GlooBackend::Barrier(const BarrierOptions& options) {
  const auto call = detail::MakeSignature(detail::kBarrier, "", {}, 0, -1, -1, 0);
  // The call check is itself a barrier: a rank leaves it only after every peer has sent its
  // description, which each sends on entering. No second round is needed.
  Run(call, options.timeout, [](uint32_t, Duration) {});
}

}  // namespace fleet::collective
