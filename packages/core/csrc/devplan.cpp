// Device launch plans: the hit path of a pointwise call on an accelerator tensor (cuda), replayed
// in C++ from a plan a device package built in Python (ember/_native.py `register_device`).
//
//   fastpath.cpp's device_call / fast_pointwise  -- first tensor on a registered device -->
//   lookup(op, args): key = (per argument: dtype, device, sizes, strides, alignment class of
//   tensors; type (or value) of scalars), default dtype; the device's "special" counter at 0
//   (no current stream pushed, nothing capturing) and its context bound.
//   hit:  [op.check(common dtype, *args)] -> malloc(nbytes, 0) (the caching allocator, one
//         Python call; the buffer and Storage objects made here)
//         -> pack the kernel's parameters -> cuLaunchKernel (libcuda through dlopen) -> Tensor
//   miss: the device's Python kernel slot runs (the reference), then its builder is asked for
//         the plan of this call (None: not plannable).
//
// Ops that are not pointwise (matmul, reductions, softmax, ...) are planned the same way when
// their slot did one launch (or one cuBLASLt call) on their arguments and one fresh output.
// No op knowledge and no CUDA headers here: the device's builder says what each kernel
// parameter is (an output/tensor address, a scalar argument, a constant, with its C type);
// this file keys, packs and launches. libcuda is opened on the first plan that launches, so
// the module builds and imports on machines without CUDA. A plan without a function (the
// fake device) packs the same bytes and hands them to the plan's `fake` hook instead.

#include "devplan.h"

#include <structmember.h>

#include <cstring>
#include <string>
#include <pybind11/pybind11.h>

namespace py = pybind11;
using namespace ember_dev;

namespace ember_dev {
DG D;
}  // namespace ember_dev

namespace {

std::unordered_map<PyObject*, DevEntry*> g_dev;

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
                      p->alloc, p->malloc, p->allocator, p->nbytes, p->size, p->rkey})
    Py_XDECREF(o);
  for (auto& s : p->steps) Py_XDECREF(s.fake);
  for (auto& b : p->bufs)
    for (PyObject* o : {b.shape, b.stride, b.rdt, b.nbytes, b.size, b.rkey}) Py_XDECREF(o);
  delete p;
}

// One launch from the builder's (launch, params, fake); false: not replayable here.
// launch: (function, gx, gy, gz, block_x, shared, ctx[, C call]); params: (src, ctype, value)
bool parse_step(PyObject* ln, PyObject* params, PyObject* fake, DevPlan* p, Step* s) {
  if (!PyTuple_Check(ln) || PyTuple_GET_SIZE(ln) < 7 || !PyTuple_Check(params) ||
      PyTuple_GET_SIZE(params) > kMaxParams)
    return false;
  s->fake = keep(fake);
  s->func = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(ln, 0));
  s->gx = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ln, 1));
  s->gy = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ln, 2));
  s->gz = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ln, 3));
  s->bx = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ln, 4));
  s->shared = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ln, 5));
  uint64_t ctx = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(ln, 6));
  if (ctx != 0) p->ctx = ctx;
  // (an 8th item 1: `function` is a C function of the u64 parameters, as cublasLtMatmul)
  s->ccall = PyTuple_GET_SIZE(ln) >= 8 && PyObject_IsTrue(PyTuple_GET_ITEM(ln, 7)) == 1;
  if (s->ccall && PyTuple_GET_SIZE(params) > 16) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(params); ++i) {
    PyObject* q = PyTuple_GET_ITEM(params, i);
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
    if (pr.src < -2 - static_cast<int>(p->bufs.size())) return false;  // (no such buffer)
    s->params.push_back(pr);
  }
  return PyErr_Occurred() == nullptr && (s->func == 0 || s->ccall || open_cuda());
}

// The builder's extra buffers and launches: ((is output, shape, stride, rdt, nbytes, size),
// ...), ((launch, params, fake), ...); false: not replayable here.
bool parse_extra(PyObject* x, DevPlan* p) {
  if (x == Py_None) return true;
  if (!PyTuple_Check(x) || PyTuple_GET_SIZE(x) != 2) return false;
  PyObject* bufs = PyTuple_GET_ITEM(x, 0);
  PyObject* steps = PyTuple_GET_ITEM(x, 1);
  if (!PyTuple_Check(bufs) || PyTuple_GET_SIZE(bufs) > kMaxBufs || !PyTuple_Check(steps) ||
      PyTuple_GET_SIZE(steps) > kMaxSteps || D.nbuffer == nullptr || p->malloc == nullptr)
    return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(bufs); ++i) {
    PyObject* b = PyTuple_GET_ITEM(bufs, i);
    if (!PyTuple_Check(b) || PyTuple_GET_SIZE(b) != 6) return false;
    Buf f;
    f.out = PyObject_IsTrue(PyTuple_GET_ITEM(b, 0)) == 1;
    f.shape = keep(PyTuple_GET_ITEM(b, 1));
    f.stride = keep(PyTuple_GET_ITEM(b, 2));
    f.rdt = keep(PyTuple_GET_ITEM(b, 3));
    f.nbytes = keep(PyTuple_GET_ITEM(b, 4));
    f.size = keep(PyTuple_GET_ITEM(b, 5));
    PyObject* zero = PyLong_FromLong(0);
    f.rkey = zero == nullptr || f.size == nullptr ? nullptr : PyTuple_Pack(2, zero, f.size);
    Py_XDECREF(zero);
    p->bufs.push_back(f);  // (owned refs freed with the plan)
    if (f.rkey == nullptr || f.nbytes == nullptr || !PyLong_CheckExact(f.nbytes) ||
        (f.out && (f.shape == nullptr || f.stride == nullptr || f.rdt == nullptr)))
      return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(steps); ++i) {
    PyObject* t = PyTuple_GET_ITEM(steps, i);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) return false;
    p->steps.emplace_back();
    if (!parse_step(PyTuple_GET_ITEM(t, 0), PyTuple_GET_ITEM(t, 1), PyTuple_GET_ITEM(t, 2), p,
                    &p->steps.back()))
      return false;
  }
  return true;
}

// The plan described by the builder's answer d (see ember/_native.py `register_device`) for
// this call's args; nullptr when it cannot be replayed here.
DevPlan* build_plan(PyObject* d, PyObject* args, int reg) {
  if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) < 9 || PyTuple_GET_SIZE(d) > 10) return nullptr;
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
  if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) != 5) {
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
  // (the buffers first: the steps' parameters name them)
  bool parsed = parse_extra(PyTuple_GET_ITEM(d, 8), p);
  if (parsed) {
    p->steps.insert(p->steps.begin(), Step());
    parsed = parse_step(PyTuple_GET_ITEM(d, 5), PyTuple_GET_ITEM(d, 6), PyTuple_GET_ITEM(d, 7),
                        p, &p->steps.front());
  }
  if (!parsed) {
    PyErr_Clear();
    free_plan(p);
    return nullptr;
  }
  // (a 10th item: the result's items, None where the call returns None)
  PyObject* ret = PyTuple_GET_SIZE(d) == 10 ? PyTuple_GET_ITEM(d, 9) : Py_None;
  int nout = 1;
  for (const Buf& b : p->bufs) nout += b.out;
  if (ret != Py_None) {
    if (!PyTuple_Check(ret) || PyTuple_GET_SIZE(ret) > kMaxBufs + 2) parsed = false;
    for (Py_ssize_t i = 0; parsed && i < PyTuple_GET_SIZE(ret); ++i) {
      PyObject* v = PyTuple_GET_ITEM(ret, i);
      long k = v == Py_None ? -1 : PyLong_Check(v) ? PyLong_AsLong(v) : -2;
      if (k < -1 || k >= nout) parsed = false;
      p->ret.push_back(static_cast<int>(k));
    }
  }
  bool bad = !parsed || PyErr_Occurred() != nullptr || p->shape == nullptr || p->stride == nullptr ||
             p->rdt == nullptr || p->device == nullptr ||
             (p->alloc == nullptr && (p->malloc == nullptr || p->allocator == nullptr ||
                                      p->nbytes == nullptr || !PyLong_CheckExact(p->nbytes)));
  if (bad) {
    PyErr_Clear();
    free_plan(p);
    return nullptr;
  }
  return p;
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
      if (D.ctx_get == nullptr && !open_cuda()) return nullptr;
      if (D.ctx_get(&cur) != 0 || cur != p->ctx) return nullptr;  // Python binds it
    }
    *blocked = false;
    return p;
  }
  return nullptr;
}

char miss_tag;
PyObject* const kMiss = reinterpret_cast<PyObject*>(&miss_tag);  // (no object's address)

// The replay of this call's plan when one matches and may run (a hit: a new Tensor, or nullptr
// with an error), else kMiss (counted; *blocked: one matched but may not run now). only: that
// plan alone (one just built for this call), neither hit nor miss counted.
PyObject* replay_hit(DevEntry* e, PyObject* args, bool* blocked, const DevPlan* only = nullptr) {
  uint64_t addrs[kMaxParams];
  const DevPlan* p = find(e, args, addrs, blocked);
  if (only != nullptr) return p == only ? replay(p, args, addrs) : kMiss;
  if (p == nullptr) {
    ++D.misses;
    return kMiss;
  }
  ++D.hits;
  return replay(p, args, addrs);
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

// The registration of a factory's device argument: a device object's type, a string's part
// before ':' ("cuda:1"); -1 for none.
int reg_of_arg(PyObject* dev) {
  if (!PyUnicode_Check(dev)) return reg_of(dev);
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(dev, &n);
  if (s == nullptr) {
    PyErr_Clear();
    return -1;
  }
  const char* colon = static_cast<const char*>(std::memchr(s, ':', n));
  std::string type(s, colon != nullptr ? colon - s : n);
  for (size_t i = 0; i < D.regs.size(); ++i)
    if (D.regs[i].type == type) return static_cast<int>(i);
  return -1;
}

// Ask the device's builder (registration reg) for the plan of this call; nullptr when none.
const DevPlan* ask(DevEntry* e, PyObject* op, PyObject* args, int reg) {
  if (e->failed >= kMaxFailed || static_cast<int>(e->plans.size()) >= kMaxPlans) return nullptr;
  uint64_t ph = pattern_hash(args);
  auto seen = e->asked.find(ph);
  if (seen != e->asked.end() && seen->second >= kMaxAsks) return nullptr;
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
  bool blocked = false;
  PyObject* r = replay_hit(e, args, &blocked);
  if (r != kMiss) return r;
  if (kernel == nullptr) {  // autograd's recording: a plan the Python path built meanwhile
    if (blocked) return Py_None;
    const DevPlan* p = ask(e, op, args, reg_of(tslot(first, DEVICE)));
    r = p != nullptr ? replay_hit(e, args, &blocked, p) : kMiss;
    return r == kMiss ? Py_None : r;
  }
  r = PyObject_Call(kernel, args, nullptr);
  if (r != nullptr && !blocked && (Py_TYPE(r) == D.tensor || PyTuple_CheckExact(r)))
    ask(e, op, args, reg_of(tslot(first, DEVICE)));
  return r;
}

// A factory call (zeros / ones / empty / full / arange: no tensor argument) whose device
// argument `dev` is not the CPU (mutpath.cpp hands it here): a plan's hit (its allocation and
// fill), else the device's kernel slot run as dispatch's `execute` runs it (then the builder
// is asked for this call's plan). Py_None (borrowed): the Python path, as for a device without
// a registration or a slot that declines the call (NotImplemented: dispatch's fallback rule).
PyObject* devplan_factory(PyObject* op, PyObject* args, PyObject* dev) {
  if (!D.ready || D.regs.empty()) return Py_None;
  int reg = reg_of_arg(dev);
  if (reg < 0) return Py_None;
  DevEntry* e = entry(op);
  bool blocked = false;
  PyObject* r = replay_hit(e, args, &blocked);
  if (r != kMiss) return r;
  PyObject* kernels = PyObject_GetAttrString(op, "kernels");
  if (kernels == nullptr) return nullptr;
  PyObject* k = nullptr;
  if (PyDict_Check(kernels)) k = PyDict_GetItemString(kernels, D.regs[reg].type.c_str());
  Py_XINCREF(k);
  Py_DECREF(kernels);
  if (k == nullptr) return Py_None;  // (no slot: dispatch's no_kernel rule)
  r = PyObject_Call(k, args, nullptr);
  Py_DECREF(k);
  if (r == Py_NotImplemented) {
    Py_DECREF(r);
    return Py_None;
  }
  if (r != nullptr && !blocked && Py_TYPE(r) == D.tensor) ask(e, op, args, reg);
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
