#pragma once
// LoDTensor: a Tensor plus levels of sequence offsets ("level of detail", as in Paddle).
//
// lod()[0] = {0, 2, 5} says rows [0, 2) are sequence 0 and rows [2, 5) sequence 1. With two
// levels the first level indexes into the second. An empty lod means one row per sample.

#include <cstddef>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace fleet {

using LoD = std::vector<std::vector<size_t>>;

std::string LoDToString(const LoD& lod);

class LoDTensor : public Tensor {
 public:
  LoDTensor() = default;
  explicit LoDTensor(const Tensor& tensor) : Tensor(tensor) {}

  const LoD& lod() const { return lod_; }
  LoD* mutable_lod() { return &lod_; }
  // Writes nothing when unchanged (see Tensor::Resize: shared parameters under Hogwild).
  void set_lod(LoD lod) {
    if (lod != lod_) lod_ = std::move(lod);
  }
  int lod_level() const { return static_cast<int>(lod_.size()); }
  // Number of sequences at the top level (rows when there is no lod).
  int64_t NumSequences() const;

  // Throws InvalidArgument naming `what` when the offsets are not increasing from 0 or the last
  // offset of the bottom level differs from the number of rows.
  void ValidateLoD(const std::string& what) const;

 private:
  LoD lod_;
};

}  // namespace fleet
