// The backward engine's loop (ember-autograd's `run_backward`, ember/autograd/_engine.py) in C++:
// dependency counts over the graph, the ready queue (latest-created node first), the gradient
// buffers and their sums, and the calls of each node. The nodes stay Python objects and their
// backward stays Python (OpNode.apply runs the op's vjp; AccumulateGrad.apply writes `.grad`).
//
// The common OpNode's backward (unpack its saved tensors, call the vjp, the fix_grads check)
// runs here too; the vjp itself stays Python.
//
// ember-autograd hands over its node classes and its per-node step once (`engine_init`, from
// ember/autograd/_native.py) and calls `engine_run` for every pass outside anomaly mode (grad mode
// is set by the caller: on for create_graph); the Python engine stays the reference. With
// inputs= (autograd.grad), an input's node runs through `_node_step` too (its gradient captured). A node
// with hooks, or of a class other than OpNode / AccumulateGrad, runs through autograd's
// `_node_step` (hooks, retain_grad, apply, release: the Python engine's own code).

#include "fastpath.h"
#include "slots.h"

#include <algorithm>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

namespace py = pybind11;
using ember_native::member;
using ember_native::member_offset;

namespace {

struct EngineGlobals : ember_native::GraphSlots {  // (+ the slots' offsets)
  bool ready = false;
  PyTypeObject* node_t = nullptr;  // Node (every graph node's base: next_functions, _seq slots)
  PyTypeObject* op_t = nullptr;    // OpNode
  PyTypeObject* acc_t = nullptr;   // AccumulateGrad
  PyObject* step = nullptr;        // _engine._node_step(node, gin: dict, keep_graph) -> out
  PyObject* acc_refs = nullptr;    // references to g while AccumulateGrad.apply runs from here
  PyObject* s_apply = nullptr, *s_release = nullptr, *s_next = nullptr, *s_seq = nullptr;
  PyObject* hook_names[4] = {};    // _tensor_hooks, _retain, _pre_hooks, _hooks
  PyObject* fix_grads = nullptr;   // _graph.fix_grads([g], [meta]) -> [g'] (sum_to, casts)
  PyObject* s_out = nullptr, *s_freed = nullptr, *s_out_meta = nullptr, *s_cat = nullptr;
  Py_ssize_t i_vjp = 0, i_cwrap = 0, i_no_list = 0;  // _OpInfo's slots
  PyTypeObject* tensor_t = nullptr;
  PyTypeObject* saved_t = nullptr;
  std::unordered_map<PyObject*, bool> complex_dtype;  // dtype -> dtype._cat == 3 (kept alive)
  long runs = 0;                   // backward passes run here (tests check the path is taken)
  long native_applies = 0;         // OpNode backward calls made here (not through OpNode.apply)
};
EngineGlobals E;

// One graph node reached from the roots: its pending edge count and gradient buffer.
struct Slot {
  PyObject* node;              // owned (a hook may drop the last other reference)
  long long seq;
  int deps = 0;
  bool queued = false;
  std::vector<PyObject*> gin;  // owned: the summed gradient per output number (nullptr: none)
};

struct Run {
  std::vector<Slot> slots;
  std::unordered_map<PyObject*, int> index;
  ~Run() {
    for (auto& s : slots) {
      for (PyObject* g : s.gin) Py_XDECREF(g);
      Py_DECREF(s.node);
    }
  }
};

// next_functions of a node: a new reference to a tuple/list, or nullptr with an error set.
PyObject* next_of(PyObject* node) {
  if (PyObject_TypeCheck(node, E.node_t)) {
    PyObject* nf = member(node, E.n_next);
    if (nf != nullptr && (PyTuple_CheckExact(nf) || PyList_CheckExact(nf))) {
      Py_INCREF(nf);
      return nf;
    }
  }
  PyObject* nf = PyObject_GetAttr(node, E.s_next);
  if (nf == nullptr) return nullptr;
  Py_SETREF(nf, PySequence_Fast(nf, "next_functions must be a sequence"));
  return nf;
}

bool seq_of(PyObject* node, long long* out) {
  PyObject* s = PyObject_TypeCheck(node, E.node_t) ? member(node, E.n_seq) : nullptr;
  if (s != nullptr) {
    Py_INCREF(s);
  } else {
    s = PyObject_GetAttr(node, E.s_seq);
    if (s == nullptr) return false;
  }
  *out = PyLong_AsLongLong(s);
  Py_DECREF(s);
  return !(*out == -1 && PyErr_Occurred());
}

// The slot of node (made on first sight): its index, or -1 with an error set.
int slot_of(Run& r, PyObject* node) {
  auto it = r.index.find(node);
  if (it != r.index.end()) return it->second;
  Slot s;
  s.node = node;
  if (!seq_of(node, &s.seq)) return -1;
  int k = static_cast<int>(r.slots.size());
  Py_INCREF(node);
  r.slots.push_back(std::move(s));
  r.index.emplace(node, k);
  return k;
}

// (node, nr) of an edge, borrowed; false with an error set when it is not a pair.
bool edge_parts(PyObject* e, PyObject** node, Py_ssize_t* nr) {
  if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 2) {
    PyErr_SetString(PyExc_TypeError, "a graph edge must be a (node, input_nr) pair");
    return false;
  }
  *node = PyTuple_GET_ITEM(e, 0);
  *nr = PyLong_AsSsize_t(PyTuple_GET_ITEM(e, 1));
  return !(*nr == -1 && PyErr_Occurred());
}

// Count the edges reaching each node from the roots (the Python engine's step 1).
bool count_deps(Run& r, const std::vector<int>& roots, std::vector<std::vector<int>>* kids) {
  std::vector<int> stack(roots);
  std::vector<char> seen(r.slots.size(), 1);
  while (!stack.empty()) {
    int k = stack.back();
    stack.pop_back();
    PyObject* nf = next_of(r.slots[k].node);
    if (nf == nullptr) return false;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(nf);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* nxt;
      Py_ssize_t nr;
      if (!edge_parts(PySequence_Fast_GET_ITEM(nf, i), &nxt, &nr)) {
        Py_DECREF(nf);
        return false;
      }
      if (nxt == Py_None) continue;
      size_t before = r.slots.size();
      int j = slot_of(r, nxt);
      if (j < 0) {
        Py_DECREF(nf);
        return false;
      }
      r.slots[j].deps += 1;
      if (r.slots.size() > before) seen.push_back(0);
      if (kids != nullptr) {
        if (kids->size() < r.slots.size()) kids->resize(r.slots.size());
        (*kids)[k].push_back(j);
      }
      if (!seen[j]) {
        seen[j] = 1;
        stack.push_back(j);
      }
    }
    Py_DECREF(nf);
  }
  return true;
}

// buf[nr] += g (g: a new reference, stolen); false with an error set.
bool add_grad(std::vector<PyObject*>& buf, Py_ssize_t nr, PyObject* g) {
  if (static_cast<size_t>(nr) >= buf.size()) buf.resize(nr + 1, nullptr);
  PyObject* old = buf[nr];
  if (old == nullptr) {
    buf[nr] = g;
    return true;
  }
  PyObject* s = PyNumber_Add(old, g);
  Py_DECREF(g);
  if (s == nullptr) return false;
  Py_DECREF(old);
  buf[nr] = s;
  return true;
}

// Whether a node of class OpNode / AccumulateGrad has none of the hooks _node_step runs.
bool plain(PyObject* node) {
  PyTypeObject* t = Py_TYPE(node);
  if (t != E.op_t && t != E.acc_t) return false;
  PyObject** dp = _PyObject_GetDictPtr(node);
  if (dp == nullptr || *dp == nullptr) return true;
  for (PyObject* name : E.hook_names) {
    PyObject* h = PyDict_GetItemWithError(*dp, name);
    if (h == nullptr && PyErr_Occurred()) {
      PyErr_Clear();  // (the Python step reads the hooks itself)
      return false;
    }
    if (h != nullptr && h != Py_None) return false;
  }
  return true;
}

// ---- OpNode.apply natively (ember/autograd/_graph.py's OpNode.apply is the reference) -------
// The common node: one output, a vjp, no list argument, no complex tensor, saved tensors
// without hooks at their saved versions. Anything else goes to OpNode.apply (Python), which
// also raises every error (freed graph, modified saved tensor, missing derivative).

// dtype._cat == 3 (complex), cached per dtype object; -1 with an error set.
int is_complex(PyObject* dtype) {
  auto it = E.complex_dtype.find(dtype);
  if (it != E.complex_dtype.end()) return it->second;
  PyObject* c = PyObject_GetAttr(dtype, E.s_cat);
  if (c == nullptr) return -1;
  long v = PyLong_AsLong(c);
  Py_DECREF(c);
  if (v == -1 && PyErr_Occurred()) return -1;
  Py_INCREF(dtype);
  E.complex_dtype.emplace(dtype, v == 3);
  return v == 3;
}

PyObject* node_dict_get(PyObject* node, PyObject* name) {  // borrowed, nullptr when unset
  PyObject** dp = _PyObject_GetDictPtr(node);
  if (dp == nullptr || *dp == nullptr) return nullptr;
  PyObject* v = PyDict_GetItemWithError(*dp, name);
  if (v == nullptr) PyErr_Clear();
  return v;
}

// The tensor a plain _Saved holds, when it is at its saved version (borrowed), else nullptr:
// hooks, an output to re-link, a stale version (Python raises) are left to _Saved.unpack.
PyObject* saved_fast(PyObject* s) {
  if (Py_TYPE(s) != E.saved_t) return nullptr;
  PyObject* hook = member(s, E.s_unpack_hook);
  if (hook == nullptr || hook != Py_None || member(s, E.s_is_output) != Py_False) return nullptr;
  PyObject* t = member(s, E.s_t);
  PyObject* v = member(s, E.s_version);
  if (t == nullptr || v == nullptr || Py_TYPE(t) != E.tensor_t) return nullptr;
  PyObject* st = member(t, E.t_st);
  if (st == nullptr || st == Py_None) return PyLong_Check(v) && PyLong_AsLong(v) == 0 ? t : nullptr;
  PyObject* now = member(st, E.st_version);
  if (now == v) return t;
  if (now == nullptr || !PyLong_CheckExact(now) || !PyLong_CheckExact(v)) return nullptr;
  int eq = PyObject_RichCompareBool(now, v, Py_EQ);
  if (eq < 0) PyErr_Clear();
  return eq == 1 ? t : nullptr;
}

PyObject* unpack(PyObject* s, PyObject* node) {  // new reference
  PyObject* t = saved_fast(s);
  if (t != nullptr) {
    Py_INCREF(t);
    return t;
  }
  static PyObject* s_unpack = PyUnicode_InternFromString("unpack");
  PyObject* args[2] = {s, node};
  return PyObject_VectorcallMethod(s_unpack, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
}

// Whether g (a vjp's gradient) already has meta m's (shape, dtype, device): fix_grads' no-op.
bool fits(PyObject* g, PyObject* m) {
  if (Py_TYPE(g) != E.tensor_t || !PyTuple_Check(m) || PyTuple_GET_SIZE(m) != 3) return false;
  if (member(g, E.t_dtype) != PyTuple_GET_ITEM(m, 1) ||
      member(g, E.t_device) != PyTuple_GET_ITEM(m, 2))
    return false;
  PyObject* a = member(g, E.t_shape);
  PyObject* b = PyTuple_GET_ITEM(m, 0);
  if (a == b) return true;
  int eq = PyObject_RichCompareBool(a, b, Py_EQ);
  if (eq < 0) PyErr_Clear();
  return eq == 1;
}

// 1: *out holds the node's gradients; 0: OpNode.apply must run it; -1: an error.
int op_apply(PyObject* node, PyObject* glist, PyObject** out) {
  PyObject* freed = node_dict_get(node, E.s_freed);
  PyObject* om = node_dict_get(node, E.s_out_meta);
  PyObject* saved_out = node_dict_get(node, E.s_out);
  if ((freed != nullptr && freed != Py_False) || (om != nullptr && om != Py_None) ||
      (saved_out != nullptr && saved_out != Py_None && Py_TYPE(saved_out) != E.saved_t))
    return 0;
  PyObject* info = member(node, E.n_info);
  PyObject* args = member(node, E.n_args);
  PyObject* saved = member(node, E.n_saved);
  PyObject* metas = member(node, E.n_in_meta);
  if (info == nullptr || args == nullptr || saved == nullptr || metas == nullptr) return 0;
  PyObject* vjp = member(info, E.i_vjp);
  if (vjp == nullptr || vjp == Py_None || member(info, E.i_no_list) != Py_True) return 0;
  if (!(PyList_CheckExact(args) || PyTuple_CheckExact(args)) ||
      !(PyList_CheckExact(metas) || PyTuple_CheckExact(metas)) ||
      !(saved == Py_None || PyList_CheckExact(saved) || PyTuple_CheckExact(saved)))
    return 0;
  PyObject* g = PyList_GET_ITEM(glist, 0);
  Py_ssize_t n_meta = PySequence_Fast_GET_SIZE(metas);
  if (member(info, E.i_cwrap) == Py_True) {  // complex: the conjugation around the vjp: Python
    if (g != Py_None) {
      if (Py_TYPE(g) != E.tensor_t) return 0;
      int c = is_complex(member(g, E.t_dtype));
      if (c != 0) return c < 0 ? -1 : 0;
    }
    for (Py_ssize_t i = 0; i < n_meta; ++i) {
      PyObject* m = PySequence_Fast_GET_ITEM(metas, i);
      if (m == Py_None) continue;
      if (!PyTuple_Check(m) || PyTuple_GET_SIZE(m) != 3) return 0;
      int c = is_complex(PyTuple_GET_ITEM(m, 1));
      if (c != 0) return c < 0 ? -1 : 0;
    }
  }
  Py_ssize_t n_saved = saved == Py_None ? 0 : PySequence_Fast_GET_SIZE(saved);
  Py_ssize_t nargs = PySequence_Fast_GET_SIZE(args);
  for (Py_ssize_t j = 0; j < n_saved; ++j) {  // (i, _Saved) pairs; a list of them: Python
    PyObject* pair = PySequence_Fast_GET_ITEM(saved, j);
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
        Py_TYPE(PyTuple_GET_ITEM(pair, 1)) != E.saved_t)
      return 0;
    Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0));
    if (i < 0 || i >= nargs) {
      PyErr_Clear();
      return 0;
    }
  }
  // [g, out, *args], the saved tensors unpacked into their places
  std::vector<PyObject*> call(static_cast<size_t>(nargs) + 2, nullptr);
  auto drop = [&call]() {
    for (PyObject* v : call) Py_XDECREF(v);
  };
  Py_INCREF(g);
  call[0] = g;
  if (saved_out != nullptr && saved_out != Py_None) {
    call[1] = unpack(saved_out, node);
    if (call[1] == nullptr) {
      drop();
      return -1;
    }
  } else {
    Py_INCREF(Py_None);
    call[1] = Py_None;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    call[i + 2] = PySequence_Fast_GET_ITEM(args, i);
    Py_INCREF(call[i + 2]);
  }
  for (Py_ssize_t j = 0; j < n_saved; ++j) {
    PyObject* pair = PySequence_Fast_GET_ITEM(saved, j);
    Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0));
    PyObject* t = unpack(PyTuple_GET_ITEM(pair, 1), node);
    if (t == nullptr) {
      drop();
      return -1;
    }
    Py_SETREF(call[i + 2], t);
  }
  PyObject* res = PyObject_Vectorcall(vjp, call.data(), call.size(), nullptr);
  drop();
  if (res == nullptr) return -1;
  if (!PyTuple_Check(res) && !PyList_Check(res)) Py_SETREF(res, PyTuple_Pack(1, res));
  if (res == nullptr) return -1;
  Py_ssize_t n = std::min(PySequence_Fast_GET_SIZE(res), n_meta);  // (zip's length)
  PyObject* grads = PyList_New(n);
  if (grads == nullptr) {
    Py_DECREF(res);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {  // fix_grads: sum_to / casts where a gradient needs them
    PyObject* gi = PySequence_Fast_GET_ITEM(res, i);
    PyObject* m = PySequence_Fast_GET_ITEM(metas, i);
    PyObject* v;
    if (gi == Py_None || m == Py_None) {
      v = Py_None;
      Py_INCREF(v);
    } else if (fits(gi, m)) {
      v = gi;
      Py_INCREF(v);
    } else {
      PyObject* fixed = PyObject_CallFunction(E.fix_grads, "[O][O]", gi, m);
      v = fixed == nullptr ? nullptr : PySequence_GetItem(fixed, 0);
      Py_XDECREF(fixed);
      if (v == nullptr) {
        Py_DECREF(res);
        Py_DECREF(grads);
        return -1;
      }
    }
    PyList_SET_ITEM(grads, i, v);
  }
  Py_DECREF(res);
  *out = grads;
  return 1;
}

// OpNode.release: its saved tensors go (then a second backward raises); false on error.
bool op_release(PyObject* node) {
  PyObject* saved = member(node, E.n_saved);
  PyObject* out = node_dict_get(node, E.s_out);
  bool any = (saved != nullptr && saved != Py_None && PyObject_Length(saved) > 0) ||
             (out != nullptr && out != Py_None);
  if (!any) return true;
  for (Py_ssize_t off : {E.n_args, E.n_saved}) {
    PyObject** p = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(node) + off);
    Py_INCREF(Py_None);
    Py_XSETREF(*p, Py_None);
  }
  return PyObject_SetAttr(node, E.s_out, Py_None) == 0 &&
         PyObject_SetAttr(node, E.s_freed, Py_True) == 0;
}

// Run one node on its gradients (gin is emptied: its references move on). Returns the node's
// gradients for its next_functions (a new reference: list/tuple, or None), nullptr on error.
// With inputs= (autograd.grad): cap is the node's [(output_nr, slot)] into captured (a node an
// input's gradient flows into), and run whether it must run at all.
PyObject* run_node(PyObject* node, std::vector<PyObject*>& gin, bool keep_graph, PyObject* cap,
                   PyObject* captured, bool run) {
  size_t n_out = gin.size();
  while (n_out > 0 && gin[n_out - 1] == nullptr) --n_out;
  if (cap != nullptr || !plain(node)) {  // autograd's own per-node step, gin as a dict
    PyObject* d = PyDict_New();
    if (d == nullptr) return nullptr;
    for (size_t i = 0; i < n_out; ++i) {
      if (gin[i] == nullptr) continue;
      PyObject* key = PyLong_FromSize_t(i);
      int rc = key == nullptr ? -1 : PyDict_SetItem(d, key, gin[i]);
      Py_XDECREF(key);
      if (rc != 0) {
        Py_DECREF(d);
        return nullptr;
      }
    }
    for (PyObject*& g : gin) Py_CLEAR(g);
    PyObject* args[6] = {node, d, keep_graph ? Py_True : Py_False, run ? Py_True : Py_False,
                         cap != nullptr ? cap : Py_None, captured != nullptr ? captured : Py_None};
    PyObject* out = PyObject_Vectorcall(E.step, args, 6, nullptr);
    Py_DECREF(d);
    return out;
  }
  if (n_out == 0 || !run) {  // no gradient arrived, or no wanted input below: it does not run
    for (PyObject*& g : gin) Py_CLEAR(g);
    Py_RETURN_NONE;
  }
  PyObject* glist = PyList_New(static_cast<Py_ssize_t>(n_out));
  if (glist == nullptr) return nullptr;
  for (size_t i = 0; i < n_out; ++i) {  // the references move into the list
    PyObject* g = gin[i] != nullptr ? gin[i] : (Py_INCREF(Py_None), Py_None);
    gin[i] = nullptr;
    PyList_SET_ITEM(glist, static_cast<Py_ssize_t>(i), g);
  }
  gin.clear();
  PyObject* out;
  if (Py_TYPE(node) == E.op_t) {
    int rc = op_apply(node, glist, &out);
    if (rc != 0) {
      Py_DECREF(glist);
      if (rc < 0) return nullptr;
      E.native_applies += 1;
      if (!keep_graph && !op_release(node)) {
        Py_DECREF(out);
        return nullptr;
      }
      return out;
    }
  }
  if (Py_TYPE(node) == E.acc_t) {  // (refs: whether the gradient may become .grad as is)
    PyObject* args[3] = {node, glist, E.acc_refs};
    out = PyObject_VectorcallMethod(E.s_apply, args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  } else {
    PyObject* args[2] = {node, glist};
    out = PyObject_VectorcallMethod(E.s_apply, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  }
  Py_DECREF(glist);
  if (out == nullptr || keep_graph) return out;
  PyObject* args[1] = {node};
  PyObject* rel = PyObject_VectorcallMethod(E.s_release, args,
                                            1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  if (rel == nullptr) {
    Py_DECREF(out);
    return nullptr;
  }
  Py_DECREF(rel);
  return out;
}

using Ready = std::priority_queue<std::pair<long long, int>>;  // (seq, slot): latest first

// Hand a node's output gradients to its next_functions and queue those now complete.
bool propagate(Run& r, int k, PyObject* out, Ready& ready, const std::vector<char>* needed) {
  PyObject* nf = next_of(r.slots[k].node);
  if (nf == nullptr) return false;
  PyObject* outs = nullptr;
  if (out != Py_None) {
    outs = PySequence_Fast(out, "a node's apply must return a sequence of gradients");
    if (outs == nullptr) {
      Py_DECREF(nf);
      return false;
    }
  }
  Py_ssize_t n_out = outs != nullptr ? PySequence_Fast_GET_SIZE(outs) : 0;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(nf);
  bool ok = true;
  for (Py_ssize_t i = 0; i < n && ok; ++i) {
    PyObject* nxt;
    Py_ssize_t nr;
    if (!(ok = edge_parts(PySequence_Fast_GET_ITEM(nf, i), &nxt, &nr))) break;
    if (nxt == Py_None) continue;
    auto it = r.index.find(nxt);
    if (it == r.index.end()) {  // next_functions changed since the count (a hook's doing)
      PyErr_SetString(PyExc_RuntimeError, "backward: a node's next_functions changed during "
                                          "the backward pass");
      ok = false;
      break;
    }
    if (needed != nullptr && !(*needed)[it->second]) continue;  // no wanted input below it
    Slot& s = r.slots[it->second];
    if (i < n_out) {
      PyObject* g = PySequence_Fast_GET_ITEM(outs, i);
      if (g != Py_None) {
        Py_INCREF(g);
        if (!(ok = add_grad(s.gin, nr, g))) break;
      }
    }
    if (--s.deps == 0) {
      s.queued = true;
      ready.emplace(s.seq, it->second);
    }
  }
  Py_XDECREF(outs);
  Py_DECREF(nf);
  return ok;
}

// With inputs= (autograd.grad, backward(inputs=)): the nodes to run, as the Python engine's
// `_needed`: needed = an input's node or above one; run = above one (needed children).
struct Want {
  std::vector<char> needed, run;
  std::unordered_map<int, py::list> cap;  // slot -> [(output_nr, input index)]
  py::list captured;
};

void plan_inputs(Run& r, const std::vector<int>& roots, const std::vector<std::vector<int>>& kids,
                 py::sequence inputs, Want& w) {
  size_t n = r.slots.size();
  std::vector<char> target(n, 0);
  Py_ssize_t m = PySequence_Size(inputs.ptr());
  if (m < 0) throw py::error_already_set();
  w.captured = py::list();
  for (Py_ssize_t i = 0; i < m; ++i) w.captured.append(py::none());
  for (Py_ssize_t i = 0; i < m; ++i) {
    py::object e = inputs[i];
    if (e.is_none()) continue;
    PyObject* node;
    Py_ssize_t nr;
    if (!edge_parts(e.ptr(), &node, &nr)) throw py::error_already_set();
    auto it = r.index.find(node);
    if (it == r.index.end()) continue;  // not reached from the roots: no gradient
    target[it->second] = 1;
    w.cap[it->second].append(py::make_tuple(nr, i));
  }
  w.needed.assign(n, 0);
  w.run.assign(n, 0);
  std::vector<char> state(n, 0);  // 0 new, 1 on the stack, 2 done (post-order)
  std::vector<std::pair<int, size_t>> stack;
  for (int root : roots) {
    if (state[root]) continue;
    state[root] = 1;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [k, i] = stack.back();
      const std::vector<int>* ks = static_cast<size_t>(k) < kids.size() ? &kids[k] : nullptr;
      if (ks != nullptr && i < ks->size()) {
        int c = (*ks)[i++];
        if (!state[c]) {
          state[c] = 1;
          stack.emplace_back(c, 0);
        }
        continue;
      }
      bool below = false;
      if (ks != nullptr)
        for (int c : *ks) below = below || w.needed[c];
      w.run[k] = below;
      w.needed[k] = below || target[k];
      state[k] = 2;
      stack.pop_back();
    }
  }
}

// engine_run(roots, grads, keep_graph, inputs, accumulate): backward from roots [(node, nr)] with
// grads. inputs: None, or each wanted input's edge (None: it needs no gradient): returns their
// gradients, the leaves among them accumulated only when accumulate.
py::object engine_run(py::sequence roots, py::sequence grads, bool keep_graph, py::object inputs,
                      bool accumulate) {
  if (!E.ready) throw py::value_error("engine_run: engine_init was not called");
  Run r;
  std::vector<int> root_slots;
  Py_ssize_t n = PySequence_Size(roots.ptr());
  if (n < 0 || PySequence_Size(grads.ptr()) != n) throw py::value_error("engine_run: roots/grads");
  for (Py_ssize_t i = 0; i < n; ++i) {
    py::object e = roots[i];
    PyObject* node;
    Py_ssize_t nr;
    if (!edge_parts(e.ptr(), &node, &nr)) throw py::error_already_set();
    size_t before = r.slots.size();
    int k = slot_of(r, node);
    if (k < 0) throw py::error_already_set();
    if (r.slots.size() > before) root_slots.push_back(k);
  }
  bool want = !inputs.is_none();
  std::vector<std::vector<int>> kids;
  if (!count_deps(r, root_slots, want ? &kids : nullptr)) throw py::error_already_set();
  Want w;
  if (want) plan_inputs(r, root_slots, kids, inputs, w);
  for (Py_ssize_t i = 0; i < n; ++i) {  // the roots' gradients, summed per (node, nr)
    py::object e = roots[i];
    py::object g = grads[i];
    PyObject* node;
    Py_ssize_t nr;
    if (!edge_parts(e.ptr(), &node, &nr)) throw py::error_already_set();
    if (g.is_none()) continue;
    if (!add_grad(r.slots[r.index[node]].gin, nr, g.release().ptr()))
      throw py::error_already_set();
  }
  Ready ready;
  for (int k : root_slots) {
    Slot& s = r.slots[k];
    if (s.deps == 0 && !s.queued) {
      s.queued = true;
      ready.emplace(s.seq, k);
    }
  }
  E.runs += 1;
  while (!ready.empty()) {
    int k = ready.top().second;
    ready.pop();
    PyObject* node = r.slots[k].node;
    std::vector<PyObject*> gin = std::move(r.slots[k].gin);
    r.slots[k].gin.clear();
    PyObject* cap = nullptr;
    bool run = true;
    if (want) {
      auto c = w.cap.find(k);
      if (c != w.cap.end()) cap = c->second.ptr();
      run = PyObject_TypeCheck(node, E.acc_t) ? (accumulate && cap != nullptr) : w.run[k] != 0;
    }
    PyObject* out = run_node(node, gin, keep_graph, cap, want ? w.captured.ptr() : nullptr, run);
    for (PyObject* g : gin) Py_XDECREF(g);
    if (out == nullptr) throw py::error_already_set();
    bool ok = propagate(r, k, out, ready, want ? &w.needed : nullptr);
    Py_DECREF(out);
    if (!ok) throw py::error_already_set();
  }
  if (!want) return py::none();
  return w.captured;
}

PyObject* keep_obj(py::handle h) {
  Py_INCREF(h.ptr());
  return h.ptr();
}

void engine_init(py::dict g) {
  E.node_t = reinterpret_cast<PyTypeObject*>(keep_obj(g["Node"]));
  E.op_t = reinterpret_cast<PyTypeObject*>(keep_obj(g["OpNode"]));
  E.acc_t = reinterpret_cast<PyTypeObject*>(keep_obj(g["AccumulateGrad"]));
  E.step = keep_obj(g["node_step"]);
  E.acc_refs = keep_obj(g["acc_refs"]);
  E.s_apply = PyUnicode_InternFromString("apply");
  E.s_release = PyUnicode_InternFromString("release");
  E.s_next = PyUnicode_InternFromString("next_functions");
  E.s_seq = PyUnicode_InternFromString("_seq");
  const char* hooks[4] = {"_tensor_hooks", "_retain", "_pre_hooks", "_hooks"};
  for (int i = 0; i < 4; ++i) E.hook_names[i] = PyUnicode_InternFromString(hooks[i]);
  E.fix_grads = keep_obj(g["fix_grads"]);
  E.tensor_t = reinterpret_cast<PyTypeObject*>(keep_obj(g["Tensor"]));
  E.saved_t = reinterpret_cast<PyTypeObject*>(keep_obj(g["Saved"]));
  E.s_out = PyUnicode_InternFromString("out");
  E.s_freed = PyUnicode_InternFromString("freed");
  E.s_out_meta = PyUnicode_InternFromString("out_meta");
  E.s_cat = PyUnicode_InternFromString("_cat");
  E.init_graph_slots(g);
  PyObject* I = g["OpInfo"].ptr();
  E.i_vjp = member_offset(I, "vjp");
  E.i_cwrap = member_offset(I, "cwrap");
  E.i_no_list = member_offset(I, "no_list");
  E.ready = true;
}

}  // namespace

void init_engine(py::module_& m) {
  m.def("engine_init", &engine_init, py::arg("globals"),
        "Hand ember-autograd's node classes to the native backward loop (autograd/_native.py)");
  m.def("engine_run", &engine_run, py::arg("roots"), py::arg("grads"), py::arg("keep_graph"),
        py::arg("inputs") = py::none(), py::arg("accumulate") = true,
        "Run a backward pass from roots [(node, nr)] with their grads, returning the gradients "
        "of inputs (their edges) when given (no anomaly mode: the caller checks; grad mode on "
        "for create_graph: the caller sets it)");
  m.def("engine_stats", []() { return py::make_tuple(E.runs, E.native_applies); },
        "(backward passes, OpNode backward calls) the native loop ran so far");
}
