#pragma once
// Where a tensor's memory lives and where a kernel runs.

#include <string>

namespace fleet {

enum class DeviceType : int { kCPU = 0, kCUDA = 1 };

struct Place {
  DeviceType device = DeviceType::kCPU;
  int device_id = 0;

  bool operator==(const Place& other) const {
    return device == other.device && device_id == other.device_id;
  }
  std::string ToString() const;
};

inline Place CPUPlace() { return Place{}; }
inline Place CUDAPlace(int id) { return Place{DeviceType::kCUDA, id}; }

}  // namespace fleet
