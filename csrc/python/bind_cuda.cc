// Python view of the CUDA layer: device queries and the seed GPU optimizer updates on NumPy
// arrays. The functions exist in every build: without CUDA compiled in (or without a device)
// cuda_device_count() returns 0 and the others raise fleet.errors.Unavailable.

#include <pybind11/numpy.h>

#include <string>

#include "core/errors.h"
#include "fleet/build_config.h"
#include "python/bindings.h"
#ifdef FLEET_WITH_CUDA
#include "core/cuda_device.h"
#include "operators/optimizer_cuda.h"
#endif

namespace fleet::python {
namespace {

// The memory of a float32 C-contiguous array of `size` elements (-1: any size).
const float* FloatArray(const py::array& a, const char* what, py::ssize_t size) {
  FLEET_ENFORCE(a.dtype().is(py::dtype::of<float>()), InvalidArgument, what,
                " must be a float32 array, got ", py::str(a.dtype()).cast<std::string>());
  FLEET_ENFORCE((a.flags() & py::array::c_style) != 0, InvalidArgument, what,
                " must be C-contiguous");
  FLEET_ENFORCE(size < 0 || a.size() == size, InvalidArgument, what, " has ", a.size(),
                " elements, expected ", size);
  return static_cast<const float*>(a.data());
}

// Like FloatArray, for an array the update writes in place.
float* InPlaceArray(const py::array& a, const char* what, py::ssize_t size) {
  FloatArray(a, what, size);
  FLEET_ENFORCE(a.writeable(), InvalidArgument, what, " must be writeable: it is updated in place");
  return static_cast<float*>(const_cast<void*>(a.data()));
}

#ifndef FLEET_WITH_CUDA
[[noreturn]] void NotCompiled(const char* what) {
  throw Unavailable(std::string(what) +
                    ": this Fleet build has no CUDA support (built with FLEET_WITH_CUDA=OFF "
                    "or without nvcc)");
}
#endif

int DeviceCount() {
#ifdef FLEET_WITH_CUDA
  return CudaDeviceCount();
#else
  return 0;
#endif
}

std::string DeviceName(int device) {
#ifdef FLEET_WITH_CUDA
  return CudaDeviceName(device);
#else
  NotCompiled("cuda_device_name");
#endif
}

void SgdUpdate(const py::array& param, const py::array& grad, float lr, int device) {
  float* p = InPlaceArray(param, "cuda_sgd_update: param", -1);
  const float* g = FloatArray(grad, "cuda_sgd_update: grad", param.size());
#ifdef FLEET_WITH_CUDA
  py::gil_scoped_release release;
  operators::CudaSgdUpdate(device, lr, g, p, param.size());
#else
  (void)p, (void)g;
  NotCompiled("cuda_sgd_update");
#endif
}

void AdamUpdate(const py::array& param, const py::array& grad, const py::array& moment1,
                const py::array& moment2, const py::array& beta1_pow, const py::array& beta2_pow,
                float lr, float beta1, float beta2, float epsilon, int device) {
  const py::ssize_t n = param.size();
  float* p = InPlaceArray(param, "cuda_adam_update: param", -1);
  const float* g = FloatArray(grad, "cuda_adam_update: grad", n);
  float* m1 = InPlaceArray(moment1, "cuda_adam_update: moment1", n);
  float* m2 = InPlaceArray(moment2, "cuda_adam_update: moment2", n);
  float* b1p = InPlaceArray(beta1_pow, "cuda_adam_update: beta1_pow", 1);
  float* b2p = InPlaceArray(beta2_pow, "cuda_adam_update: beta2_pow", 1);
#ifdef FLEET_WITH_CUDA
  py::gil_scoped_release release;
  operators::CudaAdamUpdate(device, {lr, beta1, beta2, epsilon}, g, p, m1, m2, b1p, b2p, n);
#else
  (void)p, (void)g, (void)m1, (void)m2, (void)b1p, (void)b2p;
  NotCompiled("cuda_adam_update");
#endif
}

}  // namespace

void BindCuda(py::module_& m) {
  m.def("cuda_device_count", &DeviceCount,
        "Visible CUDA devices; 0 without a device, a driver, or CUDA compiled in.");
  m.def("cuda_device_name", &DeviceName, py::arg("device") = 0);
  m.def("cuda_sgd_update", &SgdUpdate, py::arg("param"), py::arg("grad"), py::arg("lr"),
        py::arg("device") = 0,
        "param -= lr * grad on a CUDA device, in place on float32 C-contiguous arrays.");
  m.def("cuda_adam_update", &AdamUpdate, py::arg("param"), py::arg("grad"), py::arg("moment1"),
        py::arg("moment2"), py::arg("beta1_pow"), py::arg("beta2_pow"), py::arg("lr"),
        py::arg("beta1") = 0.9f, py::arg("beta2") = 0.999f, py::arg("epsilon") = 1e-8f,
        py::arg("device") = 0,
        "One step of the adam op on a CUDA device, in place on float32 C-contiguous arrays "
        "(param, moments, and the one-element beta powers, which are multiplied by the betas).");
}

}  // namespace fleet::python
