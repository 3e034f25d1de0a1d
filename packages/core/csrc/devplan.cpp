// Device launch plans: the hit path of a pointwise call on an accelerator tensor (cuda), replayed
// in C++ from a plan a device package built in Python (ember/_native.py `register_device`).
//
//   fastpath.cpp's device_call / fast_pointwise  -- first tensor on a registered device -->
//   lookup(op, args): key = (per argument: dtype, device, sizes, strides, 16-byte alignment of
//   tensors; type (or value) of scalars), default dtype; the device's "special" counter at 0
//   (no current stream pushed, nothing capturing) and its context bound.
//   hit:  [op.check(common dtype, *args)] -> malloc(nbytes, 0) (the caching allocator, one
//         Python call; the buffer and Storage objects made here)
//         -> pack the kernel's parameters -> cuLaunchKernel (libcuda through dlopen) -> Tensor
//   miss: the device's Python kernel slot runs (the reference), then its builder is asked for
//         the plan of this call (None: not plannable).
//
// No op knowledge and no CUDA headers here: the device's builder says what each kernel
// parameter is (an output/tensor address, a scalar argument, a constant, with its C type);
// this file keys, packs and launches. libcuda is opened on the first plan that launches, so
// the module builds and imports on machines without CUDA. A plan without a function (the
// fake device) packs the same bytes and hands them to the plan's `fake` hook instead.

#include <Python.h>
#include <structmember.h>
#include <dlfcn.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

// devalloc.cpp: the caching allocator's exact-reuse malloc, natively
PyObject* devalloc_malloc(PyObject* a, PyObject* nbytes, PyObject* key, PyObject* size);

namespace {

enum Kind : char { kTensor = 0, kScalar = 1, kValue = 2, kIdent = 3 };

struct ArgKey {
  char kind = kValue;
  PyTypeObject* type = nullptr;  // scalars: exact Python type
  long long i = 0;               // kValue int/bool value or float bits; kScalar: int is i64
  PyObject* obj = nullptr;       // kValue str / kIdent object (owned); kTensor: dtype (owned)
  PyObject* device = nullptr;    // kTensor (owned)
  std::vector<Py_ssize_t> shape, stride;
  bool aligned = false;
  Py_ssize_t itemsize = 0;
};

struct Param {
  int src;     // >= 0: argument position; -1: the output's address; -2: a constant
  char ctype;  // p: u64 address, ?: i1 (int8), b/h/i/q: i8/16/32/64, B/H/I/Q unsigned, f, d
  long long ival = 0;
  double fval = 0;
};

struct DevPlan {
  std::vector<ArgKey> keys;
  PyObject* dflt = nullptr;       // the default dtype it was built under
  PyObject* check = nullptr;      // op.check or nullptr
  PyObject* common = nullptr;     // the dtype op.check is called with
  PyObject* shape = nullptr;      // the output's
  PyObject* stride = nullptr;
  PyObject* rdt = nullptr;
  PyObject* device = nullptr;
  PyObject* alloc = nullptr;      // () -> Storage of the output's size, or nullptr when
  PyObject* malloc = nullptr;     // malloc(nbytes, stream 0) -> block (with .ptr): the buffer
  PyObject* allocator = nullptr;  // (allocator, block) and Storage are made here
  PyObject* nbytes = nullptr;
  PyObject* size = nullptr;       // nbytes rounded as the allocator does, and (0, size): its
  PyObject* rkey = nullptr;       // exact-reuse key (nullptr: always call malloc)
  PyObject* fake = nullptr;       // (packed bytes, grid x, stream) -> None, or nullptr
  uint64_t func = 0;              // CUfunction; 0: no launch (fake hook, or nothing)
  unsigned gx = 1, gy = 1, gz = 1, bx = 32, shared = 0;
  uint64_t ctx = 0;               // the context the function was loaded in (0: do not check)
  std::vector<Param> params;
  int reg = 0;                    // index of the device registration
};

struct DevReg {
  std::string type;
  PyObject* builder = nullptr;    // (op, args) -> plan description | None
  PyObject* special = nullptr;    // a list: [0] != 0 -> every call takes the Python path
  PyObject* capturing = nullptr;  // a dict: non-empty -> the Python path
};

struct DevEntry {
  std::vector<DevPlan*> plans;
  int failed = 0;                 // builder answers of None (capped: not asked forever)
  // builder answers of None per call pattern (pattern_hash): a pattern is asked twice at most
  // (autograd's recording asks before the Python path built the plan, then once after)
  std::unordered_map<uint64_t, int> asked;
};

constexpr int kMaxPlans = 64;
constexpr int kMaxFailed = 4096;
constexpr int kMaxAsks = 2;
constexpr int kMaxParams = 64;

struct DG {
  bool ready = false;
  PyTypeObject* tensor = nullptr;
  const Py_ssize_t* off = nullptr;   // fastpath.cpp's Tensor slot offsets
  PyObject* zero = nullptr;
  PyObject* dtype_globals = nullptr; // ember._dtype's globals (the default dtype)
  PyObject* str_dflt = nullptr;
  PyObject* str_type = nullptr;
  PyTypeObject* storage = nullptr;
  PyTypeObject* buffer = nullptr;
  PyTypeObject* nbuffer = nullptr;   // its subclass that frees natively (or nullptr)
  Py_ssize_t off_data = 0, off_ptr = 0;
  Py_ssize_t off_sdev = 0, off_nbytes = 0, off_version = 0, off_views = 0;  // Storage's slots
  Py_ssize_t off_block = -1, off_alloc = 0;                   // the buffer's (-1: none)
  PyObject* str_ptr = nullptr;
  std::vector<DevReg> regs;
  long hits = 0, misses = 0, built = 0;
  // libcuda, opened on the first plan with a function
  void* lib = nullptr;
  int (*launch)(uint64_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                uint64_t, void**, void**) = nullptr;
  int (*ctx_get)(uint64_t*) = nullptr;
  int (*err_str)(int, const char**) = nullptr;
};
DG D;
std::unordered_map<PyObject*, DevEntry*> g_dev;

enum TSlot { ST = 0, SHAPE, STRIDE, OFFSET, DTYPE, DEVICE, NPC };

inline PyObject* tslot(PyObject* t, int s) {
  return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(t) + D.off[s]);
}

inline PyObject* member(PyObject* o, Py_ssize_t off) {
  return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + off);
}

inline void set_member(PyObject* o, Py_ssize_t off, PyObject* v) {  // on a fresh object
  Py_INCREF(v);
  *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + off) = v;
}

inline void set_tslot(PyObject* t, int s, PyObject* v) {
  Py_INCREF(v);
  *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(t) + D.off[s]) = v;
}

bool open_cuda() {
  if (D.launch != nullptr) return true;
  if (D.lib == nullptr) D.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (D.lib == nullptr) return false;
  D.launch = reinterpret_cast<decltype(D.launch)>(dlsym(D.lib, "cuLaunchKernel"));
  D.ctx_get = reinterpret_cast<decltype(D.ctx_get)>(dlsym(D.lib, "cuCtxGetCurrent"));
  D.err_str = reinterpret_cast<decltype(D.err_str)>(dlsym(D.lib, "cuGetErrorString"));
  if (D.launch == nullptr || D.ctx_get == nullptr) {
    D.launch = nullptr;
    return false;
  }
  return true;
}

// A tensor's data address (its storage's buffer address + offset * itemsize); false: not a
// buffer this file knows (the plan does not apply).
inline bool tensor_addr(PyObject* t, Py_ssize_t itemsize, uint64_t* out) {
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

bool same_ints(PyObject* tup, const std::vector<Py_ssize_t>& v) {
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

bool ints_of(PyObject* tup, std::vector<Py_ssize_t>* v) {
  if (!PyTuple_CheckExact(tup)) return false;
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tup); ++k) {
    PyObject* x = PyTuple_GET_ITEM(tup, k);
    if (!PyLong_CheckExact(x)) return false;
    v->push_back(PyLong_AsSsize_t(x));
  }
  return !PyErr_Occurred();
}

constexpr long long kI32Max = 2147483647LL;

// Does argument v match the key k (and, for a tensor, where is its data)?
bool match(const ArgKey& k, PyObject* v, uint64_t* addr) {
  PyTypeObject* t = Py_TYPE(v);
  switch (k.kind) {
    case kTensor: {
      if (t != k.type || tslot(v, DTYPE) != k.obj) return false;  // (a subclass: that one)
      PyObject* dev = tslot(v, DEVICE);
      if (dev != k.device && PyObject_RichCompareBool(dev, k.device, Py_EQ) != 1) {
        PyErr_Clear();
        return false;
      }
      if (!same_ints(tslot(v, SHAPE), k.shape) || !same_ints(tslot(v, STRIDE), k.stride))
        return false;
      if (!tensor_addr(v, k.itemsize, addr)) return false;
      return ((*addr & 15) == 0) == k.aligned;
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
  if (kind == kTensor) {
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
    k->aligned = (a & 15) == 0;
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

PyObject* keep(PyObject* o) {
  Py_XINCREF(o);
  return o == Py_None ? nullptr : o;
}

void free_plan(DevPlan* p) {
  for (auto& k : p->keys) {
    Py_XDECREF(k.obj);
    Py_XDECREF(k.device);
  }
  for (PyObject* o : {p->dflt, p->check, p->common, p->shape, p->stride, p->rdt, p->device,
                      p->alloc, p->fake, p->malloc, p->allocator, p->nbytes, p->size,
                      p->rkey})
    Py_XDECREF(o);
  delete p;
}

// The plan described by the builder's answer d (see ember/_native.py `register_device`) for
// this call's args; nullptr when it cannot be replayed here.
DevPlan* build_plan(PyObject* d, PyObject* args, int reg) {
  if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) != 9) return nullptr;
  PyObject* kinds = PyTuple_GET_ITEM(d, 0);
  if (!PyTuple_Check(kinds) || PyTuple_GET_SIZE(kinds) != PyTuple_GET_SIZE(args)) return nullptr;
  auto* p = new DevPlan();
  p->reg = reg;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    ArgKey k;
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(kinds, i));
    bool ok = make_key(static_cast<char>(kind), PyTuple_GET_ITEM(args, i), &k);
    p->keys.push_back(k);  // (owned refs freed with the plan, even a failed one)
    if (!ok) {
      PyErr_Clear();
      free_plan(p);
      return nullptr;
    }
  }
  p->dflt = keep(PyTuple_GET_ITEM(d, 1));
  p->check = keep(PyTuple_GET_ITEM(d, 2));
  p->common = keep(PyTuple_GET_ITEM(d, 3));
  // out: (shape, stride, rdt, device, alloc)
  PyObject* out = PyTuple_GET_ITEM(d, 4);
  // launch: (function, gx, gy, gz, block_x, shared, ctx)
  PyObject* ln = PyTuple_GET_ITEM(d, 5);
  PyObject* params = PyTuple_GET_ITEM(d, 6);
  if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) != 5 || !PyTuple_Check(ln) ||
      PyTuple_GET_SIZE(ln) != 7 || !PyTuple_Check(params) ||
      PyTuple_GET_SIZE(params) > kMaxParams) {
    free_plan(p);
    return nullptr;
  }
  p->shape = keep(PyTuple_GET_ITEM(out, 0));
  p->stride = keep(PyTuple_GET_ITEM(out, 1));
  p->rdt = keep(PyTuple_GET_ITEM(out, 2));
  p->device = keep(PyTuple_GET_ITEM(out, 3));
  PyObject* al = PyTuple_GET_ITEM(out, 4);
  if (PyTuple_Check(al) && PyTuple_GET_SIZE(al) >= 3 && D.off_block >= 0) {
    p->malloc = keep(PyTuple_GET_ITEM(al, 0));      // (malloc, allocator, nbytes[, size])
    p->allocator = keep(PyTuple_GET_ITEM(al, 1));
    p->nbytes = keep(PyTuple_GET_ITEM(al, 2));
    if (PyTuple_GET_SIZE(al) == 4 && D.nbuffer != nullptr) {
      p->size = keep(PyTuple_GET_ITEM(al, 3));
      PyObject* zero = PyLong_FromLong(0);
      p->rkey = zero == nullptr || p->size == nullptr ? nullptr : PyTuple_Pack(2, zero, p->size);
      Py_XDECREF(zero);
    }
  } else if (!PyTuple_Check(al)) {
    p->alloc = keep(al);
  }
  p->func = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(ln, 0));
  p->gx = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ln, 1));
  p->gy = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ln, 2));
  p->gz = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ln, 3));
  p->bx = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ln, 4));
  p->shared = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ln, 5));
  p->ctx = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(ln, 6));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(params); ++i) {
    PyObject* q = PyTuple_GET_ITEM(params, i);  // (src, ctype str, value)
    Param pr;
    pr.src = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(q, 0)));
    pr.ctype = PyUnicode_AsUTF8(PyTuple_GET_ITEM(q, 1))[0];
    PyObject* v = PyTuple_GET_ITEM(q, 2);
    if (PyFloat_Check(v)) {
      pr.fval = PyFloat_AS_DOUBLE(v);
      pr.ival = static_cast<long long>(pr.fval);
    } else if (v != Py_None) {
      pr.ival = PyLong_AsLongLong(v);
      pr.fval = static_cast<double>(pr.ival);
    }
    p->params.push_back(pr);
  }
  p->fake = keep(PyTuple_GET_ITEM(d, 7));
  bool bad = PyErr_Occurred() != nullptr || p->shape == nullptr || p->stride == nullptr ||
             p->rdt == nullptr || p->device == nullptr ||
             (p->alloc == nullptr && (p->malloc == nullptr || p->allocator == nullptr ||
                                      p->nbytes == nullptr || !PyLong_CheckExact(p->nbytes)));
  if (!bad && p->func != 0 && !open_cuda()) bad = true;
  if (bad) {
    PyErr_Clear();
    free_plan(p);
    return nullptr;
  }
  return p;
}

union Cell {
  uint64_t u;
  int64_t q;
  int32_t i;
  int16_t h;
  int8_t b;
  float f;
  double d;
};

// Write one scalar argument into a parameter cell of C type c; false: not representable.
bool put_scalar(PyObject* v, char c, Cell* cell) {
  cell->u = 0;
  if (c == 'f' || c == 'd') {
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) return false;
    if (c == 'f') cell->f = static_cast<float>(x);
    else cell->d = x;
    return true;
  }
  long long x = PyLong_AsLongLong(v);  // (bool is an int)
  if (x == -1 && PyErr_Occurred()) return false;
  switch (c) {
    case '?': case 'b': case 'B': cell->b = static_cast<int8_t>(x); break;
    case 'h': case 'H': cell->h = static_cast<int16_t>(x); break;
    case 'i': case 'I': cell->i = static_cast<int32_t>(x); break;
    default: cell->q = x;
  }
  return true;
}

void put_const(const Param& pr, Cell* cell) {
  cell->u = 0;
  switch (pr.ctype) {
    case 'f': cell->f = static_cast<float>(pr.fval); break;
    case 'd': cell->d = pr.fval; break;
    case '?': case 'b': case 'B': cell->b = static_cast<int8_t>(pr.ival); break;
    case 'h': case 'H': cell->h = static_cast<int16_t>(pr.ival); break;
    case 'i': case 'I': cell->i = static_cast<int32_t>(pr.ival); break;
    default: cell->q = pr.ival;
  }
}

// A new Tensor over storage st laid out as the plan's output.
PyObject* wrap(const DevPlan* p, PyObject* st) {
  PyObject* t = D.tensor->tp_alloc(D.tensor, 0);
  if (t == nullptr) return nullptr;
  set_tslot(t, ST, st);
  set_tslot(t, SHAPE, p->shape);
  set_tslot(t, STRIDE, p->stride);
  set_tslot(t, OFFSET, D.zero);
  set_tslot(t, DTYPE, p->rdt);
  set_tslot(t, DEVICE, p->device);
  set_tslot(t, NPC, Py_None);
  return t;
}

// The output's Storage: Storage(Buffer(allocator, block), device, nbytes) as the device's
// Python code makes it, the block from malloc(nbytes, 0) (the default stream).
PyObject* new_storage(const DevPlan* p) {
  PyObject* block = nullptr;
  if (p->rkey != nullptr) {  // the exact-reuse case natively, else the allocator's malloc
    block = devalloc_malloc(p->allocator, p->nbytes, p->rkey, p->size);
    if (block == nullptr && PyErr_Occurred()) return nullptr;
  }
  if (block == nullptr) {
    PyObject* mv[2] = {p->nbytes, D.zero};
    block = PyObject_Vectorcall(p->malloc, mv, 2, nullptr);
    if (block == nullptr) return nullptr;
  }
  PyObject* ptr = PyObject_GetAttr(block, D.str_ptr);
  if (ptr == nullptr) {
    Py_DECREF(block);
    return nullptr;
  }
  // (native plans' buffers free natively: their class's __del__ is devalloc.cpp's)
  PyTypeObject* bt = p->rkey != nullptr ? D.nbuffer : D.buffer;
  PyObject* buf = bt->tp_alloc(bt, 0);
  PyObject* st = buf == nullptr ? nullptr : D.storage->tp_alloc(D.storage, 0);
  if (st == nullptr) {
    Py_XDECREF(buf);  // (a half-made buffer: its __del__ frees nothing without a block)
    Py_DECREF(ptr);
    Py_DECREF(block);  // (the block stays allocated: as a lost tensor's would, until reset)
    return nullptr;
  }
  set_member(buf, D.off_ptr, ptr);
  set_member(buf, D.off_block, block);
  set_member(buf, D.off_alloc, p->allocator);
  set_member(st, D.off_data, buf);
  set_member(st, D.off_sdev, p->device);
  set_member(st, D.off_nbytes, p->nbytes);
  set_member(st, D.off_version, D.zero);
  set_member(st, D.off_views, Py_None);
  Py_DECREF(ptr);
  Py_DECREF(block);
  Py_DECREF(buf);
  return st;
}

// Replay plan p on args (addrs: the tensor arguments' addresses by position).
PyObject* replay(const DevPlan* p, PyObject* args, const uint64_t* addrs) {
  if (p->check != nullptr) {
    PyObject* cv[kMaxParams + 1];
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    cv[0] = p->common;
    for (Py_ssize_t i = 0; i < n; ++i) cv[i + 1] = PyTuple_GET_ITEM(args, i);
    PyObject* r = PyObject_Vectorcall(p->check, cv, n + 1, nullptr);
    if (r == nullptr) return nullptr;  // PyTorch's argument error, as the Python path raises
    Py_DECREF(r);
  }
  PyObject* st = p->alloc != nullptr ? PyObject_CallNoArgs(p->alloc) : new_storage(p);
  if (st == nullptr) return nullptr;  // (out of memory: the allocator's error)
  uint64_t out = 0;
  PyObject* buf = Py_TYPE(st) == D.storage ? member(st, D.off_data) : nullptr;
  bool known = buf != nullptr && (Py_TYPE(buf) == D.buffer || Py_TYPE(buf) == D.nbuffer);
  PyObject* ptr = known ? member(buf, D.off_ptr) : nullptr;
  if (ptr == nullptr || !PyLong_CheckExact(ptr)) {
    Py_DECREF(st);
    PyErr_SetString(PyExc_RuntimeError, "device plan: alloc() did not return a device Storage");
    return nullptr;
  }
  out = PyLong_AsUnsignedLongLong(ptr);
  Cell cells[kMaxParams];
  void* pp[kMaxParams];
  size_t k = 0;
  for (const Param& pr : p->params) {
    Cell* c = &cells[k];
    if (pr.src == -1) {
      c->u = out;
    } else if (pr.src == -2) {
      put_const(pr, c);
    } else if (pr.ctype == 'p') {
      c->u = addrs[pr.src];
    } else if (!put_scalar(PyTuple_GET_ITEM(args, pr.src), pr.ctype, c)) {
      Py_DECREF(st);
      return nullptr;
    }
    pp[k] = c;
    ++k;
  }
  if (p->func != 0) {
    int err = D.launch(p->func, p->gx, p->gy, p->gz, p->bx, 1, 1, p->shared, 0, pp, nullptr);
    if (err != 0) {
      const char* msg = "unknown error";
      if (D.err_str != nullptr) D.err_str(err, &msg);
      Py_DECREF(st);
      PyErr_Format(PyExc_RuntimeError, "CUDA error: %s (cuLaunchKernel %d)", msg, err);
      return nullptr;
    }
  } else if (p->fake != nullptr) {  // the fake device: the packed parameters, to be decoded
    PyObject* raw = PyBytes_FromStringAndSize(reinterpret_cast<char*>(cells), k * sizeof(Cell));
    if (raw == nullptr) {
      Py_DECREF(st);
      return nullptr;
    }
    PyObject* r = PyObject_CallOneArg(p->fake, raw);
    Py_DECREF(raw);
    if (r == nullptr) {
      Py_DECREF(st);
      return nullptr;
    }
    Py_DECREF(r);
  }
  PyObject* t = wrap(p, st);
  Py_DECREF(st);
  return t;
}

// The plan of this call, if one was built and may run now; nullptr (no error) when none.
// *blocked: a plan matched but may not run now (a stream pushed, a capture, another context).
const DevPlan* find(DevEntry* e, PyObject* args, uint64_t* addrs, bool* blocked) {
  *blocked = false;
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n > kMaxParams) return nullptr;
  PyObject* dflt = nullptr;
  for (const DevPlan* p : e->plans) {
    if (static_cast<Py_ssize_t>(p->keys.size()) != n) continue;
    bool ok = true;
    for (Py_ssize_t i = 0; i < n && ok; ++i)
      ok = match(p->keys[i], PyTuple_GET_ITEM(args, i), &addrs[i]);
    if (!ok) continue;
    if (dflt == nullptr) {
      dflt = PyDict_GetItemWithError(D.dtype_globals, D.str_dflt);  // borrowed
      if (dflt == nullptr) {
        PyErr_Clear();
        return nullptr;
      }
    }
    if (p->dflt != dflt) continue;
    const DevReg& r = D.regs[p->reg];
    *blocked = true;
    if (PyList_GET_ITEM(r.special, 0) != D.zero || PyDict_GET_SIZE(r.capturing) != 0)
      return nullptr;  // a current stream pushed or a capture: the Python path
    if (p->ctx != 0) {
      uint64_t cur = 0;
      if (D.ctx_get(&cur) != 0 || cur != p->ctx) return nullptr;  // Python binds it
    }
    *blocked = false;
    return p;
  }
  return nullptr;
}

DevEntry* entry(PyObject* op) {
  auto it = g_dev.find(op);
  if (it != g_dev.end()) return it->second;
  auto* e = new DevEntry();
  Py_INCREF(op);
  g_dev.emplace(op, e);
  return e;
}

int reg_of(PyObject* device) {
  PyObject* type = PyObject_GetAttr(device, D.str_type);
  if (type == nullptr) {
    PyErr_Clear();
    return -1;
  }
  const char* s = PyUnicode_Check(type) ? PyUnicode_AsUTF8(type) : nullptr;
  int r = -1;
  for (size_t i = 0; s != nullptr && i < D.regs.size(); ++i)
    if (D.regs[i].type == s) r = static_cast<int>(i);
  Py_DECREF(type);
  PyErr_Clear();
  return r;
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
    }
  }
  PyErr_Clear();  // (an int too wide: hashed as -1)
  return h;
}

// Ask the device's builder for the plan of this call; nullptr when none.
const DevPlan* ask(DevEntry* e, PyObject* op, PyObject* args, PyObject* first) {
  if (e->failed >= kMaxFailed || static_cast<int>(e->plans.size()) >= kMaxPlans) return nullptr;
  uint64_t ph = pattern_hash(args);
  auto seen = e->asked.find(ph);
  if (seen != e->asked.end() && seen->second >= kMaxAsks) return nullptr;
  int reg = reg_of(tslot(first, DEVICE));
  if (reg < 0) return nullptr;
  PyObject* argv[2] = {op, args};
  PyObject* d = PyObject_Vectorcall(D.regs[reg].builder, argv, 2, nullptr);
  DevPlan* p = nullptr;
  if (d == nullptr) {  // a bug in a builder must not fail the call: no plan
    PyErr_Clear();
  } else {
    p = d == Py_None ? nullptr : build_plan(d, args, reg);
    Py_DECREF(d);
  }
  if (p == nullptr) {
    ++e->failed;
    if (e->asked.size() > 4096) e->asked.clear();
    ++e->asked[ph];
    return nullptr;
  }
  ++D.built;
  e->plans.push_back(p);
  return p;
}

}  // namespace

// The hit path of a call whose first tensor `first` is on a device (fastpath.cpp): a Tensor
// (new reference), nullptr with an error, or Py_None (borrowed: not a hit). kernel: the
// device's Python kernel slot, run on a miss (then the builder is asked for this call's plan);
// nullptr: no slot is run (autograd records around the Python path).
PyObject* devplan_call(PyObject* op, PyObject* args, PyObject* first, PyObject* kernel) {
  if (!D.ready || D.regs.empty() || first == nullptr) {
    if (kernel == nullptr) return Py_None;
    return PyObject_Call(kernel, args, nullptr);
  }
  DevEntry* e = entry(op);
  uint64_t addrs[kMaxParams];
  bool blocked = false;
  const DevPlan* p = find(e, args, addrs, &blocked);
  if (p != nullptr) {
    ++D.hits;
    return replay(p, args, addrs);
  }
  ++D.misses;
  if (kernel == nullptr) {  // autograd's recording: a plan the Python path built meanwhile
    if (blocked) return Py_None;
    p = ask(e, op, args, first);
    if (p == nullptr || find(e, args, addrs, &blocked) != p) return Py_None;
    return replay(p, args, addrs);
  }
  PyObject* r = PyObject_Call(kernel, args, nullptr);
  if (r != nullptr && !blocked && Py_TYPE(r) == D.tensor) ask(e, op, args, first);
  return r;
}

void devplan_bind(PyTypeObject* tensor, const Py_ssize_t* off, PyObject* zero) {
  D.tensor = tensor;
  D.off = off;
  D.zero = zero;
}

namespace {

Py_ssize_t slot_offset(py::handle type, const char* name) {
  py::object m = type.attr("__dict__")[name];
  if (Py_TYPE(m.ptr()) != &PyMemberDescr_Type)
    throw py::type_error(std::string(name) + " is not a __slots__ member");
  return reinterpret_cast<PyMemberDescrObject*>(m.ptr())->d_member->offset;
}

}  // namespace

void init_devplan(py::module_& m) {
  m.def(
      "devplan_register",
      [](std::string type, py::object builder, py::list special, py::dict capturing,
         py::dict dtype_globals, py::object storage, py::object buffer, py::object nbuffer) {
        if (D.tensor == nullptr) throw py::value_error("fastpath_init first");
        D.dtype_globals = dtype_globals.inc_ref().ptr();
        D.str_dflt = PyUnicode_InternFromString("_default_dtype");
        D.str_type = PyUnicode_InternFromString("type");
        D.storage = reinterpret_cast<PyTypeObject*>(storage.inc_ref().ptr());
        D.buffer = reinterpret_cast<PyTypeObject*>(buffer.inc_ref().ptr());
        D.nbuffer = nbuffer.is_none()
                        ? nullptr
                        : reinterpret_cast<PyTypeObject*>(nbuffer.inc_ref().ptr());
        D.off_data = slot_offset(storage, "data");
        D.off_ptr = slot_offset(buffer, "ptr");
        D.off_sdev = slot_offset(storage, "device");
        D.off_nbytes = slot_offset(storage, "nbytes");
        D.off_version = slot_offset(storage, "version");
        D.off_views = slot_offset(storage, "views");
        D.str_ptr = PyUnicode_InternFromString("ptr");
        try {  // a buffer of (ptr, block, alloc) slots is made here; else alloc() makes it
          D.off_block = slot_offset(buffer, "block");
          D.off_alloc = slot_offset(buffer, "alloc");
        } catch (py::error_already_set&) {
          D.off_block = -1;
        } catch (py::type_error&) {
          D.off_block = -1;
        }
        DevReg r;
        r.type = type;
        r.builder = builder.inc_ref().ptr();
        r.special = special.inc_ref().ptr();
        r.capturing = capturing.inc_ref().ptr();
        for (auto& old : D.regs)
          if (old.type == type) {
            old = r;
            D.ready = true;
            return;
          }
        D.regs.push_back(r);
        D.ready = true;
      },
      py::arg("type"), py::arg("builder"), py::arg("special"), py::arg("capturing"),
      py::arg("dtype_globals"), py::arg("storage"), py::arg("buffer"),
      py::arg("native_buffer") = py::none(),
      "Register a device's plan builder for the native launch path (ember/_native.py)");
  m.def("devplan_stats",
        []() { return py::make_tuple(D.hits, D.misses, D.built, g_dev.size()); },
        "(hits, misses, plans built, ops seen) of the device launch path");
  m.def("devplan_clear", []() {
    for (auto& kv : g_dev) {
      for (DevPlan* p : kv.second->plans) free_plan(p);
      kv.second->plans.clear();
      kv.second->failed = 0;
      kv.second->asked.clear();
    }
  }, "Drop every device plan (tests; a device whose kernels were unloaded)");
}
