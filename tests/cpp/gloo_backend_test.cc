// GlooBackend's argument checks that the Python bindings cannot reach: an all-reduce whose
// input and output overlap without being the same buffer is refused before any data moves (the
// ring would read elements it has already overwritten). One rank, over 127.0.0.1.

#include "collective/gloo_backend.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collective/memory_store.h"
#include "core/errors.h"

namespace fleet::collective {
namespace {

TEST(GlooBackendTest, OverlappingInputAndOutputAreRefusedTheSameBufferIsNot) {
  MemoryStore store;
  GlooOptions options;
  options.name = "overlap";
  options.timeout = std::chrono::seconds(30);
  auto group = GlooBackend::Connect(&store, 0, 1, options);
  std::vector<float> data{1, 2, 3, 4, 5, 6};
  AllReduceOptions sum;
  try {
    group->AllReduce(data.data(), data.data() + 1, 4, DType::kFloat32, sum);
    FAIL() << "overlapping buffers were accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "all-reduce in group 'overlap': the input and output buffers overlap without "
              "being the same buffer");
  }
  EXPECT_EQ(data, (std::vector<float>{1, 2, 3, 4, 5, 6}));                        // nothing moved
  group->AllReduce(data.data(), data.data(), data.size(), DType::kFloat32, sum);  // in place
  group->AllReduce(data.data(), data.data() + 3, 3, DType::kFloat32, sum);        // adjacent: fine
  EXPECT_EQ(data, (std::vector<float>{1, 2, 3, 1, 2, 3}));
}

}  // namespace
}  // namespace fleet::collective
