// In-place ops and factories on the native hit path (viewpath.cpp hands them here), CPU only
// (a factory given another device goes on to devplan.cpp's `devplan_factory`).
//
//   x.add_(y) ... (an in-place pointwise op): its functional op's native hit (fastpath.cpp) on
//       the same arguments, written into x (memcpy when both are contiguous), x's version bumped
//   zero_, fill_: the op's cpu kernel on x's array, x's version bumped
//   copy_: numpy's copyto into x's array (PyTorch's casts), x's version bumped
//   zeros / ones / empty / full on the CPU: the op's cpu kernel, wrapped as dispatch wraps it
//
// As `_dispatch.execute` / `_inplace` / `copy_into` do it; anything else goes to Python's `call`
// (the reference, which raises every error): autograd recording (grad on and an input requires
// grad: `_record_inplace` checks leaves and views), a written tensor with a stride-0 dim,
// broadcasting into x, another device, float8, a kernel of the in-place op's own, a device
// given to a factory that is not the CPU.

#include "fastpath.h"
#include "slots.h"

#include <cstring>
#include <unordered_map>

namespace py = pybind11;
using ember_native::member;

PyObject* fastpath_compute(PyObject* op, PyObject* args);  // fastpath.cpp: a hit, or Py_None
PyObject* devplan_factory(PyObject* op, PyObject* args, PyObject* dev);  // devplan.cpp

namespace {

// numpy's PyArrayObject_fields, as fastpath.cpp reads them (it checks the layout at init)
struct NpArray {
  PyObject_HEAD
  char* data;
  int nd;
  Py_ssize_t* dimensions;
  Py_ssize_t* strides;
  PyObject* base;
  PyObject* descr;
  int flags;
};
constexpr int kCContiguous = 0x0001;

// the kinds (ember/_native.py's view_kind gives the same numbers)
enum Kind { kInplace = 50, kZero = 51, kFill = 52, kCopy = 53, kFactory = 60 };

struct MGlobals : ember_native::TensorSlots {  // (+ Tensor's slots' offsets)
  bool ready = false;
  PyTypeObject* tensor = nullptr;
  PyTypeObject* ndarray = nullptr;
  PyObject* cpu = nullptr;          // Device("cpu")
  PyObject* state = nullptr;
  PyObject* dispatch = nullptr;     // _dispatch's globals (autograd_hook)
  PyObject* copyto = nullptr;       // numpy.copyto
  PyObject* wrap = nullptr;         // _dispatch._wrap(op, r, args)
  PyObject* f8a = nullptr, *f8b = nullptr;
  PyObject *s_grad, *s_hook, *s_rg, *s_np, *s_storage, *s_kernels, *s_cpu, *s_inplace_of;
  PyObject *s_stack, *s_default, *s_unsafe, *kw_casting, *one;
  long hits = 0;
};
MGlobals M;
enum Slot { ST, SHAPE, STRIDE, OFFSET, DTYPE, DEVICE, NPC };  // (TensorSlots::at's order)

inline PyObject* slot(PyObject* t, Slot s) { return member(t, M.at(s)); }

bool is_tensor(PyObject* v) { return PyObject_TypeCheck(v, M.tensor); }

bool plain_tensor(PyObject* v) {  // Tensor, or a subclass without its own dispatch (Parameter)
  PyTypeObject* t = Py_TYPE(v);
  if (t == M.tensor) return true;
  static std::unordered_map<PyTypeObject*, bool> known;
  auto it = known.find(t);
  if (it != known.end()) return it->second;
  PyObject* o = reinterpret_cast<PyObject*>(t);
  bool plain = PyType_IsSubtype(t, M.tensor) && !PyObject_HasAttrString(o, "__ember_dispatch__") &&
               !PyObject_HasAttrString(o, "__ember_function__");
  Py_INCREF(t);
  known.emplace(t, plain);
  return plain;
}

bool requires_grad(PyObject* t) {
  PyObject** dp = _PyObject_GetDictPtr(t);
  if (dp == nullptr || *dp == nullptr) return false;
  PyObject* v = PyDict_GetItem(*dp, M.s_rg);
  return v != nullptr && PyObject_IsTrue(v) == 1;
}

// Whether autograd records this call (grad on, its hook set, a tensor argument requires grad);
// -1: an error.
int records(PyObject* args) {
  PyObject* on = PyObject_GetAttr(M.state, M.s_grad);
  if (on == nullptr) return -1;
  Py_DECREF(on);
  if (on != Py_True) return 0;
  PyObject* hook = PyDict_GetItemWithError(M.dispatch, M.s_hook);
  if (hook == nullptr) return PyErr_Occurred() ? -1 : 0;
  if (hook == Py_None) return 0;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    PyObject* v = PyTuple_GET_ITEM(args, i);
    if (is_tensor(v) && requires_grad(v)) return 1;
  }
  return 0;
}

// A CPU tensor x may be written here: no stride-0 dim of size > 1 (unless `overlap_ok`), not
// float8, exact ints for its geometry.
bool writable(PyObject* x, bool overlap_ok) {
  if (slot(x, DEVICE) != M.cpu) return false;
  PyObject* dt = slot(x, DTYPE);
  if (dt == M.f8a || dt == M.f8b) return false;
  PyObject* sh = slot(x, SHAPE);
  PyObject* st = slot(x, STRIDE);
  if (!PyTuple_CheckExact(sh) || !PyTuple_CheckExact(st)) return false;
  if (overlap_ok) return true;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(st); ++i) {
    PyObject* s = PyTuple_GET_ITEM(st, i);
    if (!PyLong_CheckExact(s)) return false;
    if (PyLong_AsLong(s) == 0) {
      PyObject* n = PyTuple_GET_ITEM(sh, i);
      if (!PyLong_CheckExact(n) || PyLong_AsLong(n) > 1) return false;
    }
  }
  return true;
}

PyObject* array_of(PyObject* t) {  // the numpy array behind a CPU tensor: new reference
  PyObject* a = slot(t, NPC);
  if (a != nullptr && a != Py_None) {
    Py_INCREF(a);
    return a;
  }
  return PyObject_GetAttr(t, M.s_np);
}

int bump(PyObject* t) {  // Tensor._bump: storage.version += 1 (the storage made if need be)
  PyObject* st = slot(t, ST);
  if (st == nullptr || st == Py_None) {
    st = PyObject_GetAttr(t, M.s_storage);
    if (st == nullptr) return -1;
    Py_DECREF(st);  // (the tensor holds it now)
    st = slot(t, ST);
  }
  PyObject** v = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(st) + M.st_version);
  PyObject* n = PyNumber_Add(*v, M.one);
  if (n == nullptr) return -1;
  Py_XSETREF(*v, n);
  return 0;
}

PyObject* done(PyObject* self) {
  if (bump(self) != 0) return nullptr;
  ++M.hits;
  Py_INCREF(self);
  return self;
}

// A plain Tensor with self's slots (for a plain subclass, nn.Parameter: the pointwise hit
// path takes exact Tensors only): new reference.
PyObject* shadow(PyObject* self) {
  PyObject* t = M.tensor->tp_alloc(M.tensor, 0);
  if (t == nullptr) return nullptr;
  for (int s = ST; s <= NPC; ++s) {
    PyObject* v = slot(self, static_cast<Slot>(s));
    ember_native::init_member(t, M.at(s), v != nullptr ? v : Py_None);
  }
  return t;
}

// np.copyto(dst, src, casting="unsafe"), or a memcpy when both are contiguous of one dtype.
int copy_array(PyObject* dst, PyObject* src, bool src_fresh) {
  auto* d = reinterpret_cast<NpArray*>(dst);
  auto* s = reinterpret_cast<NpArray*>(src);
  if (src_fresh && Py_TYPE(dst) == M.ndarray && Py_TYPE(src) == M.ndarray &&
      d->descr == s->descr && (d->flags & kCContiguous) && (s->flags & kCContiguous) &&
      d->nd == s->nd) {
    Py_ssize_t n = 1;
    for (int i = 0; i < d->nd; ++i) {
      if (d->dimensions[i] != s->dimensions[i]) return -2;
      n *= d->dimensions[i];
    }
    PyObject* item = PyObject_GetAttrString(d->descr, "itemsize");
    if (item == nullptr) return -1;
    Py_ssize_t isz = PyLong_AsSsize_t(item);
    Py_DECREF(item);
    if (n > 0) std::memcpy(d->data, s->data, static_cast<size_t>(n * isz));
    return 0;
  }
  PyObject* av[3] = {dst, src, M.s_unsafe};
  PyObject* r = PyObject_Vectorcall(M.copyto, av, 2, M.kw_casting);
  if (r == nullptr) return -1;
  Py_DECREF(r);
  return 0;
}

// x.add_(y) and the other in-place pointwise ops.
PyObject* inplace_pointwise(PyObject* op, PyObject* args) {
  PyObject* self = PyTuple_GET_ITEM(args, 0);
  if (!writable(self, false)) return Py_None;
  PyObject* kernels = PyObject_GetAttr(op, M.s_kernels);  // an in-place kernel of its own: Python
  if (kernels == nullptr) return nullptr;
  int own = PyDict_Check(kernels) ? PyDict_Contains(kernels, M.s_cpu) : 1;
  Py_DECREF(kernels);
  if (own != 0) return own < 0 ? nullptr : Py_None;
  PyObject* fop = PyObject_GetAttr(op, M.s_inplace_of);
  if (fop == nullptr) return nullptr;
  PyObject* cargs = args;
  Py_INCREF(cargs);
  if (Py_TYPE(self) != M.tensor) {  // nn.Parameter: its slots on a plain Tensor
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject* c = PyTuple_New(n);
    PyObject* sh = c == nullptr ? nullptr : shadow(self);
    if (sh == nullptr) {
      Py_XDECREF(c);
      Py_DECREF(fop);
      Py_DECREF(cargs);
      return nullptr;
    }
    PyTuple_SET_ITEM(c, 0, sh);
    for (Py_ssize_t i = 1; i < n; ++i) {
      Py_INCREF(PyTuple_GET_ITEM(args, i));
      PyTuple_SET_ITEM(c, i, PyTuple_GET_ITEM(args, i));
    }
    Py_SETREF(cargs, c);
  }
  PyObject* r = fastpath_compute(fop, cargs);
  Py_DECREF(fop);
  Py_DECREF(cargs);
  if (r == nullptr || r == Py_None) return r;
  // the result must be x's shape and dtype (broadcasting into x, a promotion: Python decides)
  int same = PyObject_RichCompareBool(slot(r, SHAPE), slot(self, SHAPE), Py_EQ);
  PyObject* src = slot(r, NPC);
  if (same != 1 || slot(r, DTYPE) != slot(self, DTYPE) || src == nullptr || src == Py_None) {
    Py_DECREF(r);
    return same < 0 ? nullptr : Py_None;
  }
  PyObject* dst = array_of(self);
  int rc = dst == nullptr ? -1 : copy_array(dst, src, true);
  Py_XDECREF(dst);
  Py_DECREF(r);
  if (rc == -2) return Py_None;
  if (rc != 0) return nullptr;
  return done(self);
}

// zero_(x) / fill_(x, value): the op's cpu kernel on x's array.
PyObject* fill(int kind, PyObject* op, PyObject* args) {
  PyObject* self = PyTuple_GET_ITEM(args, 0);
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n != (kind == kFill ? 2 : 1) || !writable(self, true)) return Py_None;
  if (kind == kFill) {
    PyTypeObject* t = Py_TYPE(PyTuple_GET_ITEM(args, 1));
    if (t != &PyFloat_Type && t != &PyLong_Type && t != &PyBool_Type) return Py_None;
  }
  PyObject* kernels = PyObject_GetAttr(op, M.s_kernels);
  if (kernels == nullptr) return nullptr;
  PyObject* k = PyDict_Check(kernels) ? PyDict_GetItemWithError(kernels, M.s_cpu) : nullptr;
  Py_XINCREF(k);
  Py_DECREF(kernels);
  if (k == nullptr) return PyErr_Occurred() ? nullptr : Py_None;
  PyObject* a = array_of(self);
  PyObject* r = nullptr;
  if (a != nullptr) {
    PyObject* av[2] = {a, kind == kFill ? PyTuple_GET_ITEM(args, 1) : nullptr};
    r = PyObject_Vectorcall(k, av, kind == kFill ? 2 : 1, nullptr);
  }
  Py_XDECREF(a);
  Py_DECREF(k);
  if (r == nullptr) return nullptr;  // the kernel's error, as the Python path raises it
  Py_DECREF(r);
  return done(self);
}

// copy_(x, src, non_blocking): a CPU source of x's very shape.
PyObject* copy(PyObject* args) {
  if (PyTuple_GET_SIZE(args) != 3) return Py_None;
  PyObject* self = PyTuple_GET_ITEM(args, 0);
  PyObject* src = PyTuple_GET_ITEM(args, 1);
  if (!plain_tensor(src) || !writable(self, false) || !writable(src, true)) return Py_None;
  int same = PyObject_RichCompareBool(slot(src, SHAPE), slot(self, SHAPE), Py_EQ);
  if (same != 1) return same < 0 ? nullptr : Py_None;
  PyObject* d = array_of(self);
  PyObject* s = d == nullptr ? nullptr : array_of(src);
  int rc = s == nullptr ? -1 : copy_array(d, s, false);
  Py_XDECREF(d);
  Py_XDECREF(s);
  if (rc != 0) return rc == -2 ? Py_None : nullptr;
  return done(self);
}

// zeros / ones / empty / full whose device is the CPU (an explicit one, or no default set);
// with another device given (zeros(..., device="cuda"), arange too): devplan.cpp's factory path.
PyObject* factory(int di, PyObject* op, PyObject* args) {
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (di < 1 || di + 1 >= n) return Py_None;
  PyObject* dev = PyTuple_GET_ITEM(args, di);
  if (dev == Py_None) {  // as find_device: `with ember.device(...)`, set_default_device
    PyObject* stack = PyObject_GetAttr(M.state, M.s_stack);
    if (stack == nullptr) return nullptr;
    bool empty = PyList_Check(stack) && PyList_GET_SIZE(stack) == 0;
    Py_DECREF(stack);
    PyObject* dflt = PyObject_GetAttr(M.state, M.s_default);
    if (dflt == nullptr) return nullptr;
    Py_DECREF(dflt);
    if (!empty || dflt != Py_None) return Py_None;
  }
  bool other = dev != Py_None && dev != M.cpu &&
               !(PyUnicode_CheckExact(dev) && PyUnicode_CompareWithASCIIString(dev, "cpu") == 0);
  PyObject* layout = PyTuple_GET_ITEM(args, di - 1);
  PyObject* pin = PyTuple_GET_ITEM(args, di + 1);
  if (layout != Py_None || (pin != Py_False && pin != Py_None)) return Py_None;
  if (other) return devplan_factory(op, args, dev);  // (cuda: its plan, else its slot)
  PyObject* size = PyTuple_GET_ITEM(args, 0);
  if (!PyTuple_CheckExact(size) && !PyList_CheckExact(size)) return Py_None;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(size); ++i)
    if (!PyLong_CheckExact(PySequence_Fast_ITEMS(size)[i])) return Py_None;  // (SymInts)
  PyObject* kernels = PyObject_GetAttr(op, M.s_kernels);
  if (kernels == nullptr) return nullptr;
  PyObject* k = PyDict_Check(kernels) ? PyDict_GetItemWithError(kernels, M.s_cpu) : nullptr;
  Py_XINCREF(k);
  Py_DECREF(kernels);
  if (k == nullptr) return PyErr_Occurred() ? nullptr : Py_None;
  PyObject* r = PyObject_Vectorcall(k, &PyTuple_GET_ITEM(args, 0), n, nullptr);
  Py_DECREF(k);
  if (r == nullptr) return nullptr;  // the kernel's error (a negative size), as Python's
  PyObject* wv[3] = {op, r, args};
  PyObject* t = PyObject_Vectorcall(M.wrap, wv, 3, nullptr);
  Py_DECREF(r);
  if (t != nullptr) ++M.hits;
  return t;
}

}  // namespace

// A mutating op's or a factory's call (no out=, no mode / autocast): its result, Py_None for
// "take the Python path" (not a new reference), or nullptr with an error set.
PyObject* mutpath_call(int kind, PyObject* op, PyObject* args) {
  if (!M.ready || PyTuple_GET_SIZE(args) < 1) return Py_None;
  if (kind >= kFactory) return factory(kind - kFactory, op, args);
  PyObject* self = PyTuple_GET_ITEM(args, 0);
  if (!plain_tensor(self)) return Py_None;
  for (Py_ssize_t i = 1; i < PyTuple_GET_SIZE(args); ++i) {
    PyObject* v = PyTuple_GET_ITEM(args, i);
    if (is_tensor(v) && !plain_tensor(v)) return Py_None;
  }
  int rec = records(args);
  if (rec != 0) return rec < 0 ? nullptr : Py_None;  // autograd's checks and node: Python
  if (kind == kInplace) return inplace_pointwise(op, args);
  if (kind == kZero || kind == kFill) return fill(kind, op, args);
  if (kind == kCopy) return copy(args);
  return Py_None;
}

namespace {

PyObject* keep(py::handle h) {
  Py_INCREF(h.ptr());
  return h.ptr();
}

void mutpath_init(py::dict g) {
  M.tensor = reinterpret_cast<PyTypeObject*>(keep(g["Tensor"]));
  M.ndarray = reinterpret_cast<PyTypeObject*>(keep(g["ndarray"]));
  M.cpu = keep(g["cpu"]);
  M.state = keep(g["state"]);
  M.dispatch = keep(g["dispatch_globals"]);
  M.copyto = keep(g["copyto"]);
  M.wrap = keep(g["wrap"]);
  M.f8a = keep(g["float8_e4m3fn"]);
  M.f8b = keep(g["float8_e5m2"]);
  M.s_grad = PyUnicode_InternFromString("grad_enabled");
  M.s_hook = PyUnicode_InternFromString("autograd_hook");
  M.s_rg = PyUnicode_InternFromString("_requires_grad");
  M.s_np = PyUnicode_InternFromString("_np");
  M.s_storage = PyUnicode_InternFromString("_storage");
  M.s_kernels = PyUnicode_InternFromString("kernels");
  M.s_cpu = PyUnicode_InternFromString("cpu");
  M.s_inplace_of = PyUnicode_InternFromString("inplace_of");
  M.s_stack = PyUnicode_InternFromString("device_stack");
  M.s_default = PyUnicode_InternFromString("default_device");
  M.s_unsafe = PyUnicode_InternFromString("unsafe");
  M.kw_casting = Py_BuildValue("(s)", "casting");
  M.one = PyLong_FromLong(1);
  M.init_tensor_slots(g);
  M.ready = true;
}

}  // namespace

void init_mutpath(py::module_& m) {
  m.def("mutpath_init", &mutpath_init, py::arg("globals"),
        "Hand in-place ops' and factories' objects to the native hit path (ember/_native.py)");
  m.def("mutpath_stats", []() { return M.hits; },
        "in-place calls and factory calls finished by the native hit path");
}
