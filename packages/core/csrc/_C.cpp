// ember._C: core's native module (pybind11), built against the stable ABI headers only.
//
// It holds the stable C ABI's function table (abi_table.cpp) and a few buffer helpers. Python
// code treats ember._C as optional: `try: from ember import _C`.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "abi_table.h"
#include "ember/abi.h"

namespace py = pybind11;

void init_fastpath(py::module_& m);  // fastpath.cpp: the eager hot path of pointwise CPU calls
void init_devplan(py::module_& m);   // devplan.cpp: its device launch plans (cuda)
void init_devalloc(py::module_& m);  // devalloc.cpp: their allocator fast path
void init_viewpath(py::module_& m);  // viewpath.cpp: view ops on the hit path
void init_mutpath(py::module_& m);   // mutpath.cpp: in-place ops and factories on it
void init_engine(py::module_& m);    // engine.cpp: the backward engine's loop

namespace {

template <typename T>
void fill(void* ptr, py::ssize_t n, double start, double step) {
  T* out = static_cast<T*>(ptr);
  for (py::ssize_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + step * static_cast<double>(i));
}

// Fill a writable C-contiguous buffer (numpy array, bytearray, ...) with start + step * i.
void fill_arange(py::buffer buf, double start, double step) {
  py::buffer_info info = buf.request(/*writable=*/true);
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.strides[d] != expected) throw py::value_error("fill_arange: buffer is not C-contiguous");
    expected *= info.shape[d];
  }
  const std::string& f = info.format;
  if (f == py::format_descriptor<float>::format()) {
    fill<float>(info.ptr, info.size, start, step);
  } else if (f == py::format_descriptor<double>::format()) {
    fill<double>(info.ptr, info.size, start, step);
  } else if (f == py::format_descriptor<int32_t>::format()) {
    fill<int32_t>(info.ptr, info.size, start, step);
  } else if (f == py::format_descriptor<int64_t>::format() || f == "l" || f == "q") {
    fill<int64_t>(info.ptr, info.size, start, step);
  } else if (f == py::format_descriptor<uint8_t>::format()) {
    fill<uint8_t>(info.ptr, info.size, start, step);
  } else {
    throw py::type_error("fill_arange: unsupported buffer format '" + f + "'");
  }
}

// FNV-1a 64-bit hash of a buffer's bytes (C-contiguous): a cheap content checksum.
uint64_t checksum(py::buffer buf) {
  py::buffer_info info = buf.request();
  const auto* p = static_cast<const unsigned char*>(info.ptr);
  uint64_t h = 1469598103934665603ULL;
  for (py::ssize_t i = 0; i < info.size * info.itemsize; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "ember's native helpers (optional at import; see packages/core/csrc/_C.cpp)";
  init_abi(m);  // the stable ABI's function table (abi_table.cpp)
  init_fastpath(m);
  init_devplan(m);
  init_devalloc(m);
  init_viewpath(m);
  init_mutpath(m);
  init_engine(m);
  m.def("fill_arange", &fill_arange, py::arg("buffer"), py::arg("start") = 0.0,
        py::arg("step") = 1.0, "Fill a writable C-contiguous buffer with start + step * i");
  m.def("checksum", &checksum, py::arg("buffer"), "FNV-1a 64 checksum of a buffer's bytes");
}
