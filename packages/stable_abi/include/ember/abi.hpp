// Header-only C++ over ember/abi.h: RAII tensors, typed accessors, calling ops, and registering
// plain C++ functions as ops (the boxing template turns them into EmberBoxedKernels).
//
//   #include <pybind11/pybind11.h>     // first: ember::abi::load() then imports through Python
//   #include "ember/abi.hpp"
//   using ember::abi::Tensor;
//
//   Tensor scale_cpu(const Tensor& x, double k) {
//     Tensor out = ember::abi::empty_like(x);
//     ...  x.data<float>(), out.data<float>() ...
//     return out;
//   }
//   EMBER_LIBRARY(myext, m) {
//     m.def("scale(Tensor x, float k) -> Tensor");
//     m.impl<scale_cpu>("scale", "cpu");
//   }
//   PYBIND11_MODULE(_ext, mod) { if (!ember::abi::load()) throw pybind11::error_already_set(); }
//
// Everything throws ember::abi::Error (status + ember_last_error()) instead of returning codes;
// a boxed kernel catches it and reports the message through the ABI.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/abi.h"

namespace ember::abi {

inline constexpr int kVersionMajor = EMBER_ABI_VERSION_MAJOR;
inline constexpr int kVersionMinor = EMBER_ABI_VERSION_MINOR;
inline constexpr int kTargetVersion = EMBER_TARGET_VERSION;

class Error : public std::runtime_error {
 public:
  Error(EmberStatus status, const std::string& what) : std::runtime_error(what), status_(status) {}
  EmberStatus status() const { return status_; }

 private:
  EmberStatus status_;
};

inline void check(EmberStatus s) {
  if (s != EMBER_OK) throw Error(s, ember_last_error());
}

// ---- codes -------------------------------------------------------------------------------------
template <class T>
int32_t dtype_of();
template <> inline int32_t dtype_of<float>() { return ember_dtype_float32(); }
template <> inline int32_t dtype_of<double>() { return ember_dtype_float64(); }
template <> inline int32_t dtype_of<int64_t>() { return ember_dtype_int64(); }
template <> inline int32_t dtype_of<int32_t>() { return ember_dtype_int32(); }
template <> inline int32_t dtype_of<int16_t>() { return ember_dtype_int16(); }
template <> inline int32_t dtype_of<int8_t>() { return ember_dtype_int8(); }
template <> inline int32_t dtype_of<uint8_t>() { return ember_dtype_uint8(); }
template <> inline int32_t dtype_of<bool>() { return ember_dtype_bool(); }

// ---- Tensor ------------------------------------------------------------------------------------
// An owned reference to an ember tensor (or undefined). Copies share the tensor (refcount).
class Tensor {
 public:
  Tensor() = default;
  static Tensor steal(EmberTensor h) { return Tensor(h); }  // takes over a new reference
  static Tensor borrow(EmberTensor h) {                     // a borrowed handle: retain it
    if (h != nullptr) check(ember_tensor_retain(h));
    return Tensor(h);
  }
  Tensor(const Tensor& o) : h_(o.h_) {
    if (h_ != nullptr) check(ember_tensor_retain(h_));
  }
  Tensor(Tensor&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  Tensor& operator=(Tensor o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~Tensor() {
    if (h_ != nullptr) ember_tensor_release(h_);
  }

  bool defined() const { return h_ != nullptr; }
  EmberTensor get() const { return h_; }
  EmberTensor release() {  // hand the reference to the caller
    EmberTensor h = h_;
    h_ = nullptr;
    return h;
  }

  int64_t dim() const { return get_<int64_t>(ember_tensor_dim); }
  // A 0-dim tensor gives empty vectors. The table is asked with a non-null buffer even then, so
  // cores older than the fix that accepts a null `out` for 0 dims work too.
  std::vector<int64_t> sizes() const { return ints_(ember_tensor_sizes); }
  std::vector<int64_t> strides() const { return ints_(ember_tensor_strides); }
  int64_t size(int64_t d) const { return sizes().at(static_cast<size_t>(d < 0 ? d + dim() : d)); }
  int64_t numel() const { return get_<int64_t>(ember_tensor_numel); }
  int64_t storage_offset() const { return get_<int64_t>(ember_tensor_storage_offset); }
  int32_t dtype() const { return get_<int32_t>(ember_tensor_dtype); }
  bool is_contiguous() const { return get_<int32_t>(ember_tensor_is_contiguous) != 0; }
  int32_t device_type() const {
    int32_t t = 0, i = 0;
    check(ember_tensor_device(h_, &t, &i));
    return t;
  }
  int32_t device_index() const {
    int32_t t = 0, i = 0;
    check(ember_tensor_device(h_, &t, &i));
    return i;
  }
  void* data_ptr() const { return get_<void*>(ember_tensor_data_ptr); }
  // Typed data pointer; throws when T is not the tensor's dtype.
  template <class T>
  T* data() const {
    if (dtype() != dtype_of<T>())
      throw Error(EMBER_ERR_TYPE, "Tensor::data<T>(): T does not match the tensor's dtype");
    return static_cast<T*>(data_ptr());
  }

 private:
  explicit Tensor(EmberTensor h) : h_(h) {}
  template <class F>
  std::vector<int64_t> ints_(F f) const {
    std::vector<int64_t> v(static_cast<size_t>(dim()));
    int64_t none = 0;
    check(f(h_, v.empty() ? &none : v.data(), static_cast<int64_t>(v.size())));
    return v;
  }
  template <class T, class F>
  T get_(F f) const {
    T v{};
    check(f(h_, &v));
    return v;
  }
  EmberTensor h_ = nullptr;
};

inline Tensor empty_strided(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                            int32_t dtype, int32_t device_type, int32_t device_index = -1) {
  EmberTensor h = nullptr;
  check(ember_empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(),
                            strides.empty() ? nullptr : strides.data(), dtype, device_type,
                            device_index, &h));
  return Tensor::steal(h);
}

inline Tensor empty(const std::vector<int64_t>& sizes, int32_t dtype, int32_t device_type) {
  return empty_strided(sizes, {}, dtype, device_type);
}

// A contiguous tensor of x's sizes, dtype and device.
inline Tensor empty_like(const Tensor& x) {
  return empty(x.sizes(), x.dtype(), x.device_type());
}

#if EMBER_TARGET_VERSION >= 1001
inline Tensor from_blob(void* data, const std::vector<int64_t>& sizes,
                        const std::vector<int64_t>& strides, int32_t dtype,
                        EmberDeleter deleter = nullptr, void* context = nullptr) {
  EmberTensor h = nullptr;
  check(ember_from_blob(data, static_cast<int64_t>(sizes.size()), sizes.data(),
                        strides.empty() ? nullptr : strides.data(), dtype,
                        ember_device_type_cpu(), -1, deleter, context, &h));
  return Tensor::steal(h);
}
#endif

// ---- boxing ------------------------------------------------------------------------------------
namespace detail {

// Keeps the lists/strings an outgoing call boxes alive until the call returns.
struct Owned {
  std::vector<EmberList> lists;
  std::vector<EmberSlot> cells;
  Owned() { cells.reserve(64); }
  ~Owned() {
    for (EmberList l : lists) ember_list_release(l);
  }
};

template <class T>
struct Box;  // how a C++ type sits in a slot (as an argument in, a result out)

template <>
struct Box<Tensor> {
  static Tensor in(EmberSlot s) { return Tensor::borrow(static_cast<EmberTensor>(ember_slot_to_ptr(s))); }
  static EmberSlot out(Tensor t) { return ember_slot_from_ptr(t.release()); }
  static EmberSlot arg(const Tensor& t, Owned&) { return ember_slot_from_ptr(t.get()); }
};
template <>
struct Box<int64_t> {
  static int64_t in(EmberSlot s) { return static_cast<int64_t>(s); }
  static EmberSlot out(int64_t v) { return static_cast<EmberSlot>(v); }
  static EmberSlot arg(int64_t v, Owned&) { return static_cast<EmberSlot>(v); }
};
template <>
struct Box<int> {
  static int in(EmberSlot s) { return static_cast<int>(static_cast<int64_t>(s)); }
  static EmberSlot out(int v) { return static_cast<EmberSlot>(static_cast<int64_t>(v)); }
  static EmberSlot arg(int v, Owned&) { return static_cast<EmberSlot>(static_cast<int64_t>(v)); }
};
template <>
struct Box<double> {
  static double in(EmberSlot s) { return ember_slot_to_double(s); }
  static EmberSlot out(double v) { return ember_slot_from_double(v); }
  static EmberSlot arg(double v, Owned&) { return ember_slot_from_double(v); }
};
template <>
struct Box<bool> {
  static bool in(EmberSlot s) { return s != 0; }
  static EmberSlot out(bool v) { return v ? 1 : 0; }
  static EmberSlot arg(bool v, Owned&) { return v ? 1 : 0; }
};
template <>
struct Box<std::vector<int64_t>> {
  static std::vector<int64_t> in(EmberSlot s) {
    EmberList l = static_cast<EmberList>(ember_slot_to_ptr(s));
    int64_t n = 0;
    check(ember_list_size(l, &n));
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) check(ember_list_get_int(l, i, &v[static_cast<size_t>(i)]));
    return v;
  }
  static EmberSlot arg(const std::vector<int64_t>& v, Owned& o) {
    EmberList l = nullptr;
    check(ember_list_new(&l));
    o.lists.push_back(l);
    for (int64_t x : v) check(ember_list_append_int(l, x));
    return ember_slot_from_ptr(l);
  }
};
template <>
struct Box<std::vector<Tensor>> {
  static std::vector<Tensor> in(EmberSlot s) {
    EmberList l = static_cast<EmberList>(ember_slot_to_ptr(s));
    int64_t n = 0;
    check(ember_list_size(l, &n));
    std::vector<Tensor> v;
    for (int64_t i = 0; i < n; ++i) {
      EmberTensor h = nullptr;
      check(ember_list_get_tensor(l, i, &h));
      v.push_back(Tensor::steal(h));
    }
    return v;
  }
  static EmberSlot arg(const std::vector<Tensor>& v, Owned& o) {
    EmberList l = nullptr;
    check(ember_list_new(&l));
    o.lists.push_back(l);
    for (const Tensor& t : v) check(ember_list_append_tensor(l, t.get()));
    return ember_slot_from_ptr(l);
  }
};
template <>
struct Box<std::optional<Tensor>> {
  static std::optional<Tensor> in(EmberSlot s) {
    if (s == 0) return std::nullopt;
    return Box<Tensor>::in(s);
  }
};
template <class T>
struct Box<std::optional<T>> {  // optional non-tensors: a pointer to a slot, 0 for None
  static std::optional<T> in(EmberSlot s) {
    if (s == 0) return std::nullopt;
    return Box<T>::in(*static_cast<EmberSlot*>(ember_slot_to_ptr(s)));
  }
};

template <class T>
using Plain = std::remove_cv_t<std::remove_reference_t<T>>;

template <class R>
struct Results {  // writing a kernel's result(s) to the stack
  static int64_t count() { return 1; }
  static void write(R&& r, EmberSlot* stack) { stack[0] = Box<R>::out(std::move(r)); }
};
template <class... Rs>
struct Results<std::tuple<Rs...>> {
  static int64_t count() { return sizeof...(Rs); }
  static void write(std::tuple<Rs...>&& r, EmberSlot* stack) {
    write_(std::move(r), stack, std::index_sequence_for<Rs...>{});
  }
  template <size_t... I>
  static void write_(std::tuple<Rs...>&& r, EmberSlot* stack, std::index_sequence<I...>) {
    ((stack[I] = Box<Rs>::out(std::move(std::get<I>(r)))), ...);
  }
};

template <auto F>
struct Boxed;

template <class R, class... Args, R (*F)(Args...)>
struct Boxed<F> {
  static EmberStatus call(EmberSlot* stack, int64_t num_args, int64_t num_outputs, void*) {
    try {
      if (num_args != static_cast<int64_t>(sizeof...(Args)))
        throw Error(EMBER_ERR_VALUE, "boxed kernel: argument count differs from the C++ function");
      return run(stack, num_outputs, std::index_sequence_for<Args...>{});
    } catch (const std::exception& e) {
      report(e.what());
      return EMBER_ERR_RUNTIME;
    }
  }
  template <size_t... I>
  static EmberStatus run(EmberSlot* stack, int64_t num_outputs, std::index_sequence<I...>) {
    // unbox every argument before the first result overwrites the stack
    std::tuple<Plain<Args>...> args{Box<Plain<Args>>::in(stack[I])...};
    if constexpr (std::is_void_v<R>) {
      F(std::get<I>(args)...);
    } else {
      if (num_outputs < Results<R>::count())
        throw Error(EMBER_ERR_VALUE, "boxed kernel: fewer output slots than results");
      Results<R>::write(F(std::get<I>(args)...), stack);
    }
    return EMBER_OK;
  }
  static void report(const char* what) {
#if EMBER_TARGET_VERSION >= 1001
    ember_set_error(what);
#else
    (void)what;  // 1.0 has no set_error: the caller sees the status only
#endif
  }
};

}  // namespace detail

// The boxed kernel of a plain C++ function: `ember::abi::boxed<my_fn>`.
template <auto F>
inline constexpr EmberBoxedKernel boxed = &detail::Boxed<F>::call;

// Call an op through the dispatcher: call("aten::add", "Tensor", x, y, 1.0) -> its Tensor result.
template <class... Args>
Tensor call(const char* name, const char* overload, const Args&... args) {
  detail::Owned owned;
  EmberSlot stack[sizeof...(Args) + 1] = {detail::Box<detail::Plain<Args>>::arg(args, owned)...};
  check(ember_call_op(name, overload, stack, static_cast<int64_t>(sizeof...(Args)), 1));
  return Tensor::steal(static_cast<EmberTensor>(ember_slot_to_ptr(stack[0])));
}

// ---- libraries ---------------------------------------------------------------------------------
class Library {
 public:
  explicit Library(std::string ns) : ns_(std::move(ns)) {}
  const std::string& ns() const { return ns_; }

  // Define an op from its schema without the namespace: "scale(Tensor x, float k) -> Tensor".
  Library& def(const char* schema) {
    check(ember_library_define(ns_.c_str(), schema));
    return *this;
  }
  // A C++ function as the kernel of `name` for a device type ("cpu", "meta", "default").
  template <auto F>
  Library& impl(const char* name, const char* device_type) {
    check(ember_library_impl(ns_.c_str(), name, device_type, boxed<F>, nullptr));
    return *this;
  }
  Library& impl(const char* name, const char* device_type, EmberBoxedKernel k, void* data) {
    check(ember_library_impl(ns_.c_str(), name, device_type, k, data));
    return *this;
  }
#if EMBER_TARGET_VERSION >= 1001
  // The derivative of `name` is the op `backward` (grads..., args...) -> one grad per Tensor arg.
  Library& register_autograd(const char* name, const char* backward) {
    check(ember_library_register_autograd(ns_.c_str(), name, backward));
    return *this;
  }
#endif

 private:
  std::string ns_;
};

namespace detail {
using LibraryInit = void (*)(Library&);
struct PendingLibrary {
  const char* ns;
  LibraryInit init;
};
// Libraries declared with EMBER_LIBRARY in this shared object, run by load().
inline std::vector<PendingLibrary>& pending() {
  static std::vector<PendingLibrary> v;
  return v;
}
struct Registrar {
  Registrar(const char* ns, LibraryInit init) { pending().push_back({ns, init}); }
};
}  // namespace detail

// Run the EMBER_LIBRARY blocks (after ember_abi_import / ember_abi_use).
inline void register_libraries() {
  for (const auto& p : detail::pending()) {
    Library lib(p.ns);
    p.init(lib);
  }
  detail::pending().clear();
}

#ifdef Py_PYTHON_H
// Import core's table (checking the version) and register this extension's libraries. False
// with a Python ImportError set when the core offers less than EMBER_TARGET_VERSION.
inline bool load() {
  if (ember_abi_import() != 0) return false;
  try {
    register_libraries();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_ImportError, e.what());
    return false;
  }
  return true;
}
#endif

}  // namespace ember::abi

// EMBER_LIBRARY(ns, m) { m.def(...); m.impl<fn>(...); }: runs at ember::abi::load().
#define EMBER_LIBRARY(ns, m)                                                     \
  static void ember_library_init_##ns(::ember::abi::Library&);                  \
  static const ::ember::abi::detail::Registrar ember_library_registrar_##ns(    \
      #ns, &ember_library_init_##ns);                                            \
  static void ember_library_init_##ns(::ember::abi::Library& m)
