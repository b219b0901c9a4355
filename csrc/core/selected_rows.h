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

  // When value() is on a device, the rows as an int64 tensor [n] on that device, for device
  // kernels; a device kernel that produces rows writes only these and leaves rows() empty, so
  // that no step waits for a copy to the host (core/device_memory.h copies them back).
  const Tensor& device_rows() const { return device_rows_; }
  Tensor* mutable_device_rows() { return &device_rows_; }
  // Rows held: rows().size(), or device_rows().numel() when only those are set.
  int64_t num_rows() const {
    return rows_.empty() && device_rows_.initialized() ? device_rows_.numel()
                                                       : static_cast<int64_t>(rows_.size());
  }

 private:
  std::vector<int64_t> rows_;
  int64_t height_ = 0;
  Tensor value_;
  Tensor device_rows_;
};

// Sums duplicate rows: the result has unique rows in first-seen order. Float32 values only.
SelectedRows MergeDuplicateRows(const SelectedRows& input);

}  // namespace fleet
