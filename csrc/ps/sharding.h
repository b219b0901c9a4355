#pragma once
// Where keys and dense blocks live. Sharding is a pair of plain functions, replaceable by the
// owner of a client or server; client and servers must be given the same ones.

#include <cstdint>
#include <functional>

namespace fleet::ps {

// The splitmix64 finaliser (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014): a bijective mix whose every output bit depends on every input bit.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Server that owns sparse key `key` among `num_servers`. Must be a pure function of its inputs.
using KeyShardFn = std::function<uint32_t(int64_t key, uint32_t num_servers)>;
// Server that owns dense block `block` among `num_servers`. Must be a pure function.
using BlockShardFn = std::function<uint32_t(uint64_t block, uint32_t num_servers)>;

// Default key sharding: the high half of a hash of the key scaled to the number of servers, so
// consecutive ids spread. A multiply and a shift (Lemire, "Fast random integer generation in an
// interval", 2019) rather than a 64-bit modulo, which cost tens of cycles a key in the client.
// The low half is left to the client's key deduplication, so the two stay independent.
inline uint32_t HashKeyShard(int64_t key, uint32_t num_servers) {
  const uint64_t high = Mix64(static_cast<uint64_t>(key)) >> 32;
  return static_cast<uint32_t>((high * num_servers) >> 32);
}

// Default block sharding: round robin (block b on server b % n), as Paddle splits dense
// parameters into min_block_size blocks.
inline uint32_t RoundRobinBlockShard(uint64_t block, uint32_t num_servers) {
  return static_cast<uint32_t>(block % num_servers);
}

struct Sharding {
  KeyShardFn key_to_server = HashKeyShard;
  BlockShardFn block_to_server = RoundRobinBlockShard;
};

// Elements per dense block when TableConfig.dense_block_size is 0 (Paddle's min_block_size).
inline constexpr uint64_t kDefaultDenseBlockSize = 8192;

// A dense table of `dim` floats cut into blocks of `block_size` (the last one shorter).
struct DenseLayout {
  uint64_t dim = 0;
  uint64_t block_size = 1;

  uint64_t num_blocks() const { return (dim + block_size - 1) / block_size; }
  uint64_t BlockBegin(uint64_t block) const { return block * block_size; }
  uint64_t BlockLength(uint64_t block) const {
    uint64_t begin = BlockBegin(block);
    return dim - begin < block_size ? dim - begin : block_size;
  }
};

}  // namespace fleet::ps
