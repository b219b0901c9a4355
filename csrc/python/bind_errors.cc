// Maps the C++ error types to the fleet.errors Python exceptions of the same names. This is the
// one place where C++ errors become Python ones.

#include <cstring>
#include <new>

#include "core/errors.h"
#include "python/bindings.h"

namespace fleet::python {

void BindErrors(py::module_& m) {
  py::module_ errors = py::module_::import("fleet.errors");
  // Kept alive by the module so the translator can use them after import.
  m.attr("_errors") = errors;
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    py::module_ errors = py::module_::import("fleet.errors");
    auto raise = [&](const char* type, const std::exception& e) {
      py::object cls = errors.attr(type);
      // Messages quote file contents; bytes that are not UTF-8 must not turn the error into a
      // UnicodeDecodeError (PyErr_SetString decodes strictly), so they become \xNN.
      const char* what = e.what();
      PyObject* message = PyUnicode_DecodeUTF8(what, static_cast<Py_ssize_t>(std::strlen(what)),
                                               "backslashreplace");
      if (message == nullptr) return;  // the decode error stays set
      PyErr_SetObject(cls.ptr(), message);
      Py_DECREF(message);
    };
    try {
      std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      raise("InvalidArgument", e);
    } catch (const NotFound& e) {
      raise("NotFound", e);
    } catch (const Unavailable& e) {
      raise("Unavailable", e);
    } catch (const Timeout& e) {
      raise("Timeout", e);
    } catch (const Internal& e) {
      raise("Internal", e);
    } catch (const OutOfMemory& e) {
      raise("OutOfMemory", e);
    } catch (const Error& e) {
      raise("FleetError", e);
    } catch (const std::bad_alloc& e) {  // an allocation that failed outside an op's kernel
      raise("OutOfMemory", e);
    }
  });
}

}  // namespace fleet::python
