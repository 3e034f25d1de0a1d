// View ops on the native hit path (fastpath.cpp hands them here): metadata only, any device.
//
// A view is (shape, strides, offset) arithmetic on its input's and a new Tensor sharing the
// input's Storage (so its version counter), made as `Tensor._alias` makes it (ember/_tensor.py):
// `_base`, requires_grad of a view of a tensor that requires grad, `_no_grad_view`, and the
// storage's weak list of views. Python's view rules (ember/_ops/movement.py, memory.py) are
// the reference: anything this file does not take exactly as they do goes to Python's `call`,
// which raises every error (a dim out of range, a bad size): an error is never raised here.
// A view that autograd records (grad on, the input requires grad) goes to Python as well,
// except detach() (no node) and contiguous() / flatten() of a tensor they return unchanged.
//
// Which op is which rule is told once per op by ember/_native.py (`view_kind`); in-place ops and
// factories are handed on to mutpath.cpp.

#include "fastpath.h"

#include <cstdint>
#include <unordered_map>

namespace py = pybind11;
using ember_native::member_offset;

PyObject* mutpath_call(int kind, PyObject* op, PyObject* args);  // mutpath.cpp

namespace {

// the rules (ember/_native.py's VIEW_KINDS names the same numbers)
enum Kind {
  kNone = 0, kTranspose, kT, kPermute, kUnsqueeze, kSqueeze, kView, kExpand, kSelect, kSlice,
  kNarrow, kDetach, kAlias, kReshape, kFlatten, kContiguous,
  kMutating = 50  // and up: in-place ops and factories (mutpath.cpp)
};

constexpr int kMaxDims = 16;

struct Geo {  // a tensor's geometry in elements
  int n = 0;
  int64_t shape[kMaxDims];
  int64_t stride[kMaxDims];
  int64_t offset = 0;
};

struct VGlobals {
  bool ready = false;
  bool on = true;                  // viewpath_enable(False): these ops take the Python path
  PyTypeObject* tensor = nullptr;
  PyObject* kind_of = nullptr;     // _native.view_kind(op) -> int
  PyObject* state = nullptr;       // ember._state.state (grad mode)
  PyObject* dispatch = nullptr;    // _dispatch's globals (autograd_hook)
  PyObject *s_grad, *s_hook, *s_rg, *s_base, *s_storage, *s_ngv, *s_cat;
  Py_ssize_t off[7] = {0};         // Tensor: _st _shape _stride _offset dtype device _npc
  Py_ssize_t st_version = 0, st_views = 0;  // Storage.version, Storage.views
  // ember-autograd's TensorInfo (viewpath_grad): a recorded view's `_ag`
  PyTypeObject* info_t = nullptr;
  Py_ssize_t i_output_nr, i_retains_grad, i_acc, i_acc_edge, i_post_hooks, i_view_version;
  PyObject *zero = nullptr, *s_grad_fn = nullptr, *s_ag = nullptr;
  PyObject *engine = nullptr, *execute = nullptr, *s_execute = nullptr;  // _engine's globals
  long hits = 0, nodes = 0;
};
VGlobals V;
enum Slot { ST, SHAPE, STRIDE, OFFSET, DTYPE, DEVICE, NPC };

inline PyObject* slot(PyObject* t, Slot s) { return ember_native::member(t, V.off[s]); }

bool as_int(PyObject* v, int64_t* out) {  // an exact int (not bool, not a symbolic size)
  if (!PyLong_CheckExact(v)) return false;
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (overflow != 0 || (x == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  *out = x;
  return true;
}

// A list or tuple of exact ints (at most kMaxDims).
bool as_ints(PyObject* v, int64_t* out, int* n) {
  if (!PyTuple_CheckExact(v) && !PyList_CheckExact(v)) return false;
  Py_ssize_t k = PySequence_Fast_GET_SIZE(v);
  if (k > kMaxDims) return false;
  PyObject** items = PySequence_Fast_ITEMS(v);
  for (Py_ssize_t i = 0; i < k; ++i)
    if (!as_int(items[i], &out[i])) return false;
  *n = static_cast<int>(k);
  return true;
}

bool geometry(PyObject* t, Geo* g) {
  PyObject* sh = slot(t, SHAPE);
  PyObject* st = slot(t, STRIDE);
  if (sh == nullptr || st == nullptr || !PyTuple_CheckExact(sh) || !PyTuple_CheckExact(st))
    return false;
  Py_ssize_t n = PyTuple_GET_SIZE(sh);
  if (n > kMaxDims || PyTuple_GET_SIZE(st) != n) return false;
  g->n = static_cast<int>(n);
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!as_int(PyTuple_GET_ITEM(sh, i), &g->shape[i]) ||
        !as_int(PyTuple_GET_ITEM(st, i), &g->stride[i]))
      return false;
  PyObject* off = slot(t, OFFSET);
  return off != nullptr && as_int(off, &g->offset);
}

// _size.normalize_dim: false when out of range (Python raises the IndexError).
bool norm_dim(int64_t d, int n, int64_t* out) {
  int64_t m = n > 1 ? n : 1;
  if (d < -m || d >= m) return false;
  *out = d < 0 ? d + m : d;
  return true;
}

int64_t numel(const int64_t* shape, int n) {
  int64_t k = 1;
  for (int i = 0; i < n; ++i) k *= shape[i];
  return k;
}

// movement._infer_size: one -1 filled in; false for anything Python refuses.
bool infer_size(int64_t* shape, int n, int64_t total) {
  int neg = -1;
  int64_t known = 1;
  for (int i = 0; i < n; ++i) {
    if (shape[i] == -1) {
      if (neg >= 0) return false;
      neg = i;
    } else if (shape[i] < 0) {
      return false;
    } else {
      known *= shape[i];
    }
  }
  if (neg >= 0) {
    if (known == 0 || total % known != 0) return false;
    shape[neg] = total / known;
    return true;
  }
  return known == total;
}

// movement.view_strides (PyTorch's computeStride): false when the view needs a copy.
bool view_strides(const Geo& x, const int64_t* ns, int nn, int64_t* out) {
  if (x.n == 0) {
    if (numel(ns, nn) != 1) return false;
    for (int i = 0; i < nn; ++i) out[i] = 1;
    return true;
  }
  if (numel(x.shape, x.n) == 0) {  // _size.contiguous_strides
    int64_t acc = 1;
    for (int i = nn - 1; i >= 0; --i) {
      out[i] = acc;
      acc *= ns[i] > 1 ? ns[i] : 1;
    }
    return true;
  }
  int view_d = nn - 1;
  int64_t chunk = x.stride[x.n - 1], tensor_numel = 1, view_numel = 1;
  for (int td = x.n - 1; td >= 0; --td) {
    tensor_numel *= x.shape[td];
    if (td == 0 || (x.shape[td - 1] != 1 && x.stride[td - 1] != tensor_numel * chunk)) {
      while (view_d >= 0 && (view_numel < tensor_numel || ns[view_d] == 1)) {
        out[view_d] = view_numel * chunk;
        view_numel *= ns[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (td > 0) {
        chunk = x.stride[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

bool is_contiguous(const Geo& x) {  // _size.is_contiguous
  int64_t expected = 1;
  for (int i = x.n - 1; i >= 0; --i) {
    if (x.shape[i] != 1 && x.stride[i] != expected) return false;
    expected *= x.shape[i];
  }
  return true;
}

void drop(Geo* g, int d) {
  for (int i = d; i + 1 < g->n; ++i) {
    g->shape[i] = g->shape[i + 1];
    g->stride[i] = g->stride[i + 1];
  }
  --g->n;
}

// movement._slice on a normalized dim
void slice_dim(Geo* g, int d, int64_t start, int64_t end, int64_t step) {
  int64_t size = g->shape[d];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = start < 0 ? 0 : (start > size ? size : start);
  end = end < start ? start : (end > size ? size : end);
  g->offset += start * g->stride[d];
  g->shape[d] = (end - start + step - 1) / step;
  g->stride[d] *= step;
}

// view(x, size) / reshape's view: the new geometry of x viewed as size, or false.
bool as_view(const Geo& x, int64_t* size, int n, Geo* g) {
  if (!infer_size(size, n, numel(x.shape, x.n))) return false;
  int64_t st[kMaxDims];
  if (!view_strides(x, size, n, st)) return false;
  g->n = n;
  for (int i = 0; i < n; ++i) {
    g->shape[i] = size[i];
    g->stride[i] = st[i];
  }
  g->offset = x.offset;
  return true;
}

// The view rule of `kind` on args: the result's geometry in *g, false for "Python decides";
// *self_out: the rule returns its input itself (contiguous, flatten of one dim).
bool rule(int kind, PyObject* args, const Geo& x, Geo* g, bool* self_out) {
  Py_ssize_t na = PyTuple_GET_SIZE(args);
  auto arg = [&](Py_ssize_t i) { return PyTuple_GET_ITEM(args, i); };
  *g = x;
  int64_t a = 0, b = 0, c = 0;
  int64_t v[kMaxDims];
  int k = 0;
  switch (kind) {
    case kTranspose:
      if (na != 3 || !as_int(arg(1), &a) || !as_int(arg(2), &b) || !norm_dim(a, x.n, &a) ||
          !norm_dim(b, x.n, &b))
        return false;
      if (x.n) {
        std::swap(g->shape[a], g->shape[b]);
        std::swap(g->stride[a], g->stride[b]);
      }
      return true;
    case kT:
      if (na != 1 || x.n > 2) return false;
      if (x.n == 2) {
        std::swap(g->shape[0], g->shape[1]);
        std::swap(g->stride[0], g->stride[1]);
      }
      return true;
    case kPermute: {
      if (na != 2 || !as_ints(arg(1), v, &k) || k != x.n) return false;
      bool seen[kMaxDims] = {false};
      for (int i = 0; i < k; ++i) {
        if (!norm_dim(v[i], x.n, &a) || seen[a]) return false;
        seen[a] = true;
        g->shape[i] = x.shape[a];
        g->stride[i] = x.stride[a];
      }
      return true;
    }
    case kUnsqueeze: {
      if (na != 2 || x.n >= kMaxDims || !as_int(arg(1), &a) || !norm_dim(a, x.n + 1, &a))
        return false;
      int64_t st = a < x.n ? x.shape[a] * x.stride[a] : 1;
      for (int i = x.n; i > a; --i) {
        g->shape[i] = x.shape[i - 1];
        g->stride[i] = x.stride[i - 1];
      }
      g->shape[a] = 1;
      g->stride[a] = st;
      g->n = x.n + 1;
      return true;
    }
    case kSqueeze: {
      if (na != 2) return false;
      bool drop_dim[kMaxDims] = {false};
      PyObject* d = arg(1);
      if (d == Py_None) {
        for (int i = 0; i < x.n; ++i) drop_dim[i] = true;
      } else if (as_int(d, &a)) {
        if (!norm_dim(a, x.n, &a)) return false;
        drop_dim[a] = true;
      } else {
        if (!as_ints(d, v, &k)) return false;
        for (int i = 0; i < k; ++i) {
          if (!norm_dim(v[i], x.n, &a)) return false;
          drop_dim[a] = true;
        }
      }
      for (int i = x.n - 1; i >= 0; --i)
        if (drop_dim[i] && x.shape[i] == 1) drop(g, i);
      return true;
    }
    case kView:
    case kReshape:
      if (na != 2 || !as_ints(arg(1), v, &k)) return false;
      return as_view(x, v, k, g);
    case kFlatten: {
      if (na != 3 || !as_int(arg(1), &a) || !as_int(arg(2), &b)) return false;
      if (x.n == 0) {
        v[0] = 1;
        return as_view(x, v, 1, g);
      }
      if (!norm_dim(a, x.n, &a) || !norm_dim(b, x.n, &b) || a > b) return false;
      if (a == b) {
        *self_out = true;
        return true;
      }
      for (int i = 0; i < x.n; ++i) {
        if (i <= a || i > b) v[k++] = x.shape[i];
        else v[k - 1] *= x.shape[i];
      }
      return as_view(x, v, k, g);
    }
    case kExpand: {
      if (na != 3 || !as_ints(arg(1), v, &k) || k < x.n) return false;
      int off = k - x.n;
      for (int i = 0; i < k; ++i) {
        int64_t s = v[i];
        int j = i - off;
        if (j < 0) {
          if (s < 0) return false;  // (-1 there, or a negative size: Python's error)
          g->shape[i] = s;
          g->stride[i] = 0;
          continue;
        }
        int64_t cur = x.shape[j];
        if (s == -1) s = cur;
        if (cur == s) {
          g->shape[i] = s;
          g->stride[i] = x.stride[j];
        } else if (cur == 1 && s >= 0) {
          g->shape[i] = s;
          g->stride[i] = 0;
        } else {
          return false;
        }
      }
      g->n = k;
      return true;
    }
    case kSelect:
      if (na != 3 || x.n == 0 || !as_int(arg(1), &a) || !as_int(arg(2), &b) ||
          !norm_dim(a, x.n, &a))
        return false;
      if (b < -x.shape[a] || b >= x.shape[a]) return false;
      if (b < 0) b += x.shape[a];
      g->offset += b * x.stride[a];
      drop(g, static_cast<int>(a));
      return true;
    case kSlice: {
      if (na != 5 || !as_int(arg(1), &a) || !norm_dim(a, x.n, &a) || x.n == 0) return false;
      int64_t size = x.shape[a];
      b = 0;
      c = size;
      int64_t step = 0;
      if ((arg(2) != Py_None && !as_int(arg(2), &b)) || (arg(3) != Py_None && !as_int(arg(3), &c)) ||
          !as_int(arg(4), &step) || step <= 0)
        return false;
      slice_dim(g, static_cast<int>(a), b, c, step);
      return true;
    }
    case kNarrow: {
      int64_t len = 0;
      if (na != 4 || x.n == 0 || !as_int(arg(1), &a) || !as_int(arg(2), &b) ||
          !as_int(arg(3), &len) || !norm_dim(a, x.n, &a))
        return false;
      int64_t size = x.shape[a];
      if (len < 0 || b < -size || b > size) return false;
      if (b < 0) b += size;
      if (b + len > size) return false;
      slice_dim(g, static_cast<int>(a), b, b + len, 1);
      return true;
    }
    case kDetach:
    case kAlias:
      return na == 1;
    case kContiguous:  // (its decomposition: x itself when contiguous, else a copy in Python)
      if (na != 2 || !is_contiguous(x)) return false;
      *self_out = true;
      return true;
    default:
      return false;
  }
}

PyObject* ints_tuple(const int64_t* v, int n) {
  PyObject* t = PyTuple_New(n);
  if (t == nullptr) return nullptr;
  for (int i = 0; i < n; ++i) {
    PyObject* x = PyLong_FromLongLong(v[i]);
    if (x == nullptr) {
      Py_DECREF(t);
      return nullptr;
    }
    PyTuple_SET_ITEM(t, i, x);
  }
  return t;
}

// An attribute Tensor keeps in its __dict__ (borrowed; nullptr: unset, class default).
PyObject* dict_attr(PyObject* t, PyObject* name) {
  PyObject** dp = _PyObject_GetDictPtr(t);
  if (dp == nullptr || *dp == nullptr) return nullptr;
  return PyDict_GetItem(*dp, name);
}

bool truthy(PyObject* v) { return v != nullptr && v != Py_None && PyObject_IsTrue(v) == 1; }

long dtype_cat(PyObject* dt) {  // dtype._cat (0 bool, 1 int, 2 float, 3 complex), cached
  static std::unordered_map<PyObject*, long> known;  // (dtypes live forever)
  auto it = known.find(dt);
  if (it != known.end()) return it->second;
  PyObject* c = PyObject_GetAttr(dt, V.s_cat);
  if (c == nullptr) return -1;
  long v = PyLong_AsLong(c);
  Py_DECREF(c);
  if (v == -1 && PyErr_Occurred()) return -1;
  Py_INCREF(dt);
  known.emplace(dt, v);
  return v;
}

// _tensor._note_view(st, t): a weak reference to t on the storage's list of views.
int note_view(PyObject* st, PyObject* t) {
  PyObject** vs = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(st) + V.st_views);
  PyObject* ref = PyWeakref_NewRef(t, nullptr);
  if (ref == nullptr) return -1;
  if (*vs == nullptr || *vs == Py_None) {
    PyObject* l = PyList_New(1);
    if (l == nullptr) {
      Py_DECREF(ref);
      return -1;
    }
    PyList_SET_ITEM(l, 0, ref);
    Py_XSETREF(*vs, l);
    return 0;
  }
  if (!PyList_Check(*vs)) {
    Py_DECREF(ref);
    PyErr_SetString(PyExc_TypeError, "Storage.views is not a list");
    return -1;
  }
  PyObject* l = *vs;
  int rc = PyList_Append(l, ref);
  Py_DECREF(ref);
  if (rc != 0) return -1;
  Py_ssize_t n = PyList_GET_SIZE(l);
  if (n >= 64 && (n & (n - 1)) == 0) {  // dead references pruned as the list doubles
    PyObject* live = PyList_New(0);
    if (live == nullptr) return -1;
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* r = PyList_GET_ITEM(l, i);
      if (PyWeakref_GetObject(r) != Py_None && PyList_Append(live, r) != 0) {
        Py_DECREF(live);
        return -1;
      }
    }
    rc = PyList_SetSlice(l, 0, n, live);
    Py_DECREF(live);
    if (rc != 0) return -1;
  }
  return 0;
}

// Tensor._alias(self, shape, stride, offset) with grad mode `grad_on`.
PyObject* make_alias(PyObject* self, const Geo& g, bool grad_on, bool self_rg) {
  PyObject* st = slot(self, ST);
  if (st == nullptr || st == Py_None) {
    st = PyObject_GetAttr(self, V.s_storage);  // (made on first use from the fresh array)
    if (st == nullptr) return nullptr;
  } else {
    Py_INCREF(st);
  }
  PyObject* shape = ints_tuple(g.shape, g.n);
  PyObject* stride = shape == nullptr ? nullptr : ints_tuple(g.stride, g.n);
  PyObject* off = stride == nullptr ? nullptr : PyLong_FromLongLong(g.offset);
  PyObject* t = off == nullptr ? nullptr : V.tensor->tp_alloc(V.tensor, 0);
  if (t != nullptr) {
    using ember_native::init_member;
    init_member(t, V.off[ST], st);
    init_member(t, V.off[SHAPE], shape);
    init_member(t, V.off[STRIDE], stride);
    init_member(t, V.off[OFFSET], off);
    init_member(t, V.off[DTYPE], slot(self, DTYPE));
    init_member(t, V.off[DEVICE], slot(self, DEVICE));
    init_member(t, V.off[NPC], Py_None);
  }
  Py_XDECREF(shape);
  Py_XDECREF(stride);
  Py_XDECREF(off);
  if (t == nullptr) {
    Py_DECREF(st);
    return nullptr;
  }
  PyObject* base = dict_attr(self, V.s_base);
  if (base == nullptr || base == Py_None) base = self;
  long cat = dtype_cat(slot(self, DTYPE));
  bool ok = cat >= 0 && PyObject_SetAttr(t, V.s_base, base) == 0;
  if (ok && self_rg && cat >= 2) {
    ok = PyObject_SetAttr(t, V.s_rg, Py_True) == 0;
    if (ok && !grad_on)  // its version: a write after it makes it unusable
      ok = PyObject_SetAttr(t, V.s_ngv, ember_native::member(st, V.st_version)) == 0;
  } else if (ok && grad_on && cat >= 2) {
    ok = note_view(st, t) == 0;
  }
  Py_DECREF(st);
  if (!ok) Py_CLEAR(t);
  return t;
}

bool plain_tensor(PyTypeObject* t) {  // Tensor, or a subclass without its own dispatch
  if (t == V.tensor) return true;
  static std::unordered_map<PyTypeObject*, bool> known;
  auto it = known.find(t);
  if (it != known.end()) return it->second;
  PyObject* o = reinterpret_cast<PyObject*>(t);
  bool plain = PyType_IsSubtype(t, V.tensor) && !PyObject_HasAttrString(o, "__ember_dispatch__") &&
               !PyObject_HasAttrString(o, "__ember_function__");
  Py_INCREF(t);
  known.emplace(t, plain);
  return plain;
}


// A view autograd records, as `record` does: the view made with grad off (as its `_execute`),
// the node built by fastpath_grad.cpp from autograd's description of the op, then the
// view's TensorInfo with the storage version its grad_fn is current for. Py_None: Python
// records it (an op autograd does not describe, or no TensorInfo class handed over).
PyObject* record_view(PyObject* op, PyObject* args, PyObject* self, const Geo& g) {
  if (V.info_t == nullptr) return Py_None;
  // record runs the view through the engine's `_execute`: one replaced (ember-compiler's
  // fake-aware execute routes fake tensors to their mode) means Python records
  PyObject* ex = PyDict_GetItemWithError(V.engine, V.s_execute);
  if (ex != V.execute) return PyErr_Occurred() ? nullptr : Py_None;
  ember_native::GradOp* go = ember_native::grad_op(op);
  if (go == nullptr) return PyErr_Occurred() ? nullptr : Py_None;
  PyObject* t = make_alias(self, g, false, true);
  if (t == nullptr) return nullptr;
  if (ember_native::grad_record(go, op, args, t) != 0) {
    Py_DECREF(t);
    return nullptr;
  }
  PyObject* fn = dict_attr(t, V.s_grad_fn);
  if (fn != nullptr && fn != Py_None) {  // (a node was made: info(result).view_version = ...)
    PyObject* inf = V.info_t->tp_alloc(V.info_t, 0);
    if (inf == nullptr) {
      Py_DECREF(t);
      return nullptr;
    }
    using ember_native::init_member;
    init_member(inf, V.i_output_nr, V.zero);
    init_member(inf, V.i_retains_grad, Py_False);
    init_member(inf, V.i_acc, Py_None);
    init_member(inf, V.i_acc_edge, Py_None);
    init_member(inf, V.i_post_hooks, Py_None);
    init_member(inf, V.i_view_version,
                ember_native::member(slot(t, ST), V.st_version));
    int rc = PyObject_SetAttr(t, V.s_ag, inf);
    Py_DECREF(inf);
    if (rc != 0) {
      Py_DECREF(t);
      return nullptr;
    }
  }
  ++V.hits;
  ++V.nodes;
  return t;
}

}  // namespace

// The kind of view rule of op (0: none), asked of Python once per op.
int viewpath_kind(PyObject* op) {
  if (!V.ready) return 0;
  PyObject* k = PyObject_CallOneArg(V.kind_of, op);
  if (k == nullptr) {
    PyErr_Clear();
    return 0;
  }
  long v = PyLong_Check(k) ? PyLong_AsLong(k) : 0;
  Py_DECREF(k);
  if (v == -1 && PyErr_Occurred()) PyErr_Clear();
  return v > 0 ? static_cast<int>(v) : 0;
}

// A view op's call (no out=, no mode / autocast: fastpath.cpp checked): the view, Py_None for
// "take the Python path" (not a new reference), or nullptr with an error set.
PyObject* viewpath_call(int kind, PyObject* op, PyObject* args) {
  if (!V.on) return Py_None;
  if (kind >= kMutating) return mutpath_call(kind, op, args);
  if (!V.ready || PyTuple_GET_SIZE(args) < 1) return Py_None;
  PyObject* self = PyTuple_GET_ITEM(args, 0);
  if (!plain_tensor(Py_TYPE(self))) return Py_None;
  Geo x, g;
  if (!geometry(self, &x)) return Py_None;
  bool self_out = false;
  if (!rule(kind, args, x, &g, &self_out)) return Py_None;
  if (self_out) {  // contiguous() / flatten(d, d): x itself, recording or not (composites)
    ++V.hits;
    Py_INCREF(self);
    return self;
  }
  PyObject* on = PyObject_GetAttr(V.state, V.s_grad);
  if (on == nullptr) return nullptr;
  Py_DECREF(on);
  bool grad_on = on == Py_True;
  bool self_rg = truthy(dict_attr(self, V.s_rg));
  if (grad_on && self_rg) {
    PyObject* hook = PyDict_GetItemWithError(V.dispatch, V.s_hook);
    if (hook == nullptr && PyErr_Occurred()) return nullptr;
    if (hook != nullptr && hook != Py_None) {  // autograd records it
      if (!ember_native::grad_native_now(hook)) return Py_None;
      if (kind == kDetach) {  // `record` runs it with grad off, builds no node, makes no view
        PyObject* t = make_alias(self, g, false, true);
        if (t != nullptr && (PyObject_SetAttr(t, V.s_base, Py_None) != 0 ||
                             PyObject_SetAttr(t, V.s_rg, Py_False) != 0))
          Py_CLEAR(t);
        ++V.hits;
        return t;
      }
      return record_view(op, args, self, g);
    }
  }
  ++V.hits;
  return make_alias(self, g, grad_on, self_rg);
}

namespace {

PyObject* keep(py::handle h) {
  Py_INCREF(h.ptr());
  return h.ptr();
}

void viewpath_init(py::dict g) {
  V.tensor = reinterpret_cast<PyTypeObject*>(keep(g["Tensor"]));
  V.kind_of = keep(g["view_kind"]);
  V.state = keep(g["state"]);
  V.dispatch = keep(g["dispatch_globals"]);
  V.s_grad = PyUnicode_InternFromString("grad_enabled");
  V.s_hook = PyUnicode_InternFromString("autograd_hook");
  V.s_rg = PyUnicode_InternFromString("_requires_grad");
  V.s_base = PyUnicode_InternFromString("_base");
  V.s_storage = PyUnicode_InternFromString("_storage");
  V.s_ngv = PyUnicode_InternFromString("_no_grad_view");
  V.s_cat = PyUnicode_InternFromString("_cat");
  const char* names[7] = {"_st", "_shape", "_stride", "_offset", "dtype", "device", "_npc"};
  for (int i = 0; i < 7; ++i) V.off[i] = member_offset(g["Tensor"].ptr(), names[i]);
  V.st_version = member_offset(g["Storage"].ptr(), "version");
  V.st_views = member_offset(g["Storage"].ptr(), "views");
  V.zero = PyLong_FromLong(0);
  V.s_grad_fn = PyUnicode_InternFromString("_grad_fn");
  V.s_ag = PyUnicode_InternFromString("_ag");
  V.ready = true;
}

void viewpath_grad(py::object info_cls, py::dict engine_globals, py::object execute) {
  V.engine = keep(engine_globals);
  V.execute = keep(execute);
  V.s_execute = PyUnicode_InternFromString("_execute");
  PyObject* I = info_cls.ptr();
  V.i_output_nr = member_offset(I, "output_nr");
  V.i_retains_grad = member_offset(I, "retains_grad");
  V.i_acc = member_offset(I, "acc");
  V.i_acc_edge = member_offset(I, "acc_edge");
  V.i_post_hooks = member_offset(I, "post_hooks");
  V.i_view_version = member_offset(I, "view_version");
  V.info_t = reinterpret_cast<PyTypeObject*>(keep(info_cls));
}

}  // namespace

void init_viewpath(py::module_& m) {
  m.def("viewpath_init", &viewpath_init, py::arg("globals"),
        "Hand the view rules' objects to the native hit path (ember/_native.py)");
  m.def("viewpath_grad", &viewpath_grad, py::arg("tensor_info"), py::arg("engine_globals"),
        py::arg("execute"),
        "ember-autograd's TensorInfo class: recorded views are made natively too");
  m.def("viewpath_enable", [](bool on) { V.on = on; }, py::arg("on"),
        "Views, in-place ops and factories natively (True) or through Python (False)");
  m.def("viewpath_stats", []() { return py::make_tuple(V.hits, V.nodes); },
        "(views made, of them recorded) by the native hit path");
}
