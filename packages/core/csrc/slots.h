// The byte offsets of the `__slots__` members the native paths read and write of ember's Python
// classes (core's Tensor and Storage, autograd's OpNode and _Saved), looked up once from the
// globals a path's *_init call is handed (engine.cpp, fastpath_grad.cpp, mutpath.cpp).
#pragma once

#include "fastpath.h"

namespace ember_native {

// Tensor's slots and Storage.version (from g["Tensor"], g["Storage"]).
struct TensorSlots {
  Py_ssize_t t_st = 0, t_shape = 0, t_stride = 0, t_offset = 0, t_dtype = 0, t_device = 0;
  Py_ssize_t t_npc = 0;
  Py_ssize_t st_version = 0;

  // The i-th of _st _shape _stride _offset dtype device _npc (a constant i folds at -O2).
  Py_ssize_t at(int i) const {
    switch (i) {
      case 0: return t_st;
      case 1: return t_shape;
      case 2: return t_stride;
      case 3: return t_offset;
      case 4: return t_dtype;
      case 5: return t_device;
      default: return t_npc;
    }
  }

  void init_tensor_slots(pybind11::dict g) {
    PyObject* T = g["Tensor"].ptr();
    t_st = member_offset(T, "_st");
    t_shape = member_offset(T, "_shape");
    t_stride = member_offset(T, "_stride");
    t_offset = member_offset(T, "_offset");
    t_dtype = member_offset(T, "dtype");
    t_device = member_offset(T, "device");
    t_npc = member_offset(T, "_npc");
    st_version = member_offset(g["Storage"].ptr(), "version");
  }
};

// ... and a graph node's: OpNode's (next_functions and _seq are its base Node's, at the same
// offsets in every node class) and _Saved's (from g["OpNode"], g["Saved"] too).
struct GraphSlots : TensorSlots {
  Py_ssize_t n_next = 0, n_seq = 0, n_op = 0, n_info = 0, n_args = 0, n_saved = 0;
  Py_ssize_t n_in_meta = 0;
  Py_ssize_t s_t = 0, s_version = 0, s_is_output = 0, s_output_nr = 0, s_unpack_hook = 0;

  void init_graph_slots(pybind11::dict g) {
    init_tensor_slots(g);
    PyObject* N = g["OpNode"].ptr();
    n_next = member_offset(N, "next_functions");
    n_seq = member_offset(N, "_seq");
    n_op = member_offset(N, "op");
    n_info = member_offset(N, "_info");
    n_args = member_offset(N, "args");
    n_saved = member_offset(N, "saved");
    n_in_meta = member_offset(N, "in_meta");
    PyObject* S = g["Saved"].ptr();
    s_t = member_offset(S, "t");
    s_version = member_offset(S, "version");
    s_is_output = member_offset(S, "is_output");
    s_output_nr = member_offset(S, "output_nr");
    s_unpack_hook = member_offset(S, "unpack_hook");
  }
};

}  // namespace ember_native
