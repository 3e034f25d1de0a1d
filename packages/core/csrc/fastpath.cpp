// The eager hot path of a CPU op call, replayed in C++ (ember/_native.py is its Python side and
// says what a hit is; ember/_dispatch.py's `call` is the reference it must equal).
//
//   call(op, args, out) -- out given, a mode/autocast on, a subclass with its own dispatch,
//   another device, a list op, a big input ... --> Python's dispatch `call`
//   a view, in-place op or factory --> viewpath.cpp / mutpath.cpp (or Python's `call`)
//   pointwise hit: [op.check(dtype, *args)] -> plan (one numpy handler, or the formula) -> Tensor
//   kernel-op hit: [dtype-category check] -> op.kernels["cpu"](*arrays) -> Tensor(s)
//   an input requires grad (grad on): the node is built by fastpath_grad.cpp, or by autograd's
//   Python `record` for what that file declines
//
// No op knowledge lives here: Python describes an op once (its formula, check, tensor positions)
// and builds each plan on a miss; this file only keys, replays and wraps the result.

#include "fastpath.h"

#include <structmember.h>

#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace py = pybind11;
using ember_native::GradOp;

// devplan.cpp: device launch plans (a call whose first tensor is on a registered device)
PyObject* devplan_call(PyObject* op, PyObject* args, PyObject* first, PyObject* kernel);
void devplan_bind(PyTypeObject* tensor, const Py_ssize_t* off, PyObject* zero);
// viewpath.cpp: view ops (metadata only, any device)
int viewpath_kind(PyObject* op);
PyObject* viewpath_call(int kind, PyObject* op, PyObject* args);

namespace {

// numpy's PyArrayObject_fields (numpy/ndarraytypes.h, unchanged since numpy 1.7 up to 2.x):
// read without numpy's headers; fastpath_init checks the layout against real arrays first.
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

// One scalar argument of a call as part of a plan's key (its type and exact value).
struct KeyItem {
  PyTypeObject* type = nullptr;  // int, float, bool, NoneType, str
  long long i = 0;               // int / bool value, or a float's bits
  PyObject* s = nullptr;         // a str (owned)
};

struct Plan {
  PyObject* dtype = nullptr;     // the tensors' ember dtype
  uint32_t tmask = 0;            // bit i: argument i is a tensor (the scalars' positions)
  std::vector<KeyItem> key;      // one per scalar position, in order
  PyObject* fn = nullptr;        // the numpy handler to call (owned); nullptr: run the formula
  std::vector<int> spec;         // >= 0: argument position; < 0: -1 - index into consts
  std::vector<PyObject*> consts; // owned
};

struct OpEntry {
  bool enabled = false;
  bool kernel = false;           // not pointwise: op.kernels["cpu"] on the arrays (try_kernel)
  PyObject* formula = nullptr;   // op.pointwise (borrowed from the op, which lives forever)
  PyObject* check = nullptr;     // op.check (kernel ops: their dtype-category check) or nullptr
  PyObject* kernels = nullptr;   // op.kernels (a plain dict: device type -> kernel) or nullptr
  Py_ssize_t nargs = 0;
  std::vector<char> is_tensor;   // per position: a Tensor slot of the schema
  bool promote_bool = false;
  int view = 0;                  // a view op: its rule in viewpath.cpp (0: none)
  std::vector<Plan> plans;
};

struct Globals {
  bool ready = false;
  bool enabled = true;             // fastpath_enable(False): every call takes the Python path
  PyTypeObject* tensor = nullptr;
  PyTypeObject* ndarray = nullptr;
  PyObject* cpu = nullptr;
  PyObject* special = nullptr;   // _dispatch.special: [count of active modes / autocast]
  PyObject* f32 = nullptr;
  PyObject* f64 = nullptr;
  PyObject* f8a = nullptr;       // float8_e4m3fn and float8_e5m2: their checks are Python's
  PyObject* f8b = nullptr;
  PyObject* boolean = nullptr;
  PyObject* np_f32 = nullptr;
  PyObject* np_f64 = nullptr;
  PyObject* np_bool = nullptr;
  PyObject* dispatch = nullptr;    // _dispatch's globals: NP (the numpy handler) is read per
  PyObject* str_NP = nullptr;      // call, as ember._ops._handlers replaces it after import
  PyObject* str_hook = nullptr;    // _dispatch.autograd_hook (set by ember-autograd)
  PyObject* state = nullptr;       // ember._state.state (thread-local grad mode)
  PyObject* str_grad = nullptr;
  PyObject* str_type = nullptr;
  PyObject* strides = nullptr;     // _tensor._STRIDES
  PyObject* c_strides = nullptr;   // _tensor.c_strides
  PyObject* py_call = nullptr;     // _dispatch.call (the reference path)
  PyObject* describe = nullptr;    // _native.describe(op) -> None | (formula, check, ...)
  PyObject* planner = nullptr;     // _native.plan(op, args, arrays) -> None | (fn, spec, consts)
  PyObject* finish = nullptr;      // _dispatch._fast_finish(r, rdt) -> Tensor | None
  PyObject* py_wrap = nullptr;     // _dispatch._wrap(op, r, args): kernel results -> tensors
  PyObject* by_np = nullptr;       // numpy dtype -> ember dtype (_dtype._BY_NP)
  PyObject* str_cpu = nullptr;
  PyObject* zero = nullptr;
  PyObject* str_np = nullptr;
  PyObject* str_rg = nullptr;
  Py_ssize_t big = 1 << 16;        // inputs this large go to Python (the C++ JIT, chunking)
  Py_ssize_t off[7] = {0};         // Tensor slots: _st _shape _stride _offset dtype device _npc
  long hits = 0, misses = 0;
};
Globals G;
std::unordered_map<PyObject*, OpEntry*> g_ops;
constexpr int kMaxPlans = 16;
// try_fast's answer for "an input requires grad": autograd records the call
PyObject* const kRecord = reinterpret_cast<PyObject*>(&G);
// try_fast's answer for "the first tensor is on another device": its kernel slot may run it
PyObject* const kDevice = reinterpret_cast<PyObject*>(&g_ops);
constexpr int kMaxArgs = 16;
constexpr int kMaxCachedDims = 8;

enum Slot { ST, SHAPE, STRIDE, OFFSET, DTYPE, DEVICE, NPC };

inline PyObject* slot(PyObject* t, Slot s) {
  return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(t) + G.off[s]);
}

inline void set_slot(PyObject* t, Slot s, PyObject* v) {  // on a fresh object: no old value
  Py_INCREF(v);
  *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(t) + G.off[s]) = v;
}

PyObject* fallback(PyObject* op, PyObject* args, PyObject* out) {
  PyObject* argv[3] = {op, args, out};
  return PyObject_Vectorcall(G.py_call, argv, 3, nullptr);
}

OpEntry* entry_of(PyObject* op) {
  auto it = g_ops.find(op);
  if (it != g_ops.end()) return it->second;
  auto* e = new OpEntry();
  PyObject* d = PyObject_CallOneArg(G.describe, op);
  if (d == nullptr) {
    delete e;
    return nullptr;
  }
  // (formula or None for a kernel op, check or None, is_tensor tuple of bools, promote_bool,
  // kernels)
  if (d != Py_None && PyTuple_Check(d) && PyTuple_GET_SIZE(d) == 5) {
    e->formula = PyTuple_GET_ITEM(d, 0);
    Py_INCREF(e->formula);
    e->kernel = e->formula == Py_None;
    PyObject* c = PyTuple_GET_ITEM(d, 1);
    if (c != Py_None) {
      e->check = c;
      Py_INCREF(c);
    }
    PyObject* ist = PyTuple_GET_ITEM(d, 2);
    e->nargs = PyTuple_GET_SIZE(ist);
    for (Py_ssize_t i = 0; i < e->nargs; ++i)
      e->is_tensor.push_back(PyTuple_GET_ITEM(ist, i) == Py_True);
    e->promote_bool = PyTuple_GET_ITEM(d, 3) == Py_True;
    PyObject* k = PyTuple_GET_ITEM(d, 4);
    if (PyDict_CheckExact(k)) {
      e->kernels = k;
      Py_INCREF(k);
    }
    e->enabled = e->nargs <= kMaxArgs;
    e->plans.reserve(kMaxPlans);
  } else if (d == Py_None) {
    e->view = viewpath_kind(op);
  }
  Py_DECREF(d);
  Py_INCREF(op);  // ops live as long as the op table; keep the key alive regardless
  g_ops.emplace(op, e);
  return e;
}

// A scalar argument as a key item; false when its type cannot be keyed by value.
bool key_item(PyObject* v, KeyItem* k) {
  PyTypeObject* t = Py_TYPE(v);
  k->type = t;
  if (t == &PyFloat_Type) {
    double f = PyFloat_AS_DOUBLE(v);
    std::memcpy(&k->i, &f, sizeof f);
    return true;
  }
  if (t == &PyLong_Type) {
    int overflow = 0;
    k->i = PyLong_AsLongLongAndOverflow(v, &overflow);
    return overflow == 0;
  }
  if (t == &PyBool_Type) {
    k->i = v == Py_True;
    return true;
  }
  if (v == Py_None) return true;
  if (t == &PyUnicode_Type) {
    k->s = v;  // borrowed until stored in a plan
    return true;
  }
  return false;
}

bool key_equal(const KeyItem& a, const KeyItem& b) {
  if (a.type != b.type || a.i != b.i) return false;
  if (a.s == nullptr) return true;
  return PyUnicode_Compare(a.s, b.s) == 0;
}

// Build (ask Python for) the plan of a key not seen before; nullptr when none (run the formula).
const Plan* add_plan(OpEntry* e, PyObject* op, PyObject* args, PyObject* arrs, PyObject* d,
                     uint32_t tmask, const std::vector<KeyItem>& key) {
  if (static_cast<int>(e->plans.size()) >= kMaxPlans) return nullptr;
  PyObject* argv[3] = {op, args, arrs};
  PyObject* r = PyObject_Vectorcall(G.planner, argv, 3, nullptr);
  if (r == nullptr) {  // the planner never raises on purpose: a bug there must not stop a call
    PyErr_Clear();
    return nullptr;
  }
  // (the planner ran Python: another thread may have added plans meanwhile; the vector's
  // reserved size must hold, or a plan another thread is using would move)
  if (static_cast<int>(e->plans.size()) >= kMaxPlans) {
    Py_DECREF(r);
    return nullptr;
  }
  Plan p;
  p.dtype = d;
  p.tmask = tmask;
  p.key = key;
  for (auto& k : p.key) Py_XINCREF(k.s);
  if (r != Py_None) {  // (fn, spec tuple, consts tuple)
    p.fn = PyTuple_GET_ITEM(r, 0);
    Py_INCREF(p.fn);
    PyObject* spec = PyTuple_GET_ITEM(r, 1);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(spec); ++i)
      p.spec.push_back(static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(spec, i))));
    PyObject* consts = PyTuple_GET_ITEM(r, 2);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(consts); ++i) {
      PyObject* c = PyTuple_GET_ITEM(consts, i);
      Py_INCREF(c);
      p.consts.push_back(c);
    }
  }
  Py_DECREF(r);
  e->plans.push_back(std::move(p));  // (reserved: a plan in use never moves)
  return &e->plans.back();
}

// The numpy array behind a CPU tensor (its fresh-result array, else `t._np`): new reference.
PyObject* array_of(PyObject* t) {
  PyObject* a = slot(t, NPC);
  if (a != nullptr && a != Py_None) {
    Py_INCREF(a);
    return a;
  }
  return PyObject_GetAttr(t, G.str_np);
}

bool requires_grad(PyObject* t) {
  PyObject** dp = _PyObject_GetDictPtr(t);
  if (dp == nullptr || *dp == nullptr) return false;  // the class default: False
  PyObject* v = PyDict_GetItemWithError(*dp, G.str_rg);
  return v != nullptr && PyObject_IsTrue(v) == 1;
}

// A result shape's tuple and its contiguous strides, one pair per shape: fresh results share
// them (fewer objects per op for the cyclic GC to walk; tuples are immutable).
struct ShapeKey {
  int nd;
  Py_ssize_t dims[kMaxCachedDims];
  bool operator==(const ShapeKey& o) const {
    return nd == o.nd && std::memcmp(dims, o.dims, sizeof(Py_ssize_t) * nd) == 0;
  }
};
struct ShapeHash {
  size_t operator()(const ShapeKey& k) const {
    size_t h = static_cast<size_t>(k.nd);
    for (int i = 0; i < k.nd; ++i) h = h * 1000003u ^ static_cast<size_t>(k.dims[i]);
    return h;
  }
};
std::unordered_map<ShapeKey, std::pair<PyObject*, PyObject*>, ShapeHash> g_shapes;

// (shape, strides) of an array's dims: new references.
bool shape_of(const NpArray* a, PyObject** shape, PyObject** strides) {
  ShapeKey k;
  k.nd = a->nd;
  bool cached = a->nd <= kMaxCachedDims;
  if (cached) {
    std::memcpy(k.dims, a->dimensions, sizeof(Py_ssize_t) * a->nd);
    auto it = g_shapes.find(k);
    if (it != g_shapes.end()) {
      *shape = it->second.first;
      *strides = it->second.second;
      Py_INCREF(*shape);
      Py_INCREF(*strides);
      return true;
    }
  }
  PyObject* sh = PyTuple_New(a->nd);
  if (sh == nullptr) return false;
  for (int i = 0; i < a->nd; ++i) {
    PyObject* n = PyLong_FromSsize_t(a->dimensions[i]);
    if (n == nullptr) {
      Py_DECREF(sh);
      return false;
    }
    PyTuple_SET_ITEM(sh, i, n);
  }
  PyObject* st = PyObject_CallOneArg(G.c_strides, sh);
  if (st == nullptr) {
    Py_DECREF(sh);
    return false;
  }
  if (cached) {
    if (g_shapes.size() >= 4096) {
      for (auto& e : g_shapes) {
        Py_DECREF(e.second.first);
        Py_DECREF(e.second.second);
      }
      g_shapes.clear();
    }
    Py_INCREF(sh);
    Py_INCREF(st);
    g_shapes.emplace(k, std::make_pair(sh, st));
  }
  *shape = sh;
  *strides = st;
  return true;
}

// Wrap a fresh C-contiguous array as a CPU tensor (Tensor._make(None, shape, strides, 0, ...)).
PyObject* wrap(PyObject* r, PyObject* rdt) {
  PyObject *shape, *st;
  if (!shape_of(reinterpret_cast<NpArray*>(r), &shape, &st)) return nullptr;
  PyObject* t = G.tensor->tp_alloc(G.tensor, 0);
  if (t != nullptr) {
    set_slot(t, ST, Py_None);
    set_slot(t, SHAPE, shape);
    set_slot(t, STRIDE, st);
    set_slot(t, OFFSET, G.zero);
    set_slot(t, DTYPE, rdt);
    set_slot(t, DEVICE, G.cpu);
    set_slot(t, NPC, r);
  }
  Py_DECREF(shape);
  Py_DECREF(st);
  return t;
}

struct ArgArrays {  // the call's args with tensors replaced by their arrays (owned refs)
  PyObject* v[kMaxArgs];
  Py_ssize_t n = 0;
  ~ArgArrays() {
    for (Py_ssize_t i = 0; i < n; ++i) Py_DECREF(v[i]);
  }
};

PyObject* compute(OpEntry* e, const Plan* p, PyObject* const* av, Py_ssize_t n) {
  if (p != nullptr && p->fn != nullptr) {
    PyObject* cv[kMaxArgs + 1];
    size_t k = 0;
    for (int s : p->spec) cv[k++] = s >= 0 ? av[s] : p->consts[-1 - s];
    return PyObject_Vectorcall(p->fn, cv, k, nullptr);
  }
  PyObject* fv[kMaxArgs + 1];
  fv[0] = PyDict_GetItemWithError(G.dispatch, G.str_NP);  // borrowed
  if (fv[0] == nullptr) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "ember._dispatch.NP is unset");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < n; ++i) fv[i + 1] = av[i];
  return PyObject_Vectorcall(e->formula, fv, n + 1, nullptr);
}

// How a call with an input that requires grad is recorded: its node built here (*g set), in
// Python (kRecord), or not at all (grad off, or no ember-autograd): nullptr with an error set.
PyObject* recording(PyObject* op, GradOp** g) {
  PyObject* on = PyObject_GetAttr(G.state, G.str_grad);
  if (on == nullptr) return nullptr;
  Py_DECREF(on);  // (True / False are immortal enough: compared by identity)
  if (on != Py_True) return Py_None;
  PyObject* hook = PyDict_GetItemWithError(G.dispatch, G.str_hook);  // borrowed
  if (hook == nullptr) return PyErr_Occurred() ? nullptr : Py_None;
  if (hook == Py_None) return Py_None;
  if (!ember_native::grad_native_now(hook)) return kRecord;
  *g = ember_native::grad_op(op);
  if (*g == nullptr) return PyErr_Occurred() ? nullptr : kRecord;
  return Py_None;
}

// The ember dtype of a numpy dtype object (borrowed; nullptr: none, or an error).
PyObject* dtype_of(PyObject* descr) {
  static std::unordered_map<PyObject*, PyObject*> known;  // (numpy's dtypes live forever)
  auto it = known.find(descr);
  if (it != known.end()) return it->second;
  PyObject* dt = PyDict_GetItemWithError(G.by_np, descr);
  if (dt != nullptr) {
    Py_INCREF(descr);
    Py_INCREF(dt);
    known.emplace(descr, dt);
  }
  return dt;
}

// Whether t is a Tensor subclass that dispatch treats as a Tensor below autograd (nn.Parameter:
// no `__ember_dispatch__` of its own; same slots as Tensor). Cached per class.
bool plain_subclass(PyTypeObject* t) {
  static std::unordered_map<PyTypeObject*, bool> known;
  auto it = known.find(t);
  if (it != known.end()) return it->second;
  bool plain = PyType_IsSubtype(t, G.tensor) &&
               !PyObject_HasAttrString(reinterpret_cast<PyObject*>(t), "__ember_dispatch__") &&
               !PyObject_HasAttrString(reinterpret_cast<PyObject*>(t), "__ember_function__");
  Py_INCREF(t);
  known.emplace(t, plain);
  return plain;
}

// The hit path of an op that is not pointwise: its cpu kernel on the arrays, as dispatch's
// `execute` runs it (`_wrap(op, kernel(*_np_args(op, args)), args)`), for CPU Tensors (or plain
// subclasses: nn.Parameter) and Python scalars / None in its Tensor slots; the node built here
// when an input requires grad.
bool has_cpu_kernel(OpEntry* e) {
  if (e->kernels == nullptr) return false;
  PyObject* k = PyDict_GetItemWithError(e->kernels, G.str_cpu);  // (live: register_kernel)
  PyErr_Clear();
  return k != nullptr;
}

PyObject* try_kernel(OpEntry* e, PyObject* op, PyObject* args) {
  GradOp* grad = nullptr;
  bool asked = false, any = false;
  ArgArrays aa;
  for (Py_ssize_t i = 0; i < e->nargs; ++i) {
    PyObject* v = PyTuple_GET_ITEM(args, i);
    PyTypeObject* t = Py_TYPE(v);
    if (t == G.tensor || (t->tp_dictoffset != 0 && plain_subclass(t))) {
      if (!e->is_tensor[i]) return Py_None;
      if (slot(v, DEVICE) != G.cpu)  // another device's slot (device_call), else Python
        return !any && e->kernels != nullptr ? kDevice : Py_None;
      if (!any && !has_cpu_kernel(e)) return Py_None;  // (a composite: Python decomposes it)
      PyObject* vdt = slot(v, DTYPE);
      if (vdt == G.f8a || vdt == G.f8b) return Py_None;  // (which ops float8 runs: Python)
      if (!asked && requires_grad(v)) {
        asked = true;
        PyObject* how = recording(op, &grad);
        if (how != Py_None) return how;  // kRecord, or nullptr (error)
      }
      PyObject* a = array_of(v);
      if (a == nullptr) return nullptr;
      aa.v[aa.n++] = a;
      any = true;
      continue;
    }
    if (e->is_tensor[i] && !(t == &PyFloat_Type || t == &PyLong_Type || t == &PyBool_Type ||
                             v == Py_None))
      return Py_None;  // a subclass with its own dispatch, a numpy value, ...: Python decides
    Py_INCREF(v);
    aa.v[aa.n++] = v;
  }
  if (!any) return Py_None;  // (factories: the device comes from their arguments)
  ++G.hits;
  if (e->check != nullptr) {
    PyObject* r = PyObject_CallOneArg(e->check, args);
    if (r == nullptr) return nullptr;
    Py_DECREF(r);
  }
  PyObject* k = PyDict_GetItemWithError(e->kernels, G.str_cpu);  // (live: register_kernel)
  if (k == nullptr) return PyErr_Occurred() ? nullptr : Py_None;
  PyObject* r = PyObject_Vectorcall(k, aa.v, aa.n, nullptr);
  if (r == nullptr) return nullptr;  // the kernel's error, as the Python path raises it
  PyObject* res = nullptr;
  auto* na = reinterpret_cast<NpArray*>(r);
  PyObject* dt = nullptr;
  if (Py_TYPE(r) == G.ndarray && na->base == nullptr && (na->flags & kCContiguous)) {
    dt = dtype_of(na->descr);
    if (dt == nullptr && PyErr_Occurred()) {
      Py_DECREF(r);
      return nullptr;
    }
  }
  if (dt != nullptr) {
    res = wrap(r, dt);
  } else {
    PyObject* wv[3] = {op, r, args};
    res = PyObject_Vectorcall(G.py_wrap, wv, 3, nullptr);
  }
  Py_DECREF(r);
  if (res != nullptr && grad != nullptr && ember_native::grad_record(grad, op, args, res) != 0)
    Py_CLEAR(res);
  return res;
}

// The hit path; returns nullptr with no error set for "take the Python path".
// grad_ok: autograd's `record` asks (it records the node itself).
PyObject* try_fast(PyObject* op, PyObject* args, bool grad_ok) {
  OpEntry* e = entry_of(op);
  if (e == nullptr) return nullptr;  // error set
  if (e->view != 0) return grad_ok ? Py_None : viewpath_call(e->view, op, args);
  if (!e->enabled || PyTuple_GET_SIZE(args) != e->nargs) return Py_None;
  if (e->kernel) return grad_ok ? Py_None : try_kernel(e, op, args);
  GradOp* grad = nullptr;   // set: this call's node is built here
  bool asked = grad_ok;     // whether recording() was asked (once per call)
  bool scalar_for_tensor = false;
  ArgArrays aa;
  PyObject* d = nullptr;
  Py_ssize_t big = 0;
  KeyItem keys[kMaxArgs];
  int nkeys = 0;
  uint32_t tmask = 0;
  bool keyable = true;
  for (Py_ssize_t i = 0; i < e->nargs; ++i) {
    PyObject* v = PyTuple_GET_ITEM(args, i);
    if (Py_TYPE(v) == G.tensor) {
      if (!e->is_tensor[i]) return Py_None;
      if (slot(v, DEVICE) != G.cpu)  // (recording: only a device plan's hit, see devplan.cpp)
        return d == nullptr && e->kernels != nullptr ? kDevice : Py_None;
      if (!asked && requires_grad(v)) {
        asked = true;
        PyObject* how = recording(op, &grad);
        if (how != Py_None) return how;  // kRecord, or nullptr (error)
      }
      PyObject* dt = slot(v, DTYPE);
      if (d == nullptr) {
        if (dt != G.f32 && dt != G.f64) return Py_None;
        d = dt;
      } else if (dt != d) {
        return Py_None;
      }
      tmask |= 1u << i;
      PyObject* a = array_of(v);
      if (a == nullptr) return nullptr;
      aa.v[aa.n++] = a;
      if (Py_TYPE(a) != G.ndarray) return Py_None;
      auto* na = reinterpret_cast<NpArray*>(a);
      Py_ssize_t size = 1;
      for (int k = 0; k < na->nd; ++k) size *= na->dimensions[k];
      if (size > big) big = size;
    } else {
      PyTypeObject* t = Py_TYPE(v);
      // a Python scalar for a tensor passes as it is (dispatch's `call` does the same);
      // autograd's recording takes only tensors there (grad_ok: its reference is record())
      if (e->is_tensor[i]) {
        if (grad_ok || !(t == &PyFloat_Type || t == &PyLong_Type || t == &PyBool_Type ||
                         v == Py_None))
          return Py_None;  // a subclass, a numpy value, a complex, ...: Python decides
        scalar_for_tensor = true;
      }
      if (keyable && !key_item(v, &keys[nkeys++])) keyable = false;
      Py_INCREF(v);
      aa.v[aa.n++] = v;
    }
  }
  if (d == nullptr || big >= G.big) return Py_None;
  // autograd's record computes such a call through the general path, not this one
  if (grad != nullptr && scalar_for_tensor) return kRecord;
  const Plan* plan = nullptr;
  if (keyable) {
    for (const Plan& p : e->plans) {
      if (p.dtype != d || p.tmask != tmask) continue;
      bool same = true;
      for (int k = 0; k < nkeys && same; ++k) same = key_equal(p.key[k], keys[k]);
      if (same) {
        plan = &p;
        break;
      }
    }
  }
  if (e->check != nullptr) {
    PyObject* cv[kMaxArgs + 1];
    cv[0] = d;
    for (Py_ssize_t i = 0; i < e->nargs; ++i) cv[i + 1] = PyTuple_GET_ITEM(args, i);
    PyObject* r = PyObject_Vectorcall(e->check, cv, e->nargs + 1, nullptr);
    if (r == nullptr) return nullptr;  // PyTorch's argument error, as the Python path raises
    Py_DECREF(r);
  }
  if (plan == nullptr && keyable) {
    PyObject* arrs = PyTuple_New(aa.n);
    if (arrs == nullptr) return nullptr;
    for (Py_ssize_t i = 0; i < aa.n; ++i) {
      Py_INCREF(aa.v[i]);
      PyTuple_SET_ITEM(arrs, i, aa.v[i]);
    }
    plan = add_plan(e, op, args, arrs, d, tmask, std::vector<KeyItem>(keys, keys + nkeys));
    Py_DECREF(arrs);
    ++G.misses;
  } else {
    ++G.hits;
  }
  PyObject* r = compute(e, plan, aa.v, aa.n);
  if (r == nullptr) {
    // as _fast_core: these mean "the general path raises PyTorch's error"
    if (PyErr_ExceptionMatches(PyExc_ValueError) || PyErr_ExceptionMatches(PyExc_TypeError) ||
        PyErr_ExceptionMatches(PyExc_OverflowError)) {
      PyErr_Clear();
      return Py_None;
    }
    return nullptr;
  }
  PyObject* rdt = e->promote_bool ? G.boolean : d;
  PyObject* npd = e->promote_bool ? G.np_bool : (d == G.f32 ? G.np_f32 : G.np_f64);
  for (Py_ssize_t i = 0; i < aa.n; ++i) {
    if (aa.v[i] == r) {  // a formula that hands back its input: never alias it
      PyObject* c = PyObject_CallMethod(r, "copy", nullptr);
      Py_DECREF(r);
      if (c == nullptr) return nullptr;
      r = c;
      break;
    }
  }
  bool plain = Py_TYPE(r) == G.ndarray;
  if (plain) {
    auto* na = reinterpret_cast<NpArray*>(r);
    plain = na->descr == npd && na->base == nullptr && (na->nd <= 1 || (na->flags & kCContiguous));
  }
  PyObject* t;
  if (plain) {
    t = wrap(r, rdt);
  } else {
    PyObject* fv[2] = {r, rdt};
    t = PyObject_Vectorcall(G.finish, fv, 2, nullptr);
  }
  Py_DECREF(r);
  if (t == Py_None) {  // (the Python path decides; it records)
    Py_DECREF(t);
    return grad != nullptr ? kRecord : Py_None;
  }
  if (t != nullptr && grad != nullptr && ember_native::grad_record(grad, op, args, t) != 0)
    Py_CLEAR(t);
  return t;  // a Tensor or nullptr (error)
}

// As dispatch's `call` for a call whose first tensor is on another device (cuda): that
// device's kernel slot runs it, through its launch plan when one was built (devplan.cpp); when
// an input requires grad the node is built here too (grad off while the slot runs, as autograd's
// `record` runs the op below it). Py_None: take the Python path.
PyObject* device_call(PyObject* op, PyObject* args, bool grad_on) {
  OpEntry* e = g_ops.find(op)->second;  // (try_fast made the entry)
  PyObject* first = nullptr;
  bool needs_grad = false, scalar_for_tensor = false;
  for (Py_ssize_t i = 0; i < e->nargs; ++i) {
    if (!e->is_tensor[i]) continue;
    PyObject* v = PyTuple_GET_ITEM(args, i);
    PyTypeObject* t = Py_TYPE(v);
    if (t == G.tensor || (t->tp_dictoffset != 0 && plain_subclass(t))) {
      if (first == nullptr) {
        first = v;
      } else if (e->kernel && slot(v, DEVICE) != slot(first, DEVICE) &&
                 PyObject_RichCompareBool(slot(v, DEVICE), slot(first, DEVICE), Py_EQ) != 1) {
        PyErr_Clear();
        return Py_None;  // devices mixed: dispatch's find_device decides
      }
      if (grad_on && !needs_grad && requires_grad(v)) needs_grad = true;
    } else if (t == &PyFloat_Type || t == &PyLong_Type || t == &PyBool_Type) {
      scalar_for_tensor = true;
    } else if (v != Py_None) {  // (None: an optional tensor left out, nll_loss's weight)
      return Py_None;
    }
  }
  GradOp* grad = nullptr;
  if (needs_grad) {
    PyObject* how = recording(op, &grad);
    if (how == kRecord && e->kernel && e->check != nullptr) {  // (as `call`, before record)
      PyObject* r = PyObject_CallOneArg(e->check, args);
      if (r == nullptr) return nullptr;
      Py_DECREF(r);
    }
    if (how != Py_None) return how;  // kRecord: autograd's record (a composite decomposes)
    if (grad != nullptr && scalar_for_tensor) return Py_None;   // (as try_fast: record's)
  }
  if (e->kernel && e->check != nullptr) {  // (kernel ops: the dtype-category check)
    PyObject* r = PyObject_CallOneArg(e->check, args);
    if (r == nullptr) return nullptr;
    Py_DECREF(r);
  }
  PyObject* type = PyObject_GetAttr(slot(first, DEVICE), G.str_type);
  if (type == nullptr) return nullptr;
  PyObject* k = PyDict_GetItemWithError(e->kernels, type);  // borrowed
  Py_DECREF(type);
  if (k == nullptr) return PyErr_Occurred() ? nullptr : Py_None;
  if (grad != nullptr && PyObject_SetAttr(G.state, G.str_grad, Py_False) != 0) return nullptr;
  PyObject* r = devplan_call(op, args, first, k);  // a device plan's hit, else the slot k
  if (grad != nullptr) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    int bad = PyObject_SetAttr(G.state, G.str_grad, Py_True);
    PyErr_Restore(et, ev, tb);
    if (bad != 0) {
      Py_XDECREF(r);
      return nullptr;
    }
  }
  if (r == Py_NotImplemented && (e->kernel || grad != nullptr)) {
    Py_DECREF(r);  // the slot declines: dispatch's rule (decomposition, host) in Python
    return Py_None;
  }
  if (r != nullptr && r != Py_None && grad != nullptr &&
      ember_native::grad_record(grad, op, args, r) != 0)
    Py_CLEAR(r);
  if (r != nullptr && PyTuple_CheckExact(r)) {  // (values, indices): the CPU's named tuple
    PyObject* named = PyDict_GetItemString(G.dispatch, "_named_result");  // borrowed
    if (named != nullptr) {
      PyObject* w = PyObject_CallFunctionObjArgs(named, op, r, nullptr);
      Py_DECREF(r);
      r = w;
    }
  }
  return r;
}

// The first tensor argument of a call try_fast answered kDevice for.
PyObject* first_tensor(PyObject* args) {
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    PyObject* v = PyTuple_GET_ITEM(args, i);
    if (Py_TYPE(v) == G.tensor || (Py_TYPE(v)->tp_dictoffset != 0 && plain_subclass(Py_TYPE(v))))
      return v;
  }
  return nullptr;
}

// call(op, args, out=None): dispatch's `call` with a native hit path.
PyObject* native_call(PyObject*, PyObject* const* argv, Py_ssize_t n) {
  if (!G.ready) {
    PyErr_SetString(PyExc_RuntimeError, "ember._C.fast_call before fastpath_init");
    return nullptr;
  }
  if (n < 2 || n > 3 || !PyTuple_Check(argv[1])) {
    PyErr_SetString(PyExc_TypeError, "call(op, args: tuple, out=None)");
    return nullptr;
  }
  PyObject* out = n == 3 ? argv[2] : Py_None;
  if (!G.enabled || out != Py_None || PyList_GET_ITEM(G.special, 0) != G.zero)
    return fallback(argv[0], argv[1], out);
  PyObject* r = try_fast(argv[0], argv[1], false);
  if (r == kRecord || r == kDevice) {
    PyObject* on = PyObject_GetAttr(G.state, G.str_grad);
    if (on == nullptr) return nullptr;
    Py_DECREF(on);  // (True / False are immortal enough: compared by identity below)
    if (r == kDevice) {
      r = device_call(argv[0], argv[1], on == Py_True);
      // the kernel's result (NotImplemented included) or an error; kRecord: the hook below
      if (r != Py_None && r != kRecord) return r;
    }
  }
  if (r == kRecord) {  // as `call`: grad on, ember-autograd there -> its hook records the call
    PyObject* hook = PyDict_GetItemWithError(G.dispatch, G.str_hook);  // borrowed
    if (hook == nullptr && PyErr_Occurred()) return nullptr;
    PyObject* on = PyObject_GetAttr(G.state, G.str_grad);
    if (on == nullptr) return nullptr;
    Py_DECREF(on);
    if (hook != nullptr && hook != Py_None && on == Py_True) {
      PyObject* hv[3] = {argv[0], argv[1], Py_None};
      return PyObject_Vectorcall(hook, hv, 3, nullptr);
    }
    r = Py_None;
  }
  if (r == Py_None) return fallback(argv[0], argv[1], out);
  return r;  // a Tensor or nullptr (error)
}

// pointwise(op, args) -> Tensor | None: the same hit path for autograd's recording (inputs may
// require grad; the caller records the node). None: not a hit, take the Python path.
PyObject* native_pointwise(PyObject*, PyObject* const* argv, Py_ssize_t n) {
  if (!G.ready) Py_RETURN_NONE;
  if (n != 2 || !PyTuple_Check(argv[1])) {
    PyErr_SetString(PyExc_TypeError, "pointwise(op, args: tuple)");
    return nullptr;
  }
  if (!G.enabled || PyList_GET_ITEM(G.special, 0) != G.zero) Py_RETURN_NONE;
  PyObject* r = try_fast(argv[0], argv[1], true);
  if (r == kDevice) {  // the caller records: a device plan's hit or None, never the slot
    r = devplan_call(argv[0], argv[1], first_tensor(argv[1]), nullptr);
  } else if (r == kRecord) {
    r = Py_None;  // (try_fast does not answer kRecord when grad_ok; kept for safety)
  }
  if (r == Py_None) Py_INCREF(r);
  return r;
}

}  // namespace

// The hit path of op on args for mutpath.cpp (an in-place op's functional op, nothing
// recording): a fresh Tensor, Py_None (not a new reference: take the Python path) or nullptr.
PyObject* fastpath_compute(PyObject* op, PyObject* args) {
  if (!G.ready || !G.enabled) return Py_None;
  PyObject* r = try_fast(op, args, false);
  return r == kRecord || r == kDevice ? Py_None : r;
}

Py_ssize_t ember_native::member_offset(PyObject* type, const char* name) {
  // (looked up along the MRO: a slot of a base class, as Node's next_functions for OpNode)
  PyObject* m = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(type), py::str(name).ptr());
  bool ok = m != nullptr && Py_TYPE(m) == &PyMemberDescr_Type;
  Py_ssize_t off = ok ? reinterpret_cast<PyMemberDescrObject*>(m)->d_member->offset : -1;
  if (!ok) {
    std::string cls = reinterpret_cast<PyTypeObject*>(type)->tp_name;
    throw py::type_error(cls + "." + name + " is not a __slots__ member");
  }
  return off;
}

namespace {
using ember_native::member_offset;

PyObject* keep(py::handle h) {
  PyObject* p = h.ptr();
  Py_INCREF(p);
  return p;
}

// Check numpy's array layout on real arrays before trusting NpArray.
void check_layout(py::object c2x3, py::object view) {
  auto* a = reinterpret_cast<NpArray*>(c2x3.ptr());
  auto* v = reinterpret_cast<NpArray*>(view.ptr());
  bool ok = a->nd == 2 && a->dimensions[0] == 2 && a->dimensions[1] == 3 &&
            (a->flags & kCContiguous) && a->base == nullptr &&
            a->descr == c2x3.attr("dtype").ptr() && v->base == c2x3.ptr() &&
            !(v->flags & kCContiguous) && v->nd == 2 && v->dimensions[1] == 2;
  if (!ok) throw py::value_error("numpy's array layout is not the one fastpath.cpp reads");
}

void fastpath_init(py::dict g) {
  check_layout(g["c2x3"], g["view"]);
  G.tensor = reinterpret_cast<PyTypeObject*>(keep(g["Tensor"]));
  G.ndarray = reinterpret_cast<PyTypeObject*>(keep(g["ndarray"]));
  G.cpu = keep(g["cpu"]);
  G.special = keep(g["special"]);
  if (!PyList_Check(G.special)) throw py::type_error("special must be a list");
  G.f32 = keep(g["float32"]);
  G.f64 = keep(g["float64"]);
  G.f8a = g.contains("float8_e4m3fn") ? keep(g["float8_e4m3fn"]) : nullptr;
  G.f8b = g.contains("float8_e5m2") ? keep(g["float8_e5m2"]) : nullptr;
  G.boolean = keep(g["bool"]);
  G.np_f32 = keep(g["float32"].attr("np"));
  G.np_f64 = keep(g["float64"].attr("np"));
  G.np_bool = keep(g["bool"].attr("np"));
  G.dispatch = keep(g["dispatch_globals"]);
  G.str_NP = PyUnicode_InternFromString("NP");
  G.str_hook = PyUnicode_InternFromString("autograd_hook");
  G.state = keep(g["state"]);
  G.str_grad = PyUnicode_InternFromString("grad_enabled");
  G.str_type = PyUnicode_InternFromString("type");
  G.strides = keep(g["strides"]);
  G.c_strides = keep(g["c_strides"]);
  G.py_call = keep(g["call"]);
  G.describe = keep(g["describe"]);
  G.planner = keep(g["plan"]);
  G.finish = keep(g["finish"]);
  G.py_wrap = keep(g["wrap"]);
  G.by_np = keep(g["by_np"]);
  G.str_cpu = PyUnicode_InternFromString("cpu");
  G.big = g["big"].cast<Py_ssize_t>();
  G.zero = PyLong_FromLong(0);  // the small-int singleton that `special[0]` holds when idle
  G.str_np = PyUnicode_InternFromString("_np");
  G.str_rg = PyUnicode_InternFromString("_requires_grad");
  const char* names[7] = {"_st", "_shape", "_stride", "_offset", "dtype", "device", "_npc"};
  for (int i = 0; i < 7; ++i) G.off[i] = member_offset(g["Tensor"].ptr(), names[i]);
  devplan_bind(G.tensor, G.off, G.zero);
  G.ready = true;
}

PyMethodDef kMethods[] = {
    {"fast_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(native_call)),
     METH_FASTCALL, "call(op, args, out=None): dispatch with the native hit path"},
    {"fast_pointwise", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(native_pointwise)),
     METH_FASTCALL, "pointwise(op, args) -> Tensor | None: a hit computed, else None"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void init_fastpath(py::module_& m) {
  m.def("fastpath_init", &fastpath_init, py::arg("globals"),
        "Hand the dispatcher's objects to the native hit path (ember/_native.py)");
  m.def("fastpath_enable", [](bool on) { G.enabled = on; }, py::arg("on"),
        "Turn the native hit path on or off (off: every call takes the Python path)");
  m.def("fastpath_stats", []() { return py::make_tuple(G.hits, G.misses, g_ops.size()); },
        "(hits, misses, ops seen) of the native hit path");
  if (PyModule_AddFunctions(m.ptr(), kMethods) != 0) throw py::error_already_set();
  ember_native::init_grad(m);
}
