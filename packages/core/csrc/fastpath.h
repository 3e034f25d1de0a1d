// What fastpath.cpp (the native hit path) and fastpath_grad.cpp (its autograd node) share.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

namespace ember_native {

// The byte offset of a `__slots__` member of a Python class (raises when `name` is not one).
Py_ssize_t member_offset(PyObject* type, const char* name);

// The object in a `__slots__` member at byte offset `off` (borrowed; nullptr when unset).
inline PyObject* member(PyObject* obj, Py_ssize_t off) {
  return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(obj) + off);
}

// Store v (a new reference is taken) in a member of a fresh object (no old value to release).
inline void init_member(PyObject* obj, Py_ssize_t off, PyObject* v) {
  Py_INCREF(v);
  *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(obj) + off) = v;
}

// ---- autograd's node, built natively (fastpath_grad.cpp) ------------------------------------
struct GradOp;  // what recording one op needs, asked of ember-autograd once per op

// Whether a call that needs recording may be recorded natively now: ember-autograd registered
// its node classes, `hook` (dispatch's autograd_hook) is its `record`, no anomaly mode and no
// saved-tensor hooks anywhere. false: the call goes to `hook` (Python).
bool grad_native_now(PyObject* hook);

// The recording description of op (cached), or nullptr when Python must record it.
// nullptr with an error set: an error.
GradOp* grad_op(PyObject* op);

// Attach a graph node for `result` = op(*args) (grad on, an input requires grad), as
// autograd's `record` does; 0, or -1 with an error set.
int grad_record(GradOp* g, PyObject* op, PyObject* args, PyObject* result);

void init_grad(pybind11::module_& m);

}  // namespace ember_native
