#pragma once
// SelectedRows: a sparse set of rows of a [height, width] matrix, used for the gradients of
// embedding tables. rows() may repeat an index; consumers add duplicate rows together.

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace fleet {

class SelectedRows {
 public:
  const std::vector<int64_t>& rows() const { return rows_; }
  std::vector<int64_t>* mutable_rows() { return &rows_; }
  int64_t height() const { return height_; }
  void set_height(int64_t height) { height_ = height; }
  // value() has shape [rows().size(), width].
  const Tensor& value() const { return value_; }
  Tensor* mutable_value() { return &value_; }

 private:
  std::vector<int64_t> rows_;
  int64_t height_ = 0;
  Tensor value_;
};

// Sums duplicate rows: the result has unique rows in first-seen order. Float32 values only.
SelectedRows MergeDuplicateRows(const SelectedRows& input);

}  // namespace fleet
