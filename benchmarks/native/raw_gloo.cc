#include "raw_gloo.h"

#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"

namespace fleet::bench {

RawGlooGroup::RawGlooGroup(const std::string& store_dir, const std::string& name, int rank,
                           int size, const std::string& hostname,
                           std::chrono::milliseconds timeout) {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(timeout);
  gloo::rendezvous::FileStore file_store(store_dir);
  gloo::rendezvous::PrefixStore store(name, file_store);
  gloo::transport::tcp::attr attr;
  attr.hostname = hostname;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  context->connectFullMesh(store, device);
  context_ = std::move(context);
}

RawGlooGroup::~RawGlooGroup() = default;

int RawGlooGroup::rank() const { return context_->rank; }
int RawGlooGroup::size() const { return context_->size; }

double RawGlooGroup::AllReduceSeconds(float* data, size_t count, int iters) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(next_tag_++);
    gloo::allreduce(opts);
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / (iters > 0 ? iters : 1);
}

}  // namespace fleet::bench
