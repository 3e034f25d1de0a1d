// Device launch plans' replay: the output's allocation (the caching allocator's exact-reuse
// path natively, devalloc.cpp), the kernel parameters packed from the call's arguments, and the
// launch: cuLaunchKernel (libcuda through dlopen), a library call of u64 arguments (cuBLASLt),
// or the fake device's hook.

#include "devplan.h"

#include <dlfcn.h>

#include <cstring>

// devalloc.cpp: the caching allocator's exact-reuse malloc, natively
PyObject* devalloc_malloc(PyObject* a, PyObject* nbytes, PyObject* key, PyObject* size);

namespace ember_dev {

namespace {

// A C function taking n 64-bit integer or pointer arguments (n <= 16; the SysV and Windows x64
// conventions pass each such argument in one register or stack slot, so calling it through this
// type is the same call): cublasLtMatmul's 16 (handle, descriptors, scalars' host addresses,
// buffers, algorithm, workspace and its size, stream) are all pointer-sized.
using Fn16 = int (*)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                     uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                     uint64_t, uint64_t);

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

int ccall(uint64_t fn, const Cell* c, size_t n) {
  uint64_t a[16] = {0};
  for (size_t i = 0; i < n && i < 16; ++i) a[i] = c[i].u;
  return reinterpret_cast<Fn16>(fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
                                    a[10], a[11], a[12], a[13], a[14], a[15]);
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

// A new Tensor over storage st laid out as (shape, stride, rdt) on the plan's device.
PyObject* wrap(const DevPlan* p, PyObject* st, PyObject* shape, PyObject* stride, PyObject* rdt) {
  PyObject* t = D.tensor->tp_alloc(D.tensor, 0);
  if (t == nullptr) return nullptr;
  set_tslot(t, ST, st);
  set_tslot(t, SHAPE, shape);
  set_tslot(t, STRIDE, stride);
  set_tslot(t, OFFSET, D.zero);
  set_tslot(t, DTYPE, rdt);
  set_tslot(t, DEVICE, p->device);
  set_tslot(t, NPC, Py_None);
  return t;
}

// A buffer's Storage: Storage(Buffer(allocator, block), device, nbytes) as the device's
// Python code makes it, the block from malloc(nbytes, 0) (the default stream).
PyObject* new_storage(const DevPlan* p, PyObject* nbytes, PyObject* size, PyObject* rkey) {
  PyObject* block = nullptr;
  if (rkey != nullptr) {  // the exact-reuse case natively, else the allocator's malloc
    block = devalloc_malloc(p->allocator, nbytes, rkey, size);
    if (block == nullptr && PyErr_Occurred()) return nullptr;
  }
  if (block == nullptr) {
    PyObject* mv[2] = {nbytes, D.zero};
    block = PyObject_Vectorcall(p->malloc, mv, 2, nullptr);
    if (block == nullptr) return nullptr;
  }
  PyObject* ptr = PyObject_GetAttr(block, D.str_ptr);
  if (ptr == nullptr) {
    Py_DECREF(block);
    return nullptr;
  }
  // (native plans' buffers free natively: their class's __del__ is devalloc.cpp's)
  PyTypeObject* bt = rkey != nullptr ? D.nbuffer : D.buffer;
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
  set_member(st, D.off_nbytes, nbytes);
  set_member(st, D.off_version, D.zero);
  set_member(st, D.off_views, Py_None);
  Py_DECREF(ptr);
  Py_DECREF(block);
  Py_DECREF(buf);
  return st;
}

// The device address of a Storage made for a plan (0 with an error: not a device Storage).
uint64_t storage_addr(PyObject* st) {
  PyObject* buf = Py_TYPE(st) == D.storage ? member(st, D.off_data) : nullptr;
  bool known = buf != nullptr && (Py_TYPE(buf) == D.buffer || Py_TYPE(buf) == D.nbuffer);
  PyObject* ptr = known ? member(buf, D.off_ptr) : nullptr;
  if (ptr == nullptr || !PyLong_CheckExact(ptr)) {
    PyErr_SetString(PyExc_RuntimeError, "device plan: alloc() did not return a device Storage");
    return 0;
  }
  return PyLong_AsUnsignedLongLong(ptr);
}

// Pack one step's parameters and launch it; false with an error set.
bool run_step(const Step& s, PyObject* args, const uint64_t* addrs, const uint64_t* bufs) {
  Cell cells[kMaxParams];
  void* pp[kMaxParams];
  size_t k = 0;
  for (const Param& pr : s.params) {
    Cell* c = &cells[k];
    if (pr.src == -1) {
      c->u = bufs[0];
    } else if (pr.src == -2) {
      put_const(pr, c);
    } else if (pr.src < -2) {
      c->u = bufs[-2 - pr.src];  // (-3 - j: bufs[j], after the first output's address)
    } else if (pr.ctype == 'p') {
      c->u = addrs[pr.src];
    } else if (!put_scalar(PyTuple_GET_ITEM(args, pr.src), pr.ctype, c)) {
      return false;
    }
    pp[k] = c;
    ++k;
  }
  if (s.func != 0 && s.ccall) {  // a library call: every parameter is one u64 cell
    int err = ccall(s.func, cells, k);
    if (err != 0) {
      PyErr_Format(PyExc_RuntimeError, "device plan: library call failed with status %d", err);
      return false;
    }
  } else if (s.func != 0) {
    int err = D.launch(s.func, s.gx, s.gy, s.gz, s.bx, 1, 1, s.shared, 0, pp, nullptr);
    if (err != 0) {
      const char* msg = "unknown error";
      if (D.err_str != nullptr) D.err_str(err, &msg);
      PyErr_Format(PyExc_RuntimeError, "CUDA error: %s (cuLaunchKernel %d)", msg, err);
      return false;
    }
  } else if (s.fake != nullptr) {  // the fake device: the packed parameters, to be decoded
    PyObject* raw = PyBytes_FromStringAndSize(reinterpret_cast<char*>(cells), k * sizeof(Cell));
    if (raw == nullptr) return false;
    PyObject* r = PyObject_CallOneArg(s.fake, raw);
    Py_DECREF(raw);
    if (r == nullptr) return false;
    Py_DECREF(r);
  }
  return true;
}

// The outputs of a replay: the plan's Storages, released together on an error.
struct Stores {
  PyObject* st[kMaxBufs + 1] = {nullptr};
  size_t n = 0;
  ~Stores() {
    for (size_t i = 0; i < n; ++i) Py_XDECREF(st[i]);
  }
};

}  // namespace

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
  Stores s;
  uint64_t bufs[kMaxBufs + 1];
  s.st[0] = p->alloc != nullptr ? PyObject_CallNoArgs(p->alloc)
                                : new_storage(p, p->nbytes, p->size, p->rkey);
  if (s.st[0] == nullptr) return nullptr;  // (out of memory: the allocator's error)
  s.n = 1;
  for (const Buf& b : p->bufs) {
    s.st[s.n] = new_storage(p, b.nbytes, b.size, b.rkey);
    if (s.st[s.n] == nullptr) return nullptr;
    ++s.n;
  }
  for (size_t i = 0; i < s.n; ++i) {
    bufs[i] = storage_addr(s.st[i]);
    if (bufs[i] == 0) return nullptr;
  }
  for (const Step& st : p->steps)
    if (!run_step(st, args, addrs, bufs)) return nullptr;
  PyObject* t = wrap(p, s.st[0], p->shape, p->stride, p->rdt);
  Py_ssize_t nout = 1;
  for (const Buf& b : p->bufs) nout += b.out;
  if (t == nullptr || (nout == 1 && p->ret.empty())) return t;
  PyObject* outs[kMaxBufs + 1] = {t};
  Py_ssize_t k = 1;
  bool ok = true;
  for (size_t j = 0; j < p->bufs.size(); ++j) {
    const Buf& b = p->bufs[j];
    if (!b.out) continue;  // (a temporary: freed with its Storage below, after the launches)
    outs[k] = wrap(p, s.st[j + 1], b.shape, b.stride, b.rdt);
    ok = ok && outs[k] != nullptr;
    ++k;
  }
  Py_ssize_t n = p->ret.empty() ? nout : static_cast<Py_ssize_t>(p->ret.size());
  PyObject* tup = ok ? PyTuple_New(n) : nullptr;
  for (Py_ssize_t i = 0; tup != nullptr && i < n; ++i) {
    int at = p->ret.empty() ? static_cast<int>(i) : p->ret[i];
    PyObject* v = at < 0 ? Py_None : outs[at];
    Py_INCREF(v);
    PyTuple_SET_ITEM(tup, i, v);
  }
  for (Py_ssize_t i = 0; i < k; ++i) Py_XDECREF(outs[i]);
  return tup;
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

}  // namespace ember_dev
