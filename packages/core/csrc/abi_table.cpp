// ember's stable C ABI, core's side: the EmberAbiTable of packages/stable_abi/include/ember/abi.h.
//
// Handles are borrowed or owned PyObject* (ember.Tensor, list, str), reference counted with the
// GIL held. Every entry takes the GIL, checks its arguments, and turns Python exceptions into a
// status and a per-thread message: nothing an extension passes in may crash the process, except a
// dangling handle. Python helpers (ember.library._abi) do what is simpler there.
//
// Build knob for the compatibility tests (ci/check_abi_compat.py): EMBER_CORE_ABI_MINOR makes a
// core offering another minor: lower (entries past it are absent) or higher (entries appended).

#include "abi_table.h"

#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/abi.h"

namespace py = pybind11;

#ifndef EMBER_CORE_ABI_MINOR
#define EMBER_CORE_ABI_MINOR EMBER_ABI_VERSION_MINOR
#endif

namespace {

// ---- errors ------------------------------------------------------------------------------------
thread_local std::string g_error;

EmberStatus fail(EmberStatus s, std::string msg) {
  g_error = std::move(msg);
  return s;
}

const char* last_error() { return g_error.c_str(); }
void clear_error() { g_error.clear(); }
void set_error(const char* msg) { g_error = msg ? msg : "(null message)"; }

// Python's exception -> a status and "Type: message".
EmberStatus from_python_error(py::error_already_set& e) {
  EmberStatus s = EMBER_ERR_RUNTIME;
  if (e.matches(PyExc_IndexError)) {
    s = EMBER_ERR_INDEX;
  } else if (e.matches(PyExc_LookupError)) {
    s = EMBER_ERR_NOT_FOUND;
  } else if (e.matches(PyExc_TypeError)) {
    s = EMBER_ERR_TYPE;
  } else if (e.matches(PyExc_ValueError)) {
    s = EMBER_ERR_VALUE;
  }
  std::string msg;
  try {
    msg = std::string(py::str(e.type().attr("__name__"))) + ": " + std::string(py::str(e.value()));
  } catch (...) {
    msg = e.what();
  }
  return fail(s, msg);
}

// Run f with the GIL held; exceptions become statuses.
template <class F>
EmberStatus guarded(F&& f) {
  py::gil_scoped_acquire gil;
  try {
    return f();
  } catch (py::error_already_set& e) {
    return from_python_error(e);
  } catch (const std::exception& e) {
    return fail(EMBER_ERR_RUNTIME, e.what());
  }
}

py::module_& helpers() {
  // leaked on purpose: it must outlive every handle, even at interpreter exit
  static py::module_* m = new py::module_(py::module_::import("ember.library._abi"));
  return *m;
}

PyObject* tensor_type() {
  static PyObject* t =
      py::object(py::module_::import("ember._tensor").attr("Tensor")).release().ptr();
  return t;
}

#define EMBER_CHECK_OUT(p) \
  if ((p) == nullptr) return fail(EMBER_ERR_NULL, std::string(__func__) + ": null out-pointer")

// A borrowed ember.Tensor from a handle, or a failing status.
EmberStatus as_tensor(EmberTensor t, const char* where, py::handle* out) {
  if (t == nullptr) return fail(EMBER_ERR_NULL, std::string(where) + ": null tensor handle");
  PyObject* o = reinterpret_cast<PyObject*>(t);
  if (!PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(tensor_type()))) {
    return fail(EMBER_ERR_TYPE, std::string(where) + ": the handle is not a tensor (it is a " +
                                    Py_TYPE(o)->tp_name + ")");
  }
  *out = py::handle(o);
  return EMBER_OK;
}

EmberStatus as_list(EmberList l, const char* where, py::handle* out) {
  if (l == nullptr) return fail(EMBER_ERR_NULL, std::string(where) + ": null list handle");
  PyObject* o = reinterpret_cast<PyObject*>(l);
  if (!PyList_Check(o)) {
    return fail(EMBER_ERR_TYPE, std::string(where) + ": the handle is not a list (it is a " +
                                    Py_TYPE(o)->tp_name + ")");
  }
  *out = py::handle(o);
  return EMBER_OK;
}

// ---- codes ---------------------------------------------------------------------------------------
// Must match ember.library._abi.DTYPE_CODES / DEVICE_CODES (a test compares them).
int32_t dtype_bool() { return 11; }
int32_t dtype_uint8() { return 0; }
int32_t dtype_int8() { return 1; }
int32_t dtype_int16() { return 2; }
int32_t dtype_int32() { return 3; }
int32_t dtype_int64() { return 4; }
int32_t dtype_float16() { return 5; }
int32_t dtype_bfloat16() { return 15; }
int32_t dtype_float32() { return 6; }
int32_t dtype_float64() { return 7; }
int32_t dtype_complex64() { return 9; }
int32_t dtype_complex128() { return 10; }
int32_t device_type_cpu() { return 0; }
int32_t device_type_cuda() { return 1; }
int32_t device_type_meta() { return 9; }
int32_t layout_strided() { return 0; }

EmberStatus dtype_itemsize(int32_t d, int64_t* out) {
  return guarded([&] {
    EMBER_CHECK_OUT(out);
    *out = helpers().attr("itemsize")(d).cast<int64_t>();
    return EMBER_OK;
  });
}

// ---- tensor queries ------------------------------------------------------------------------------
EmberStatus tensor_dim(EmberTensor t, int64_t* out) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_tensor(t, "tensor_dim", &h)) return s;
    EMBER_CHECK_OUT(out);
    *out = static_cast<int64_t>(py::len(h.attr("_shape")));
    return EMBER_OK;
  });
}

EmberStatus int_tuple(EmberTensor t, const char* where, const char* attr, int64_t* out,
                      int64_t cap) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_tensor(t, where, &h)) return s;
    py::tuple v = h.attr(attr);
    // A 0-dim tensor has nothing to write: a null `out` is fine then (std::vector<int64_t>{}.data()
    // is null, and extensions built against older headers pass exactly that).
    if (v.size() == 0) return EMBER_OK;
    EMBER_CHECK_OUT(out);
    if (static_cast<int64_t>(v.size()) > cap) {
      return fail(EMBER_ERR_INDEX, std::string(where) + ": capacity " + std::to_string(cap) +
                                       " is less than the tensor's dim " +
                                       std::to_string(v.size()));
    }
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i].cast<int64_t>();
    return EMBER_OK;
  });
}

EmberStatus tensor_sizes(EmberTensor t, int64_t* out, int64_t cap) {
  return int_tuple(t, "tensor_sizes", "_shape", out, cap);
}
EmberStatus tensor_strides(EmberTensor t, int64_t* out, int64_t cap) {
  return int_tuple(t, "tensor_strides", "_stride", out, cap);
}

template <class T>
EmberStatus query(EmberTensor t, const char* where, T* out, const char* method) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_tensor(t, where, &h)) return s;
    EMBER_CHECK_OUT(out);
    *out = h.attr(method)().template cast<T>();
    return EMBER_OK;
  });
}

EmberStatus tensor_numel(EmberTensor t, int64_t* out) {
  return query<int64_t>(t, "tensor_numel", out, "numel");
}
EmberStatus tensor_storage_offset(EmberTensor t, int64_t* out) {
  return query<int64_t>(t, "tensor_storage_offset", out, "storage_offset");
}

EmberStatus tensor_is_contiguous(EmberTensor t, int32_t* out) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_tensor(t, "tensor_is_contiguous", &h)) return s;
    EMBER_CHECK_OUT(out);
    *out = h.attr("is_contiguous")().cast<bool>() ? 1 : 0;
    return EMBER_OK;
  });
}

EmberStatus tensor_data_ptr(EmberTensor t, void** out) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_tensor(t, "tensor_data_ptr", &h)) return s;
    EMBER_CHECK_OUT(out);
    *out = reinterpret_cast<void*>(h.attr("data_ptr")().cast<uintptr_t>());
    return EMBER_OK;
  });
}

EmberStatus tensor_dtype(EmberTensor t, int32_t* out) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_tensor(t, "tensor_dtype", &h)) return s;
    EMBER_CHECK_OUT(out);
    *out = helpers().attr("dtype_code")(h.attr("dtype")).cast<int32_t>();
    return EMBER_OK;
  });
}

EmberStatus tensor_device(EmberTensor t, int32_t* type, int32_t* index) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_tensor(t, "tensor_device", &h)) return s;
    EMBER_CHECK_OUT(type);
    EMBER_CHECK_OUT(index);
    py::tuple r = helpers().attr("device_code")(h.attr("device"));
    *type = r[0].cast<int32_t>();
    *index = r[1].cast<int32_t>();
    return EMBER_OK;
  });
}

EmberStatus tensor_layout(EmberTensor t, int32_t* out) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_tensor(t, "tensor_layout", &h)) return s;
    EMBER_CHECK_OUT(out);
    *out = layout_strided();  // ember's tensors are all strided
    return EMBER_OK;
  });
}

// ---- creation and references ---------------------------------------------------------------------
py::object int_list(int64_t n, const int64_t* v) {
  py::list l;
  for (int64_t i = 0; i < n; ++i) l.append(v[i]);
  return std::move(l);
}

EmberStatus empty_strided(int64_t ndim, const int64_t* sizes, const int64_t* strides,
                          int32_t dtype, int32_t device_type, int32_t device_index,
                          EmberTensor* out) {
  return guarded([&] {
    EMBER_CHECK_OUT(out);
    if (ndim < 0) return fail(EMBER_ERR_VALUE, "empty_strided: negative ndim");
    if (ndim > 0 && sizes == nullptr) return fail(EMBER_ERR_NULL, "empty_strided: null sizes");
    py::object st = strides ? int_list(ndim, strides) : py::object(py::none());
    py::object r = helpers().attr("empty_strided")(int_list(ndim, sizes), st, dtype, device_type,
                                                   device_index);
    *out = reinterpret_cast<EmberTensor>(r.release().ptr());
    return EMBER_OK;
  });
}

struct Blob {
  void* data;
  EmberDeleter deleter;
  void* context;
};

EmberStatus from_blob(void* data, int64_t ndim, const int64_t* sizes, const int64_t* strides,
                      int32_t dtype, int32_t device_type, int32_t device_index,
                      EmberDeleter deleter, void* context, EmberTensor* out) {
  return guarded([&] {
    EMBER_CHECK_OUT(out);
    if (ndim < 0) return fail(EMBER_ERR_VALUE, "from_blob: negative ndim");
    if (ndim > 0 && sizes == nullptr) return fail(EMBER_ERR_NULL, "from_blob: null sizes");
    if (device_type != device_type_cpu()) {
      return fail(EMBER_ERR_VALUE, "from_blob: only CPU memory can be wrapped (device type " +
                                       std::to_string(device_type) + ")");
    }
    (void)device_index;
    py::object sz = int_list(ndim, sizes);
    py::object st;
    if (strides) {
      st = int_list(ndim, strides);
    } else {
      py::list c;
      int64_t acc = 1;
      std::vector<int64_t> tmp(ndim);
      for (int64_t i = ndim - 1; i >= 0; --i) {
        tmp[i] = acc;
        acc *= sizes[i] > 1 ? sizes[i] : 1;
      }
      st = int_list(ndim, tmp.data());
    }
    int64_t nbytes = helpers().attr("blob_extent")(sz, st, dtype).cast<int64_t>();
    if (data == nullptr && nbytes > 0) return fail(EMBER_ERR_NULL, "from_blob: null data");
    // The capsule owns the memory: numpy's array keeps it alive, the tensor's storage the array.
    py::capsule owner(new Blob{data, deleter, context}, [](void* p) {
      Blob* b = static_cast<Blob*>(p);
      if (b->deleter) b->deleter(b->data, b->context);
      delete b;
    });
    static uint8_t dummy = 0;
    py::array_t<uint8_t> raw({static_cast<py::ssize_t>(nbytes)}, {1},
                             data ? static_cast<uint8_t*>(data) : &dummy, owner);
    py::object r = helpers().attr("from_buffer")(raw, sz, st, dtype);
    *out = reinterpret_cast<EmberTensor>(r.release().ptr());
    return EMBER_OK;
  });
}

EmberStatus tensor_retain(EmberTensor t) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_tensor(t, "tensor_retain", &h)) return s;
    h.inc_ref();
    return EMBER_OK;
  });
}

EmberStatus tensor_release(EmberTensor t) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_tensor(t, "tensor_release", &h)) return s;
    h.dec_ref();
    return EMBER_OK;
  });
}

// ---- lists and strings ---------------------------------------------------------------------------
EmberStatus list_new(EmberList* out) {
  return guarded([&] {
    EMBER_CHECK_OUT(out);
    *out = reinterpret_cast<EmberList>(py::list().release().ptr());
    return EMBER_OK;
  });
}

EmberStatus list_size(EmberList l, int64_t* out) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_list(l, "list_size", &h)) return s;
    EMBER_CHECK_OUT(out);
    *out = static_cast<int64_t>(PyList_GET_SIZE(h.ptr()));
    return EMBER_OK;
  });
}

EmberStatus list_append_tensor(EmberList l, EmberTensor t) {
  return guarded([&] {
    py::handle h, x;
    if (EmberStatus s = as_list(l, "list_append_tensor", &h)) return s;
    if (EmberStatus s = as_tensor(t, "list_append_tensor", &x)) return s;
    h.cast<py::list>().append(x);
    return EMBER_OK;
  });
}

EmberStatus list_append_int(EmberList l, int64_t v) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_list(l, "list_append_int", &h)) return s;
    h.cast<py::list>().append(v);
    return EMBER_OK;
  });
}

EmberStatus list_append_float(EmberList l, double v) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_list(l, "list_append_float", &h)) return s;
    h.cast<py::list>().append(v);
    return EMBER_OK;
  });
}

EmberStatus list_item(EmberList l, int64_t i, const char* where, py::handle* out) {
  py::handle h;
  if (EmberStatus s = as_list(l, where, &h)) return s;
  int64_t n = PyList_GET_SIZE(h.ptr());
  if (i < 0 || i >= n) {
    return fail(EMBER_ERR_INDEX, std::string(where) + ": index " + std::to_string(i) +
                                     " is out of range for a list of " + std::to_string(n));
  }
  *out = PyList_GET_ITEM(h.ptr(), i);
  return EMBER_OK;
}

EmberStatus list_get_tensor(EmberList l, int64_t i, EmberTensor* out) {
  return guarded([&] {
    py::handle x, t;
    if (EmberStatus s = list_item(l, i, "list_get_tensor", &x)) return s;
    EMBER_CHECK_OUT(out);
    if (EmberStatus s = as_tensor(reinterpret_cast<EmberTensor>(x.ptr()), "list_get_tensor", &t))
      return s;
    t.inc_ref();
    *out = reinterpret_cast<EmberTensor>(t.ptr());
    return EMBER_OK;
  });
}

EmberStatus list_get_int(EmberList l, int64_t i, int64_t* out) {
  return guarded([&] {
    py::handle x;
    if (EmberStatus s = list_item(l, i, "list_get_int", &x)) return s;
    EMBER_CHECK_OUT(out);
    if (!PyLong_Check(x.ptr())) return fail(EMBER_ERR_TYPE, "list_get_int: item is not an int");
    *out = x.cast<int64_t>();
    return EMBER_OK;
  });
}

EmberStatus list_get_float(EmberList l, int64_t i, double* out) {
  return guarded([&] {
    py::handle x;
    if (EmberStatus s = list_item(l, i, "list_get_float", &x)) return s;
    EMBER_CHECK_OUT(out);
    if (!PyFloat_Check(x.ptr()) && !PyLong_Check(x.ptr()))
      return fail(EMBER_ERR_TYPE, "list_get_float: item is not a number");
    *out = x.cast<double>();
    return EMBER_OK;
  });
}

EmberStatus list_release(EmberList l) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus s = as_list(l, "list_release", &h)) return s;
    h.dec_ref();
    return EMBER_OK;
  });
}

EmberStatus string_new(const char* s, EmberString* out) {
  return guarded([&] {
    EMBER_CHECK_OUT(out);
    if (s == nullptr) return fail(EMBER_ERR_NULL, "string_new: null string");
    *out = reinterpret_cast<EmberString>(py::str(s).release().ptr());
    return EMBER_OK;
  });
}

EmberStatus as_string(EmberString s, const char* where, py::handle* out) {
  if (s == nullptr) return fail(EMBER_ERR_NULL, std::string(where) + ": null string handle");
  PyObject* o = reinterpret_cast<PyObject*>(s);
  if (!PyUnicode_Check(o)) {
    return fail(EMBER_ERR_TYPE, std::string(where) + ": the handle is not a string (it is a " +
                                    Py_TYPE(o)->tp_name + ")");
  }
  *out = o;
  return EMBER_OK;
}

EmberStatus string_data(EmberString s, const char** out) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus st = as_string(s, "string_data", &h)) return st;
    EMBER_CHECK_OUT(out);
    *out = PyUnicode_AsUTF8(h.ptr());
    if (*out == nullptr) throw py::error_already_set();
    return EMBER_OK;
  });
}

EmberStatus string_release(EmberString s) {
  return guarded([&] {
    py::handle h;
    if (EmberStatus st = as_string(s, "string_release", &h)) return st;
    h.dec_ref();
    return EMBER_OK;
  });
}

// ---- the boxed stack -----------------------------------------------------------------------------
// Type codes: ember.library._abi.T_*.
enum : int {
  T_TENSOR = 1, T_INT, T_FLOAT, T_BOOL, T_DTYPE, T_STR, T_INTLIST, T_FLOATLIST, T_TENSORLIST,
  T_SCALAR, T_DEVICE, T_BOOLLIST, OPTIONAL = 0x100
};

struct Temps {  // what a boxed call's slots point into, alive for the call
  std::vector<py::object> objects;
  std::deque<EmberSlot> cells;
};

struct BoxError : std::runtime_error {
  EmberStatus status;
  BoxError(EmberStatus s, const std::string& m) : std::runtime_error(m), status(s) {}
};

// A Python number as T, or a TypeError naming the op and the argument (not pybind11's cast
// message, which names neither).
template <class T>
T scalar(py::handle v, const std::string& what, const char* kind) {
  // a float for an int (or a str for anything) would be a silent truncation or a cast error
  bool ok = std::is_same_v<T, int64_t> ? !PyFloat_Check(v.ptr()) && PyIndex_Check(v.ptr())
                                       : PyNumber_Check(v.ptr()) != 0;
  if (ok) {
    try {
      return v.cast<T>();
    } catch (const py::cast_error&) {
    }
  }
  throw BoxError(EMBER_ERR_TYPE, what + ": expected " + kind + ", got " + Py_TYPE(v.ptr())->tp_name);
}

// A Python value -> a slot. new_ref: the slot owns a reference (results handed to C).
EmberSlot to_slot(int type, py::handle v, Temps* temps, bool new_ref, const std::string& what) {
  bool optional = type & OPTIONAL;
  int base = type & 0xff;
  if (v.is_none()) {
    if (optional || base == T_TENSOR) return 0;  // a None tensor result is an undefined tensor
    throw BoxError(EMBER_ERR_TYPE, what + ": None for a non-optional argument");
  }
  if (optional && base != T_TENSOR) {
    if (temps == nullptr) throw BoxError(EMBER_ERR_TYPE, what + ": optional results unsupported");
    temps->cells.push_back(to_slot(base, v, temps, new_ref, what));
    return ember_slot_from_ptr(&temps->cells.back());
  }
  auto keep = [&](py::object o) -> EmberSlot {
    PyObject* p = o.ptr();
    if (new_ref) {
      o.release();
    } else {
      temps->objects.push_back(std::move(o));
    }
    return ember_slot_from_ptr(p);
  };
  switch (base) {
    case T_TENSOR:
      if (!PyObject_TypeCheck(v.ptr(), reinterpret_cast<PyTypeObject*>(tensor_type())))
        throw BoxError(EMBER_ERR_TYPE, what + ": expected a Tensor, got " + Py_TYPE(v.ptr())->tp_name);
      return keep(py::reinterpret_borrow<py::object>(v));
    case T_INT:
      return static_cast<EmberSlot>(scalar<int64_t>(v, what, "an int"));
    case T_BOOL:
      return scalar<bool>(v, what, "a bool") ? 1 : 0;
    case T_FLOAT:
    case T_SCALAR:
      return ember_slot_from_double(scalar<double>(v, what, "a float"));
    case T_DTYPE:
      return static_cast<EmberSlot>(helpers().attr("dtype_code")(v).cast<int64_t>());
    case T_DEVICE: {
      py::tuple r = helpers().attr("device_code")(v);
      return ember_slot_from_device(r[0].cast<int32_t>(), r[1].cast<int32_t>());
    }
    case T_STR:
      if (!PyUnicode_Check(v.ptr()))
        throw BoxError(EMBER_ERR_TYPE, what + ": expected a str, got " + Py_TYPE(v.ptr())->tp_name);
      return keep(py::reinterpret_borrow<py::object>(v));
    case T_INTLIST:
    case T_FLOATLIST:
    case T_BOOLLIST:
    case T_TENSORLIST: {
      PyObject* l = PySequence_List(v.ptr());
      if (l == nullptr) throw py::error_already_set();
      return keep(py::reinterpret_steal<py::object>(l));
    }
    default:
      throw BoxError(EMBER_ERR_TYPE, what + ": this argument type has no stable ABI boxing");
  }
}

// A slot -> a Python value. steal: the slot holds a reference that becomes Python's.
py::object from_slot(int type, EmberSlot s, bool steal, const std::string& what) {
  bool optional = type & OPTIONAL;
  int base = type & 0xff;
  if (optional && base != T_TENSOR) {
    if (s == 0) return py::none();
    return from_slot(base, *static_cast<EmberSlot*>(ember_slot_to_ptr(s)), steal, what);
  }
  auto obj = [&](PyTypeObject* want, const char* kind) -> py::object {
    PyObject* p = static_cast<PyObject*>(ember_slot_to_ptr(s));
    if (p == nullptr) {
      if (base == T_TENSOR && (optional || steal)) return py::none();
      throw BoxError(EMBER_ERR_NULL, what + ": null " + kind + " handle");
    }
    if (!PyObject_TypeCheck(p, want))
      throw BoxError(EMBER_ERR_TYPE, what + ": expected a " + kind + " handle, got a " +
                                         Py_TYPE(p)->tp_name);
    return steal ? py::reinterpret_steal<py::object>(p) : py::reinterpret_borrow<py::object>(p);
  };
  switch (base) {
    case T_TENSOR:
      return obj(reinterpret_cast<PyTypeObject*>(tensor_type()), "tensor");
    case T_INT:
      return py::int_(static_cast<int64_t>(s));
    case T_BOOL:
      return py::bool_(s != 0);
    case T_FLOAT:
    case T_SCALAR:
      return py::float_(ember_slot_to_double(s));
    case T_DTYPE:
      return helpers().attr("dtype_of")(static_cast<int64_t>(s));
    case T_DEVICE:
      return helpers().attr("device_of")(static_cast<int32_t>(s >> 32),
                                         static_cast<int32_t>(static_cast<uint32_t>(s)));
    case T_STR:
      return obj(&PyUnicode_Type, "string");
    case T_INTLIST:
    case T_FLOATLIST:
    case T_BOOLLIST:
    case T_TENSORLIST: {
      py::object l = obj(&PyList_Type, "list");
      return py::list(l);  // a copy: the op must not see later changes to the C side's list
    }
    default:
      throw BoxError(EMBER_ERR_TYPE, what + ": this argument type has no stable ABI boxing");
  }
}

EmberStatus call_op(const char* name, const char* overload, EmberSlot* stack, int64_t num_args,
                    int64_t num_outputs) {
  return guarded([&]() -> EmberStatus {
    if (name == nullptr) return fail(EMBER_ERR_NULL, "call_op: null op name");
    if (stack == nullptr && (num_args > 0 || num_outputs > 0))
      return fail(EMBER_ERR_NULL, "call_op: null stack");
    py::object op = helpers().attr("lookup")(name, overload ? overload : "");
    py::tuple spec = helpers().attr("spec")(op);
    py::tuple arg_types = spec[0], ret_types = spec[1];
    int64_t required = spec[2].cast<int64_t>();
    std::string qual = py::str(op.attr("qualname"));
    int64_t nargs = static_cast<int64_t>(arg_types.size());
    if (num_args < required || num_args > nargs) {
      return fail(EMBER_ERR_VALUE, "call_op(" + qual + "): got " + std::to_string(num_args) +
                                       " arguments, the schema takes " + std::to_string(required) +
                                       " to " + std::to_string(nargs));
    }
    if (num_outputs < static_cast<int64_t>(ret_types.size())) {
      return fail(EMBER_ERR_VALUE, "call_op(" + qual + "): num_outputs " +
                                       std::to_string(num_outputs) + " < the op's " +
                                       std::to_string(ret_types.size()) + " returns");
    }
    try {
      py::tuple args(num_args);
      for (int64_t i = 0; i < num_args; ++i) {
        args[i] = from_slot(arg_types[i].cast<int>(), stack[i], false,
                            "call_op(" + qual + ") argument " + std::to_string(i));
      }
      py::object r = helpers().attr("call_boxed")(op, args);
      size_t nret = ret_types.size();
      if (nret == 1) {
        stack[0] = to_slot(ret_types[0].cast<int>(), r, nullptr, true, qual + " result");
      } else if (nret > 1) {
        py::tuple rs(r);
        for (size_t k = 0; k < nret; ++k)
          stack[k] = to_slot(ret_types[k].cast<int>(), rs[k], nullptr, true, qual + " result");
      }
    } catch (const BoxError& e) {
      return fail(e.status, e.what());
    }
    return EMBER_OK;
  });
}

// ---- library registration ------------------------------------------------------------------------
EmberStatus library_define(const char* ns, const char* schema) {
  return guarded([&] {
    if (ns == nullptr || schema == nullptr) return fail(EMBER_ERR_NULL, "library_define: null");
    helpers().attr("define")(ns, schema);
    return EMBER_OK;
  });
}

EmberStatus library_impl(const char* ns, const char* name, const char* device,
                         EmberBoxedKernel kernel, void* user_data) {
  return guarded([&] {
    if (ns == nullptr || name == nullptr || device == nullptr || kernel == nullptr)
      return fail(EMBER_ERR_NULL, "library_impl: null argument");
    helpers().attr("impl")(ns, name, device, reinterpret_cast<uintptr_t>(kernel),
                           reinterpret_cast<uintptr_t>(user_data));
    return EMBER_OK;
  });
}

EmberStatus library_register_autograd(const char* ns, const char* name, const char* backward) {
  return guarded([&] {
    if (ns == nullptr || name == nullptr || backward == nullptr)
      return fail(EMBER_ERR_NULL, "library_register_autograd: null argument");
    helpers().attr("register_autograd")(ns, name, backward);
    return EMBER_OK;
  });
}

// ---- the table -----------------------------------------------------------------------------------
#if EMBER_CORE_ABI_MINOR > EMBER_ABI_VERSION_MINOR
// A core from the future (compatibility tests): entries appended after this header's last one.
int32_t future_entry() { return 42; }
struct CoreTable {
  EmberAbiTable base;
  int32_t (*future_entry)(void);
};
#else
struct CoreTable {
  EmberAbiTable base;
};
#endif

CoreTable make_table() {
  CoreTable c;
  std::memset(&c, 0, sizeof c);
  EmberAbiTable& t = c.base;
  t.major = EMBER_ABI_VERSION_MAJOR;
  t.minor = EMBER_CORE_ABI_MINOR;
  t.last_error = last_error;
  t.clear_error = clear_error;
  t.dtype_bool = dtype_bool;
  t.dtype_uint8 = dtype_uint8;
  t.dtype_int8 = dtype_int8;
  t.dtype_int16 = dtype_int16;
  t.dtype_int32 = dtype_int32;
  t.dtype_int64 = dtype_int64;
  t.dtype_float16 = dtype_float16;
  t.dtype_bfloat16 = dtype_bfloat16;
  t.dtype_float32 = dtype_float32;
  t.dtype_float64 = dtype_float64;
  t.dtype_complex64 = dtype_complex64;
  t.dtype_complex128 = dtype_complex128;
  t.dtype_itemsize = dtype_itemsize;
  t.device_type_cpu = device_type_cpu;
  t.device_type_meta = device_type_meta;
  t.device_type_cuda = device_type_cuda;
  t.layout_strided = layout_strided;
  t.tensor_dim = tensor_dim;
  t.tensor_sizes = tensor_sizes;
  t.tensor_strides = tensor_strides;
  t.tensor_numel = tensor_numel;
  t.tensor_dtype = tensor_dtype;
  t.tensor_device = tensor_device;
  t.tensor_layout = tensor_layout;
  t.tensor_data_ptr = tensor_data_ptr;
  t.tensor_storage_offset = tensor_storage_offset;
  t.tensor_is_contiguous = tensor_is_contiguous;
  t.empty_strided = empty_strided;
  t.tensor_retain = tensor_retain;
  t.tensor_release = tensor_release;
  t.list_new = list_new;
  t.list_size = list_size;
  t.list_append_tensor = list_append_tensor;
  t.list_append_int = list_append_int;
  t.list_append_float = list_append_float;
  t.list_get_tensor = list_get_tensor;
  t.list_get_int = list_get_int;
  t.list_get_float = list_get_float;
  t.list_release = list_release;
  t.string_new = string_new;
  t.string_data = string_data;
  t.string_release = string_release;
  t.call_op = call_op;
  t.library_define = library_define;
  t.library_impl = library_impl;
  t.size = static_cast<uint32_t>(EMBER_ABI_TABLE_SIZE_1_0);
#if EMBER_CORE_ABI_MINOR >= 1
  t.from_blob = from_blob;
  t.library_register_autograd = library_register_autograd;
  t.set_error = set_error;
  t.size = static_cast<uint32_t>(EMBER_ABI_TABLE_SIZE_1_1);
#endif
#if EMBER_CORE_ABI_MINOR > EMBER_ABI_VERSION_MINOR
  c.future_entry = future_entry;
  t.size = static_cast<uint32_t>(sizeof(CoreTable));
#endif
  return c;
}

CoreTable g_table = make_table();

// Python kernel -> C boxed kernel: box args by the schema's types, call, unbox the results.
// names: the schema's argument names, for errors (None: their positions).
py::object call_kernel(uintptr_t fn, uintptr_t user_data, py::tuple arg_types,
                       py::tuple ret_types, py::tuple args, const std::string& qual,
                       py::object names) {
  size_t n = args.size(), nout = ret_types.size();
  std::vector<EmberSlot> stack(n > nout ? n : nout);
  Temps temps;
  try {
    for (size_t i = 0; i < n; ++i) {
      std::string arg = names.is_none() ? std::to_string(i)
                                        : "'" + py::str(names[py::int_(i)]).cast<std::string>() + "'";
      stack[i] = to_slot(arg_types[i].cast<int>(), args[i], &temps, false,
                         qual + " argument " + arg);
    }
  } catch (const BoxError& e) {
    throw py::type_error(e.what());
  }
  g_error.clear();
  EmberStatus s = reinterpret_cast<EmberBoxedKernel>(fn)(stack.data(), static_cast<int64_t>(n),
                                                         static_cast<int64_t>(nout),
                                                         reinterpret_cast<void*>(user_data));
  if (s != EMBER_OK) {
    std::string msg = g_error.empty() ? "kernel failed with status " + std::to_string(s) : g_error;
    g_error.clear();
    throw std::runtime_error(qual + ": " + msg);
  }
  try {
    if (nout == 0) return py::none();
    if (nout == 1) return from_slot(ret_types[0].cast<int>(), stack[0], true, qual + " output");
    py::tuple r(nout);
    for (size_t k = 0; k < nout; ++k)
      r[k] = from_slot(ret_types[k].cast<int>(), stack[k], true, qual + " output");
    return std::move(r);
  } catch (const BoxError& e) {
    throw std::runtime_error(e.what());
  }
}

}  // namespace

void init_abi(py::module_& m) {
  m.attr("_ABI_TABLE") = py::capsule(static_cast<void*>(&g_table.base), "ember._C._ABI_TABLE");
  m.def("abi_version", [] { return py::make_tuple(g_table.base.major, g_table.base.minor); },
        "(major, minor) of the stable ABI this core offers");
  m.def("_call_kernel", &call_kernel, "run a boxed C kernel on Python arguments (internal)",
        py::arg("fn"), py::arg("user_data"), py::arg("arg_types"), py::arg("ret_types"),
        py::arg("args"), py::arg("qual"), py::arg("names") = py::none());
  m.def("_abi_table_address", [] { return reinterpret_cast<uintptr_t>(&g_table.base); },
        "address of the EmberAbiTable (for C tests driven through ctypes)");
}
