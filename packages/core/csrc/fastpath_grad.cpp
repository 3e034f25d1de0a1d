// Autograd's graph node for a native hit (fastpath.cpp), built in C++ as ember-autograd's
// `record` builds it in Python (ember/autograd/_engine.py, `_tracker`): the same OpNode class,
// the same edges, saved tensors (_Saved, with their storage versions), MetaOnly stand-ins and
// saved output. The backward stays Python (OpNode.apply runs the op's vjp).
//
// ember-autograd hands its classes over once (`grad_init`, from ember/autograd/_native.py) and
// describes each op once (its `describe(op)`); this file holds no op knowledge. Anything it does
// not build exactly as `record` would (anomaly mode, saved-tensor hooks, a view, an in-place op,
// list arguments, a replaced hook) is left to `record`.

#include "fastpath.h"
#include "slots.h"

#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace ember_native {

struct GradOp {
  bool native = false;      // false: Python records this op
  PyObject* info = nullptr; // its _OpInfo (owned)
  std::vector<int> diff;    // diff_idx
  std::vector<int> use;     // per argument: 0 NONE, 1 META, 2 FULL (what the vjp reads)
  bool use_out = false;     // the vjp reads the result: saved as an output
  // the last call's node.args and node.in_meta (tuples; reused by the next call when equal
  // item by item: fewer new objects per node for the cyclic GC). args only without tensors.
  PyObject* last_args = nullptr;
  PyObject* last_meta = nullptr;
};

namespace {

struct AgGlobals : GraphSlots {  // (+ the slots' offsets)
  bool ready = false;
  bool on = true;                   // grad_enable(False): Python records every call
  PyObject* record = nullptr;       // ember.autograd._engine.record (the reference)
  PyObject* describe = nullptr;     // op -> None | (info, diff_idx, use_args, use_out)
  PyObject* edge_of = nullptr;      // _graph.edge_of (leaves without a node yet, views, ...)
  PyObject* same_data = nullptr;    // _graph._same_data (a saved output's alias, no grad_fn)
  PyObject* attach = nullptr;       // _engine._attach (results other than one Tensor)
  PyTypeObject* tensor = nullptr;
  PyTypeObject* node_t = nullptr;   // OpNode
  PyTypeObject* saved_t = nullptr;  // _Saved
  PyTypeObject* meta_t = nullptr;   // MetaOnly
  PyObject* seq = nullptr;          // _graph._seq (itertools.count: node creation order)
  PyObject* anomaly = nullptr;      // _graph.ANOMALY ([threads with anomaly mode on])
  PyObject* saved_hooks = nullptr;  // _graph.SAVED_HOOKS ([open saved_tensors_hooks blocks])
  PyObject* no_edge = nullptr;      // (None, 0)
  PyObject* zero = nullptr;
  PyObject* s_grad_fn = nullptr, *s_rg = nullptr, *s_ag = nullptr, *s_base = nullptr;
  PyObject* s_acc = nullptr, *s_acc_edge = nullptr, *s_out = nullptr, *s_cat = nullptr;
  PyObject* s_ag_info = nullptr;
  // MetaOnly slots
  Py_ssize_t m_shape, m_stride, m_offset, m_dtype, m_device;
  long nodes = 0;                   // nodes built here (tests check the path is taken)
};
AgGlobals A;

// An instance attribute that Tensor keeps in its __dict__ (class default None / False): borrowed.
PyObject* dict_attr(PyObject* t, PyObject* name) {
  PyObject** dp = _PyObject_GetDictPtr(t);
  if (dp == nullptr || *dp == nullptr) return nullptr;
  return PyDict_GetItemWithError(*dp, name);
}

bool is_set(PyObject* v) { return v != nullptr && v != Py_None && v != Py_False; }

// autograd's edge_of(t) for a Tensor: (node, input_nr) or None; new reference.
PyObject* edge_of(PyObject* t) {
  if (Py_TYPE(t) == A.tensor) {  // the tracker's inlined cases; the rest asks Python
    PyObject* fn = dict_attr(t, A.s_grad_fn);
    if (fn == nullptr && PyErr_Occurred()) return nullptr;
    PyObject* ag = dict_attr(t, A.s_ag);
    if (ag == nullptr && PyErr_Occurred()) return nullptr;
    if (is_set(fn)) {
      if (!is_set(ag)) return PyTuple_Pack(2, fn, A.zero);
    } else {
      PyObject* rg = dict_attr(t, A.s_rg);
      if (rg == nullptr && PyErr_Occurred()) return nullptr;
      if (!is_set(rg)) Py_RETURN_NONE;
      PyObject* base = dict_attr(t, A.s_base);
      if (is_set(ag) && !is_set(base)) {  // a leaf with its AccumulateGrad made already
        PyObject* acc = PyObject_GetAttr(ag, A.s_acc);
        if (acc == nullptr) return nullptr;
        if (acc != Py_None) {  // (acc, 0), kept on its TensorInfo: one tuple per leaf
          PyObject* e = PyObject_GetAttr(ag, A.s_acc_edge);
          if (e != nullptr && (!PyTuple_Check(e) || PyTuple_GET_ITEM(e, 0) != acc)) {
            Py_SETREF(e, PyTuple_Pack(2, acc, A.zero));
            if (e != nullptr && PyObject_SetAttr(ag, A.s_acc_edge, e) != 0) Py_CLEAR(e);
          }
          Py_DECREF(acc);
          return e;
        }
        Py_DECREF(acc);
      }
    }
  }
  return PyObject_CallOneArg(A.edge_of, t);
}

// _Saved(t, is_output): the tensor and its storage's version now (a storage not made yet is
// at version 0: the first in-place write makes it and bumps it to 1).
PyObject* make_saved(PyObject* t, bool is_output) {
  PyObject* s = A.saved_t->tp_alloc(A.saved_t, 0);
  if (s == nullptr) return nullptr;
  PyObject* st = member(t, A.t_st);
  PyObject* version = A.zero;
  if (st != nullptr && st != Py_None) version = member(st, A.st_version);
  if (is_output) {  // as _Saved: the output's alias, so output -> node -> saved is no cycle
    PyObject* a = PyObject_CallOneArg(A.same_data, t);
    if (a == nullptr) {
      Py_DECREF(s);
      return nullptr;
    }
    init_member(s, A.s_t, a);
    Py_DECREF(a);
  } else {
    init_member(s, A.s_t, t);
  }
  init_member(s, A.s_version, version);
  init_member(s, A.s_is_output, is_output ? Py_True : Py_False);
  init_member(s, A.s_output_nr, A.zero);
  init_member(s, A.s_unpack_hook, Py_None);
  return s;
}

PyObject* make_meta_only(PyObject* t) {
  PyObject* m = A.meta_t->tp_alloc(A.meta_t, 0);
  if (m == nullptr) return nullptr;
  init_member(m, A.m_shape, member(t, A.t_shape));
  init_member(m, A.m_stride, member(t, A.t_stride));
  init_member(m, A.m_offset, member(t, A.t_offset));
  init_member(m, A.m_dtype, member(t, A.t_dtype));
  init_member(m, A.m_device, member(t, A.t_device));
  return m;
}

bool is_tensor(PyObject* v) { return PyObject_TypeCheck(v, A.tensor); }

// in_meta's (shape, dtype, device) of a tensor, one tuple per distinct triple (a leaf's and the
// fresh results' shapes are shared objects): new reference. The tuple holds its key's objects.
struct MetaKey {
  PyObject *shape, *dtype, *device;
  bool operator==(const MetaKey& o) const {
    return shape == o.shape && dtype == o.dtype && device == o.device;
  }
};
struct MetaHash {
  size_t operator()(const MetaKey& k) const {
    return std::hash<void*>()(k.shape) ^ (std::hash<void*>()(k.dtype) << 1) ^
           (std::hash<void*>()(k.device) << 2);
  }
};
std::unordered_map<MetaKey, PyObject*, MetaHash> g_metas;

PyObject* meta_of(PyObject* t) {
  MetaKey k{member(t, A.t_shape), member(t, A.t_dtype), member(t, A.t_device)};
  auto it = g_metas.find(k);
  if (it != g_metas.end()) {
    Py_INCREF(it->second);
    return it->second;
  }
  PyObject* m = PyTuple_Pack(3, k.shape, k.dtype, k.device);
  if (m == nullptr) return nullptr;
  if (g_metas.size() >= 1024) {
    for (auto& e : g_metas) Py_DECREF(e.second);
    g_metas.clear();
  }
  Py_INCREF(m);
  g_metas.emplace(k, m);
  return m;
}

// t, or the equal tuple kept in *last (then t is released); t becomes *last when cacheable.
PyObject* reuse(PyObject** last, PyObject* t, bool cacheable) {
  PyObject* l = *last;
  Py_ssize_t n = PyTuple_GET_SIZE(t);
  if (l != nullptr && PyTuple_GET_SIZE(l) == n) {
    bool same = true;
    for (Py_ssize_t i = 0; i < n && same; ++i) same = PyTuple_GET_ITEM(l, i) == PyTuple_GET_ITEM(t, i);
    if (same) {
      Py_DECREF(t);
      Py_INCREF(l);
      return l;
    }
  }
  if (cacheable) {
    Py_INCREF(t);
    Py_XSETREF(*last, t);
  }
  return t;
}

// next_functions and in_meta (a tuple: OpNode only iterates it) of a call: false in *any when no input needs a gradient.
bool edges_of(GradOp* g, PyObject* args, PyObject** next, PyObject** metas, bool* any) {
  Py_ssize_t n = static_cast<Py_ssize_t>(g->diff.size());
  PyObject* edges = PyTuple_New(n);
  PyObject* ms = PyTuple_New(n);
  if (edges == nullptr || ms == nullptr) goto fail;
  *any = false;
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* t = PyTuple_GET_ITEM(args, g->diff[k]);
    PyObject* e = is_tensor(t) ? edge_of(t) : (Py_INCREF(Py_None), Py_None);
    if (e == nullptr) goto fail;
    if (e == Py_None) {
      Py_DECREF(e);
      Py_INCREF(A.no_edge);
      PyTuple_SET_ITEM(edges, k, A.no_edge);
      Py_INCREF(Py_None);
      PyTuple_SET_ITEM(ms, k, Py_None);
      continue;
    }
    PyTuple_SET_ITEM(edges, k, e);
    PyObject* m = meta_of(t);
    if (m == nullptr) goto fail;
    PyTuple_SET_ITEM(ms, k, m);
    *any = true;
  }
  *next = edges;
  *metas = reuse(&g->last_meta, ms, true);
  return true;
fail:
  Py_XDECREF(edges);
  Py_XDECREF(ms);
  return false;
}

// node.args (the call's arguments, tensors the vjp does not read replaced as the tracker does)
// and node.saved ((index, _Saved) pairs for the tensors it reads).
bool pack_args(GradOp* g, PyObject* args, PyObject** out_args, PyObject** out_saved) {
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  PyObject* a = PyTuple_New(n);  // (a tuple: OpNode.apply copies it before unpacking into it)
  PyObject* saved = PyTuple_New(0);
  bool holds_tensor = false;
  if (a == nullptr || saved == nullptr) goto fail;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* v = PyTuple_GET_ITEM(args, i);
    PyObject* keep = v;
    Py_INCREF(keep);
    if (is_tensor(v)) {
      int u = g->use[i];
      if (u == 0) {
        Py_SETREF(keep, (Py_INCREF(Py_None), Py_None));
      } else if (u == 1) {
        Py_SETREF(keep, make_meta_only(v));
        if (keep == nullptr) goto fail;
      } else {
        holds_tensor = true;
        PyObject* s = make_saved(v, false);
        if (s == nullptr) {
          Py_DECREF(keep);
          goto fail;
        }
        PyObject* idx = PyLong_FromSsize_t(i);
        PyObject* pair = idx == nullptr ? nullptr : PyTuple_Pack(2, idx, s);
        Py_XDECREF(idx);
        Py_DECREF(s);
        if (pair == nullptr) {
          Py_DECREF(keep);
          goto fail;
        }
        // (the tracker's `saved += ((i, s),)`: saved stays a tuple)
        Py_ssize_t k = PyTuple_GET_SIZE(saved);
        if (_PyTuple_Resize(&saved, k + 1) != 0) {
          Py_DECREF(pair);
          Py_DECREF(keep);
          goto fail;
        }
        PyTuple_SET_ITEM(saved, k, pair);
      }
    }
    PyTuple_SET_ITEM(a, i, keep);
  }
  *out_args = reuse(&g->last_args, a, !holds_tensor);
  *out_saved = saved;
  return true;
fail:
  Py_XDECREF(a);
  Py_XDECREF(saved);
  return false;
}

}  // namespace

bool grad_native_now(PyObject* hook) {
  return A.ready && A.on && hook == A.record && PyList_GET_ITEM(A.anomaly, 0) == A.zero &&
         PyList_GET_ITEM(A.saved_hooks, 0) == A.zero;
}

// Whether g still describes op: ember.library drops `op._ag_info` when it gives an op a new vjp
// (register_autograd), and autograd then makes a new one.
bool current(GradOp* g, PyObject* op) {
  PyObject* info = g->info;
  if (info == nullptr) return true;  // (an op Python records: nothing cached to go stale)
  PyObject** dp = _PyObject_GetDictPtr(op);
  PyObject* now = dp != nullptr && *dp != nullptr ? PyDict_GetItem(*dp, A.s_ag_info) : nullptr;
  return now == info;
}

GradOp* grad_op(PyObject* op) {
  static std::unordered_map<PyObject*, GradOp*> ops;
  auto it = ops.find(op);
  if (it != ops.end()) {
    if (current(it->second, op)) return it->second->native ? it->second : nullptr;
    GradOp* old = it->second;  // described again below
    Py_CLEAR(old->info);
    Py_CLEAR(old->last_args);
    Py_CLEAR(old->last_meta);
    delete old;
    ops.erase(it);
    Py_DECREF(op);
  }
  PyObject* d = PyObject_CallOneArg(A.describe, op);
  if (d == nullptr) return nullptr;
  auto* g = new GradOp();
  if (d != Py_None) {  // (info, diff_idx, use_args, use_out)
    g->native = true;
    g->info = PyTuple_GET_ITEM(d, 0);
    Py_INCREF(g->info);
    PyObject* diff = PyTuple_GET_ITEM(d, 1);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(diff); ++i)
      g->diff.push_back(static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(diff, i))));
    PyObject* use = PyTuple_GET_ITEM(d, 2);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(use); ++i)
      g->use.push_back(static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(use, i))));
    g->use_out = PyTuple_GET_ITEM(d, 3) == Py_True;
  }
  Py_DECREF(d);
  Py_INCREF(op);
  ops.emplace(op, g);
  return g->native ? g : nullptr;
}

int grad_record(GradOp* g, PyObject* op, PyObject* args, PyObject* result) {
  if (static_cast<Py_ssize_t>(g->use.size()) != PyTuple_GET_SIZE(args)) {
    PyErr_SetString(PyExc_RuntimeError, "ember._C: an op's argument count changed");
    return -1;
  }
  bool single = Py_TYPE(result) == A.tensor;
  if (single) {  // a bool (or integer) result records nothing
    PyObject* cat = PyObject_GetAttr(member(result, A.t_dtype), A.s_cat);
    if (cat == nullptr) return -1;
    long c = PyLong_AsLong(cat);
    Py_DECREF(cat);
    if (c < 2) return PyErr_Occurred() ? -1 : 0;
  }
  PyObject *next = nullptr, *metas = nullptr, *nargs = nullptr, *saved = nullptr;
  bool any = false;
  if (!edges_of(g, args, &next, &metas, &any)) return -1;
  if (!any) {
    Py_DECREF(next);
    Py_DECREF(metas);
    return 0;
  }
  PyObject* node = nullptr;
  PyObject* seq = PyIter_Next(A.seq);
  if (seq == nullptr || !pack_args(g, args, &nargs, &saved)) goto fail;
  node = A.node_t->tp_alloc(A.node_t, 0);
  if (node == nullptr) goto fail;
  init_member(node, A.n_next, next);
  init_member(node, A.n_seq, seq);
  init_member(node, A.n_op, op);
  init_member(node, A.n_info, g->info);
  init_member(node, A.n_in_meta, metas);
  init_member(node, A.n_args, nargs);
  init_member(node, A.n_saved, saved);
  Py_CLEAR(next);
  Py_CLEAR(seq);
  Py_CLEAR(metas);
  Py_CLEAR(nargs);
  Py_CLEAR(saved);
  if (single) {  // what record does for one floating output
    if (PyObject_SetAttr(result, A.s_grad_fn, node) != 0 ||
        PyObject_SetAttr(result, A.s_rg, Py_True) != 0)
      goto fail;
    if (g->use_out) {
      PyObject* s = make_saved(result, true);
      if (s == nullptr || PyObject_SetAttr(node, A.s_out, s) != 0) {
        Py_XDECREF(s);
        goto fail;
      }
      Py_DECREF(s);
    }
  } else {
    PyObject* r = PyObject_CallFunctionObjArgs(A.attach, node, g->info, result, nullptr);
    if (r == nullptr) goto fail;
    Py_DECREF(r);
  }
  Py_DECREF(node);
  ++A.nodes;
  return 0;
fail:
  Py_XDECREF(next);
  Py_XDECREF(metas);
  Py_XDECREF(seq);
  Py_XDECREF(nargs);
  Py_XDECREF(saved);
  Py_XDECREF(node);
  return -1;
}

namespace {

PyObject* keep(py::handle h) {
  Py_INCREF(h.ptr());
  return h.ptr();
}

void grad_init(py::dict g) {
  A.record = keep(g["record"]);
  A.describe = keep(g["describe"]);
  A.edge_of = keep(g["edge_of"]);
  A.same_data = keep(g["same_data"]);
  A.attach = keep(g["attach"]);
  A.tensor = reinterpret_cast<PyTypeObject*>(keep(g["Tensor"]));
  A.node_t = reinterpret_cast<PyTypeObject*>(keep(g["OpNode"]));
  A.saved_t = reinterpret_cast<PyTypeObject*>(keep(g["Saved"]));
  A.meta_t = reinterpret_cast<PyTypeObject*>(keep(g["MetaOnly"]));
  A.seq = keep(g["seq"]);
  A.anomaly = keep(g["ANOMALY"]);
  A.saved_hooks = keep(g["SAVED_HOOKS"]);
  if (!PyList_Check(A.anomaly) || !PyList_Check(A.saved_hooks) || !PyIter_Check(A.seq))
    throw py::type_error("grad_init: ANOMALY / SAVED_HOOKS must be lists, seq an iterator");
  A.zero = PyLong_FromLong(0);
  A.no_edge = PyTuple_Pack(2, Py_None, A.zero);
  A.s_grad_fn = PyUnicode_InternFromString("_grad_fn");
  A.s_rg = PyUnicode_InternFromString("_requires_grad");
  A.s_ag = PyUnicode_InternFromString("_ag");
  A.s_base = PyUnicode_InternFromString("_base");
  A.s_acc = PyUnicode_InternFromString("acc");
  A.s_acc_edge = PyUnicode_InternFromString("acc_edge");
  A.s_out = PyUnicode_InternFromString("out");
  A.s_cat = PyUnicode_InternFromString("_cat");
  A.s_ag_info = PyUnicode_InternFromString("_ag_info");
  A.init_graph_slots(g);
  PyObject* M = g["MetaOnly"].ptr();
  A.m_shape = member_offset(M, "_shape");
  A.m_stride = member_offset(M, "_stride");
  A.m_offset = member_offset(M, "_offset");
  A.m_dtype = member_offset(M, "dtype");
  A.m_device = member_offset(M, "device");
  A.ready = true;
}

}  // namespace

void init_grad(py::module_& m) {
  m.def("grad_init", &grad_init, py::arg("globals"),
        "Hand ember-autograd's node classes to the native hit path (ember/autograd/_native.py)");
  m.def("grad_stats", []() { return A.nodes; }, "graph nodes built natively so far");
  m.def("grad_enable", [](bool on) { A.on = on; }, py::arg("on"),
        "Build graph nodes natively (True) or leave every recording to Python (False)");
}

}  // namespace ember_native
