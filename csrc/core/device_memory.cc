#include "core/device_memory.h"

#include <cstring>
#include <vector>

#include "fleet/build_config.h"
#ifdef FLEET_WITH_CUDA
#include "core/cuda/device_copy.h"
#endif

namespace fleet {
namespace {

bool OnCpu(Place place) { return place.device == DeviceType::kCPU; }

#ifndef FLEET_WITH_CUDA
[[noreturn]] void NoCuda(Place place) {
  throw Unavailable(absl::StrCat(place.ToString(),
                                 ": this Fleet build has no CUDA support (built with "
                                 "FLEET_WITH_CUDA=OFF or without nvcc)"));
}
#endif

// Device kernels mark rows every consumer skips (padding ids) as -1; on the host they go.
void DropSkippedRows(SelectedRows* rows) {
  auto& ids = *rows->mutable_rows();
  size_t kept = 0;
  for (int64_t id : ids) kept += id >= 0 ? 1 : 0;
  if (kept == ids.size()) return;
  Tensor* value = rows->mutable_value();
  const int64_t width = ids.empty() ? 0 : value->numel() / static_cast<int64_t>(ids.size());
  Tensor compact(value->dtype(), {static_cast<int64_t>(kept), width});
  char* dst = static_cast<char*>(compact.mutable_data(value->dtype()));
  const char* src = static_cast<const char*>(value->raw_data());
  const size_t row_bytes = static_cast<size_t>(width) * SizeOf(value->dtype());
  std::vector<int64_t> kept_ids;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) continue;
    std::memcpy(dst, src + i * row_bytes, row_bytes);
    dst += row_bytes;
    kept_ids.push_back(ids[i]);
  }
  ids = std::move(kept_ids);
  *value = std::move(compact);
}

}  // namespace

std::shared_ptr<Buffer> AllocateBuffer(size_t bytes, Place place) {
  if (OnCpu(place)) return std::make_shared<Buffer>(bytes);
#ifdef FLEET_WITH_CUDA
  return cuda::AllocateDeviceBuffer(bytes, place.device_id);
#else
  NoCuda(place);
#endif
}

void CopyBytes(void* dst, Place dst_place, const void* src, Place src_place, size_t bytes) {
  if (OnCpu(dst_place) && OnCpu(src_place)) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
#ifdef FLEET_WITH_CUDA
  cuda::CopyBytes(dst, dst_place, src, src_place, bytes);
#else
  NoCuda(OnCpu(dst_place) ? src_place : dst_place);
#endif
}

void ZeroBytes(void* dst, Place place, size_t bytes) {
  if (OnCpu(place)) {
    if (bytes > 0) std::memset(dst, 0, bytes);
    return;
  }
#ifdef FLEET_WITH_CUDA
  cuda::ZeroBytes(dst, place.device_id, bytes);
#else
  NoCuda(place);
#endif
}

void SynchronizePlace(Place place) {
  if (OnCpu(place)) return;
#ifdef FLEET_WITH_CUDA
  cuda::Synchronize(place.device_id);
#else
  NoCuda(place);
#endif
}

Tensor CopyToPlace(const Tensor& src, Place place) {
  Tensor out(src.dtype(), src.shape());
  void* dst = out.mutable_data(src.dtype(), place);
  CopyBytes(dst, place, src.raw_data(), src.place(), src.nbytes());
  return out;
}

LoDTensor CopyToPlace(const LoDTensor& src, Place place) {
  LoDTensor out(CopyToPlace(static_cast<const Tensor&>(src), place));
  out.set_lod(src.lod());
  return out;
}

SelectedRows CopyToPlace(const SelectedRows& src, Place place) {
  SelectedRows out;
  out.set_height(src.height());
  if (src.value().initialized()) *out.mutable_value() = CopyToPlace(src.value(), place);
  const bool rows_on_device = src.rows().empty() && src.device_rows().initialized();
  if (OnCpu(place)) {
    if (rows_on_device) {
      const Tensor host = CopyToPlace(src.device_rows(), place);
      const int64_t* rows = host.data<int64_t>();
      out.mutable_rows()->assign(rows, rows + host.numel());
      DropSkippedRows(&out);
    } else {
      *out.mutable_rows() = src.rows();
    }
    return out;
  }
  if (rows_on_device) {
    *out.mutable_device_rows() = CopyToPlace(src.device_rows(), place);
  } else {
    *out.mutable_rows() = src.rows();
    Tensor* device_rows = out.mutable_device_rows();
    device_rows->Resize({static_cast<int64_t>(src.rows().size())});
    CopyBytes(device_rows->mutable_data(DType::kInt64, place), place, src.rows().data(), CPUPlace(),
              src.rows().size() * sizeof(int64_t));
  }
  return out;
}

}  // namespace fleet
