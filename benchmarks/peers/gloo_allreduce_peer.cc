// Raw Gloo all-reduce: the limit that fleet.util.all_reduce is measured against in
// benchmarks/launch_and_collective.py. Pure Gloo (no Fleet code): Gloo's own FileStore for the
// rendezvous, the TCP transport on the given address, gloo::allreduce (ring) on float32 sums.
//
// Usage: gloo_allreduce_peer RANK SIZE STORE_DIR HOSTNAME BYTES:ITERS[,BYTES:ITERS...]
// Rank 0 prints one line per size: "<bytes> <seconds per all-reduce>".

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

namespace {

std::vector<std::pair<size_t, int>> ParseSizes(const std::string& spec) {
  std::vector<std::pair<size_t, int>> sizes;
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t colon = item.find(':');
    sizes.emplace_back(std::stoull(item.substr(0, colon)), std::stoi(item.substr(colon + 1)));
  }
  return sizes;
}

void AllReduce(const std::shared_ptr<gloo::Context>& context, std::vector<float>* data) {
  gloo::AllreduceOptions opts(context);
  opts.setOutput(data->data(), data->size());
  opts.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
  gloo::allreduce(opts);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s RANK SIZE STORE_DIR HOSTNAME BYTES:ITERS[,...]\n", argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const int size = std::atoi(argv[2]);
  gloo::rendezvous::FileStore store(argv[3]);
  gloo::transport::tcp::attr attr;
  attr.hostname = argv[4];
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(std::chrono::seconds(60));
  context->connectFullMesh(store, device);

  for (const auto& [bytes, iters] : ParseSizes(argv[5])) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    AllReduce(context, &data);  // warm-up: first touch of the buffers and socket windows
    gloo::BarrierOptions barrier(context);
    gloo::barrier(barrier);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) AllReduce(context, &data);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    if (rank == 0) std::printf("%zu %.9f\n", bytes, elapsed.count() / iters);
    std::fflush(stdout);
  }
  return 0;
}
