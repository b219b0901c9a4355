#include "data/channel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace fleet::data {
namespace {

TEST(ChannelTest, FifoWithinCapacity) {
  Channel<int> ch(3);
  EXPECT_TRUE(ch.Put(1));
  EXPECT_TRUE(ch.Put(2));
  EXPECT_EQ(ch.size(), 2u);
  EXPECT_EQ(*ch.Get(), 1);
  EXPECT_EQ(*ch.Get(), 2);
}

TEST(ChannelTest, CloseDrainsThenEnds) {
  Channel<int> ch(4);
  ch.Put(7);
  ch.Put(8);
  ch.Close();
  EXPECT_FALSE(ch.Put(9));  // dropped after close
  EXPECT_EQ(*ch.Get(), 7);
  EXPECT_EQ(*ch.Get(), 8);
  EXPECT_FALSE(ch.Get().has_value());
  EXPECT_FALSE(ch.Get(absl::Milliseconds(10)).has_value());  // closed: no timeout
}

TEST(ChannelTest, TimedCallsThrowTimeout) {
  Channel<int> ch(1, "test channel");
  EXPECT_THROW(ch.Get(absl::Milliseconds(20)), Timeout);
  ch.Put(1);
  try {
    ch.Put(2, absl::Milliseconds(20));
    FAIL() << "Put on a full channel did not time out";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("test channel"), std::string::npos) << e.what();
  }
}

TEST(ChannelTest, CloseWakesBlockedProducerAndConsumer) {
  Channel<int> full(1);
  full.Put(0);
  Channel<int> empty(1);
  std::atomic<int> woken{0};
  std::thread producer([&] {
    EXPECT_FALSE(full.Put(1));
    ++woken;
  });
  std::thread consumer([&] {
    EXPECT_FALSE(empty.Get().has_value());
    ++woken;
  });
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_EQ(woken.load(), 0);
  full.Close();
  empty.Close();
  producer.join();
  consumer.join();
  EXPECT_EQ(woken.load(), 2);
}

TEST(ChannelTest, ManyProducersManyConsumersDeliverEveryItemOnce) {
  constexpr int kProducers = 4, kConsumers = 3, kPerProducer = 5000;
  Channel<int> ch(8);
  std::atomic<int> producers_left{kProducers};
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) ASSERT_TRUE(ch.Put(p * kPerProducer + i));
      if (--producers_left == 0) ch.Close();
    });
  }
  std::vector<std::vector<int>> seen(kConsumers);
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&, c] {
      while (auto v = ch.Get()) seen[c].push_back(*v);
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int> count(kProducers * kPerProducer, 0);
  for (const auto& s : seen) {
    for (int v : s) ++count[v];
  }
  for (int i = 0; i < kProducers * kPerProducer; ++i) ASSERT_EQ(count[i], 1) << "item " << i;
}

}  // namespace
}  // namespace fleet::data
