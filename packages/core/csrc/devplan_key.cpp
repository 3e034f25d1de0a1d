// Device launch plans' keys: what an argument of a call must be for a plan to replay it
// (devplan.h says each kind), and the hash of a call pattern the builder declined.

#include "devplan.h"

#include <cstring>

namespace ember_dev {

// A tensor's data address (its storage's buffer address + offset * itemsize); false: not a
// buffer this file knows (the plan does not apply).
bool tensor_addr(PyObject* t, Py_ssize_t itemsize, uint64_t* out) {
  PyObject* st = tslot(t, ST);
  if (st == nullptr || Py_TYPE(st) != D.storage) return false;
  PyObject* buf = member(st, D.off_data);
  if (buf == nullptr || (Py_TYPE(buf) != D.buffer && Py_TYPE(buf) != D.nbuffer)) return false;
  PyObject* p = member(buf, D.off_ptr);
  PyObject* o = tslot(t, OFFSET);
  if (p == nullptr || !PyLong_CheckExact(p) || o == nullptr || !PyLong_CheckExact(o))
    return false;
  uint64_t a = PyLong_AsUnsignedLongLong(p);
  long long off = PyLong_AsLongLong(o);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  *out = a + static_cast<uint64_t>(off * itemsize);
  return true;
}

static bool same_ints(PyObject* tup, const std::vector<Py_ssize_t>& v) {
  if (!PyTuple_CheckExact(tup) || PyTuple_GET_SIZE(tup) != static_cast<Py_ssize_t>(v.size()))
    return false;
  for (size_t k = 0; k < v.size(); ++k) {
    PyObject* x = PyTuple_GET_ITEM(tup, k);
    if (!PyLong_CheckExact(x)) return false;
    int overflow = 0;
    if (PyLong_AsLongLongAndOverflow(x, &overflow) != v[k] || overflow) return false;
  }
  return true;
}

static bool ints_of(PyObject* tup, std::vector<Py_ssize_t>* v) {
  if (!PyTuple_CheckExact(tup)) return false;
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tup); ++k) {
    PyObject* x = PyTuple_GET_ITEM(tup, k);
    if (!PyLong_CheckExact(x)) return false;
    v->push_back(PyLong_AsSsize_t(x));
  }
  return !PyErr_Occurred();
}

// Does argument v match the key k (and, for a tensor, where is its data)?
bool match(const ArgKey& k, PyObject* v, uint64_t* addr) {
  PyTypeObject* t = Py_TYPE(v);
  switch (k.kind) {
    case kTensor:
    case kTensor256: {
      if (t != k.type || tslot(v, DTYPE) != k.obj) return false;  // (a subclass: that one)
      PyObject* dev = tslot(v, DEVICE);
      if (dev != k.device && PyObject_RichCompareBool(dev, k.device, Py_EQ) != 1) {
        PyErr_Clear();
        return false;
      }
      if (!same_ints(tslot(v, SHAPE), k.shape) || !same_ints(tslot(v, STRIDE), k.stride))
        return false;
      if (!tensor_addr(v, k.itemsize, addr)) return false;
      return align_class(*addr, k.cap) == k.align;
    }
    case kInts: {  // (the exact type: tuple, list, a tuple subclass such as Size)
      if (t != k.type) return false;
      Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
      if (n != static_cast<Py_ssize_t>(k.shape.size())) return false;
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* x = PySequence_Fast_ITEMS(v)[i];
        if (!PyLong_CheckExact(x) && !PyBool_Check(x)) return false;
        int overflow = 0;
        if (PyLong_AsLongLongAndOverflow(x, &overflow) != k.shape[i] || overflow) return false;
      }
      return true;
    }
    case kScalar: {
      if (t != k.type) return false;
      if (t == &PyLong_Type) {  // Triton passes an int as i32 or i64 by its value
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow) return false;
        bool wide = x < -kI32Max - 1 || x > kI32Max;
        return wide == (k.i != 0);
      }
      return true;
    }
    case kValue: {
      if (t != k.type) return false;
      if (t == &PyFloat_Type) {
        double f = PyFloat_AS_DOUBLE(v);
        long long b;
        std::memcpy(&b, &f, sizeof b);
        return b == k.i;
      }
      if (t == &PyLong_Type) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        return !overflow && x == k.i;
      }
      if (t == &PyBool_Type) return (v == Py_True) == (k.i != 0);
      if (v == Py_None) return true;
      if (t == &PyUnicode_Type) return PyUnicode_Compare(v, k.obj) == 0;
      return false;
    }
    default:
      return v == k.obj;
  }
}

// Key item of argument v of kind `kind` (a plan being built); false: not keyable.
bool make_key(char kind, PyObject* v, ArgKey* k) {
  k->kind = kind;
  PyTypeObject* t = Py_TYPE(v);
  k->type = t;
  if (kind == kInts) {  // (ints, or bools: an output mask)
    if (!PyTuple_Check(v) && !PyList_CheckExact(v)) return false;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); ++i) {
      PyObject* x = PySequence_Fast_ITEMS(v)[i];
      if (!PyLong_CheckExact(x) && !PyBool_Check(x)) return false;
      k->shape.push_back(PyLong_AsSsize_t(x));
    }
    return !PyErr_Occurred();
  }
  if (kind == kTensor || kind == kTensor256) {
    k->cap = kind == kTensor256 ? 256 : 16;
    if (t != D.tensor && !PyType_IsSubtype(t, D.tensor)) return false;
    PyObject* dt = tslot(v, DTYPE);
    PyObject* isz = PyObject_GetAttrString(dt, "itemsize");
    if (isz == nullptr) return false;
    k->itemsize = PyLong_AsSsize_t(isz);
    Py_DECREF(isz);
    if (!ints_of(tslot(v, SHAPE), &k->shape) || !ints_of(tslot(v, STRIDE), &k->stride))
      return false;
    uint64_t a = 0;
    if (!tensor_addr(v, k->itemsize, &a)) return false;
    k->align = align_class(a, k->cap);
    k->obj = dt;
    Py_INCREF(dt);
    k->device = tslot(v, DEVICE);
    Py_INCREF(k->device);
    return true;
  }
  if (kind == kScalar) {
    if (t == &PyLong_Type) {
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow) return false;
      k->i = x < -kI32Max - 1 || x > kI32Max;
      return true;
    }
    return t == &PyFloat_Type || t == &PyBool_Type;
  }
  if (kind == kValue) {
    if (t == &PyFloat_Type) {
      double f = PyFloat_AS_DOUBLE(v);
      std::memcpy(&k->i, &f, sizeof f);
      return true;
    }
    if (t == &PyLong_Type) {
      int overflow = 0;
      k->i = PyLong_AsLongLongAndOverflow(v, &overflow);
      return !overflow;
    }
    if (t == &PyBool_Type) {
      k->i = v == Py_True;
      return true;
    }
    if (v == Py_None) return true;
    if (t == &PyUnicode_Type) {
      k->obj = v;
      Py_INCREF(v);
      return true;
    }
    return false;
  }
  k->obj = v;
  Py_INCREF(v);
  return true;
}

inline void mix(uint64_t* h, uint64_t v) { *h = (*h ^ v) * 1099511628211ULL; }

// A hash of what keys a call (types, dtypes, sizes, strides, scalar values): the builder is
// asked about one pattern kMaxAsks times at most.
uint64_t pattern_hash(PyObject* args) {
  uint64_t h = 1469598103934665603ULL;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    PyObject* v = PyTuple_GET_ITEM(args, i);
    PyTypeObject* t = Py_TYPE(v);
    mix(&h, reinterpret_cast<uint64_t>(t));
    if (t == D.tensor || PyType_IsSubtype(t, D.tensor)) {
      mix(&h, reinterpret_cast<uint64_t>(tslot(v, DTYPE)));
      for (PyObject* tup : {tslot(v, SHAPE), tslot(v, STRIDE)}) {
        if (tup == nullptr || !PyTuple_Check(tup)) continue;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tup); ++k)
          mix(&h, static_cast<uint64_t>(PyLong_AsSsize_t(PyTuple_GET_ITEM(tup, k))));
        mix(&h, 7);
      }
    } else if (t == &PyFloat_Type) {
      double f = PyFloat_AS_DOUBLE(v);
      uint64_t b;
      std::memcpy(&b, &f, sizeof b);
      mix(&h, b);
    } else if (t == &PyLong_Type || t == &PyBool_Type) {
      mix(&h, static_cast<uint64_t>(PyLong_AsLongLong(v)));
    } else if (PyTuple_Check(v) || PyList_CheckExact(v)) {  // (a factory's size, reduction dims)
      PyObject** items = PySequence_Fast_ITEMS(v);
      for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(v); ++k)
        if (PyLong_Check(items[k]))
          mix(&h, static_cast<uint64_t>(PyLong_AsLongLong(items[k])));
      mix(&h, 11);
    }
  }
  PyErr_Clear();  // (an int too wide: hashed as -1)
  return h;
}

}  // namespace ember_dev
