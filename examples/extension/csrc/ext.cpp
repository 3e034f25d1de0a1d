// ember-example-ext: a C++ op built against ember's stable ABI headers only (no ember-core
// headers, no libraries), registered as ember.ops.ember_example.scaled_square.
//
//   scaled_square(x, k) = k * x * x          CPU kernel, fake (meta) kernel, derivative
//   scaled_square_backward(g, x, k) = 2 * k * x * g
//
// It targets ABI 1.1 (register_autograd is new in 1.1): on a core offering 1.0 its import fails
// with a message naming both versions.
#ifndef EMBER_TARGET_VERSION  // setup.py passes it too (ember_abi.extension(target=(1, 1)))
#define EMBER_TARGET_VERSION 1001
#endif

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "ember/abi.hpp"

using ember::abi::Tensor;

namespace {

// A contiguous copy when needed, through the dispatcher (ember.ops.aten.contiguous).
Tensor contiguous(const Tensor& x) {
  return x.is_contiguous() ? x : ember::abi::call("aten::contiguous", "", x);
}

template <class T>
void square_loop(const T* x, T* out, int64_t n, double k) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(k * x[i] * x[i]);
}

template <class T>
void backward_loop(const T* g, const T* x, T* out, int64_t n, double k) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(2.0 * k * x[i] * g[i]);
}

// The dispatcher prefixes the op's name to the message.
void check_float(const Tensor& x) {
  int32_t d = x.dtype();
  if (d != ember::abi::dtype_of<float>() && d != ember::abi::dtype_of<double>())
    throw ember::abi::Error(EMBER_ERR_TYPE, "expected a float32 or float64 tensor");
}

Tensor scaled_square_cpu(const Tensor& x_, double k) {
  check_float(x_);
  Tensor x = contiguous(x_);
  Tensor out = ember::abi::empty_like(x);
  if (x.dtype() == ember::abi::dtype_of<float>()) {
    square_loop(x.data<float>(), out.data<float>(), x.numel(), k);
  } else {
    square_loop(x.data<double>(), out.data<double>(), x.numel(), k);
  }
  return out;
}

// Fake kernel: the output's shape and dtype, on the meta device (no data).
Tensor scaled_square_meta(const Tensor& x, double) { return ember::abi::empty_like(x); }

Tensor scaled_square_backward_cpu(const Tensor& g_, const Tensor& x_, double k) {
  check_float(x_);
  Tensor g = contiguous(g_), x = contiguous(x_);
  if (g.sizes() != x.sizes() || g.dtype() != x.dtype())
    throw ember::abi::Error(EMBER_ERR_VALUE, "scaled_square_backward: grad and x differ");
  Tensor out = ember::abi::empty_like(x);
  if (x.dtype() == ember::abi::dtype_of<float>()) {
    backward_loop(g.data<float>(), x.data<float>(), out.data<float>(), x.numel(), k);
  } else {
    backward_loop(g.data<double>(), x.data<double>(), out.data<double>(), x.numel(), k);
  }
  return out;
}

Tensor scaled_square_backward_meta(const Tensor&, const Tensor& x, double) {
  return ember::abi::empty_like(x);
}

}  // namespace

EMBER_LIBRARY(ember_example, m) {
  m.def("scaled_square(Tensor x, float k=1.0) -> Tensor");
  m.impl<scaled_square_cpu>("scaled_square", "cpu");
  m.impl<scaled_square_meta>("scaled_square", "meta");
  m.def("scaled_square_backward(Tensor grad, Tensor x, float k) -> Tensor");
  m.impl<scaled_square_backward_cpu>("scaled_square_backward", "cpu");
  m.impl<scaled_square_backward_meta>("scaled_square_backward", "meta");
  m.register_autograd("scaled_square", "scaled_square_backward");
}

PYBIND11_MODULE(_C, mod) {
  // imports ember's ABI table (refusing an older core) and runs EMBER_LIBRARY above
  if (!ember::abi::load()) throw pybind11::error_already_set();
  mod.doc() = "ember-example-ext's native ops (ember.ops.ember_example.*)";
  mod.attr("TARGET_VERSION") = pybind11::make_tuple(EMBER_TARGET_VERSION / 1000,
                                                    EMBER_TARGET_VERSION % 1000);
}
