// The caching allocator's exact-reuse path in C++, for device launch plans (devplan.cpp).
//
// ember.cuda's CachingAllocator (runtime/allocator.py) stays the one allocator and the reference:
// these two functions do, on its own Python objects, exactly what its `malloc` does when a freed
// block of the same (stream, size) waits in `recent`, and what its `free` does for a plain block
// (no graph pool, used on no other stream). Any other state (a capture, pending events, no such
// block, a private pool, a flush due) calls the Python methods themselves.

#include <Python.h>
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace {

struct Names {
  PyObject *capture_pools, *pending, *recent, *n_recent, *active, *stats, *cached, *allocated,
      *ptr, *pool, *streams_used, *stream, *size, *requested, *allocations, *peak, *frees,
      *free, *block, *alloc;
};
Names N;
bool g_ready = false;

PyObject* intern(const char* s) { return PyUnicode_InternFromString(s); }

void init_names() {
  if (g_ready) return;
  N = {intern("capture_pools"), intern("pending"), intern("recent"), intern("n_recent"),
       intern("active"), intern("stats"), intern("cached"), intern("allocated"), intern("ptr"),
       intern("pool"), intern("streams_used"), intern("stream"), intern("size"),
       intern("requested"), intern("allocations"), intern("peak_allocated"), intern("frees"),
       intern("free"), intern("block"), intern("alloc")};
  g_ready = true;
}

// d[k] += v (ints); false on error
bool add_to(PyObject* d, PyObject* k, PyObject* v, bool sub = false) {
  PyObject* cur = PyDict_GetItemWithError(d, k);  // borrowed
  if (cur == nullptr) return false;
  PyObject* r = sub ? PyNumber_Subtract(cur, v) : PyNumber_Add(cur, v);
  if (r == nullptr) return false;
  int e = PyDict_SetItem(d, k, r);
  Py_DECREF(r);
  return e == 0;
}

// Non-zero length of a container attribute of o (-1 on error).
Py_ssize_t attr_len(PyObject* o, PyObject* name) {
  PyObject* v = PyObject_GetAttr(o, name);
  if (v == nullptr) return -1;
  Py_ssize_t n = PyObject_Length(v);
  Py_DECREF(v);
  return n;
}

// n_recent += delta
bool bump_recent(PyObject* a, long delta) {
  PyObject* v = PyObject_GetAttr(a, N.n_recent);
  if (v == nullptr) return false;
  long n = PyLong_AsLong(v);
  Py_DECREF(v);
  if (n == -1 && PyErr_Occurred()) return false;
  PyObject* nv = PyLong_FromLong(n + delta);
  if (nv == nullptr) return false;
  int e = PyObject_SetAttr(a, N.n_recent, nv);
  Py_DECREF(nv);
  return e == 0;
}

}  // namespace

// allocator.malloc(nbytes, 0) when the exact-reuse list `recent[key]` (key = (0, size)) holds a
// block: that block (new reference). nullptr with no error set: not that case (call malloc);
// nullptr with an error: a Python error.
PyObject* devalloc_malloc(PyObject* a, PyObject* nbytes, PyObject* key, PyObject* size) {
  init_names();
  if (attr_len(a, N.capture_pools) != 0 || attr_len(a, N.pending) != 0) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* recent = PyObject_GetAttr(a, N.recent);
  if (recent == nullptr) return nullptr;
  PyObject* lst = PyDict_GetItemWithError(recent, key);  // borrowed
  Py_DECREF(recent);  // (the allocator holds it)
  if (lst == nullptr || !PyList_CheckExact(lst) || PyList_GET_SIZE(lst) == 0) {
    PyErr_Clear();
    return nullptr;
  }
  Py_ssize_t n = PyList_GET_SIZE(lst);
  PyObject* b = PyList_GET_ITEM(lst, n - 1);
  Py_INCREF(b);
  if (PyList_SetSlice(lst, n - 1, n, nullptr) != 0 || !bump_recent(a, -1) ||
      PyObject_SetAttr(b, N.cached, Py_False) != 0 ||
      PyObject_SetAttr(b, N.allocated, Py_True) != 0) {
    Py_DECREF(b);
    return nullptr;
  }
  PyObject* active = PyObject_GetAttr(a, N.active);
  PyObject* ptr = PyObject_GetAttr(b, N.ptr);
  PyObject* st = PyObject_GetAttr(a, N.stats);
  bool ok = active != nullptr && ptr != nullptr && st != nullptr &&
            PyDict_SetItem(active, ptr, b) == 0 && add_to(st, N.allocated, size) &&
            add_to(st, N.requested, nbytes);
  if (ok) {
    PyObject* one = PyLong_FromLong(1);
    ok = one != nullptr && add_to(st, N.allocations, one);
    Py_XDECREF(one);
  }
  if (ok) {
    PyObject* cur = PyDict_GetItemWithError(st, N.allocated);
    PyObject* peak = PyDict_GetItemWithError(st, N.peak);
    int gt = cur != nullptr && peak != nullptr ? PyObject_RichCompareBool(cur, peak, Py_GT) : -1;
    ok = gt >= 0 && (gt == 0 || PyDict_SetItem(st, N.peak, cur) == 0);
  }
  Py_XDECREF(active);
  Py_XDECREF(ptr);
  Py_XDECREF(st);
  if (!ok) {
    Py_DECREF(b);
    return nullptr;
  }
  return b;
}

namespace {

// allocator.free(block) for a plain block (no pool, no other stream, no flush due), else the
// Python method. Errors are swallowed as CudaBuffer.__del__ does (interpreter shutdown).
void free_block(PyObject* a, PyObject* b) {
  PyObject* allocated = PyObject_GetAttr(b, N.allocated);
  if (allocated == nullptr) return PyErr_Clear();
  Py_DECREF(allocated);
  if (allocated != Py_True) return;  // (free() does nothing then)
  PyObject* pool = PyObject_GetAttr(b, N.pool);
  PyObject* used = PyObject_GetAttr(b, N.streams_used);
  bool plain = pool == Py_None && (used == Py_None || (used != nullptr && PyObject_Length(used) == 0));
  Py_XDECREF(pool);
  Py_XDECREF(used);
  PyObject* nr = plain ? PyObject_GetAttr(a, N.n_recent) : nullptr;
  if (nr != nullptr) {
    plain = PyLong_AsLong(nr) < 256;  // a flush is due at 256: the Python path does it
    Py_DECREF(nr);
  }
  PyErr_Clear();
  if (!plain) {
    PyObject* r = PyObject_CallMethodOneArg(a, N.free, b);
    Py_XDECREF(r);
    return PyErr_Clear();
  }
  PyObject* active = PyObject_GetAttr(a, N.active);
  PyObject* ptr = PyObject_GetAttr(b, N.ptr);
  PyObject* size = PyObject_GetAttr(b, N.size);
  PyObject* stream = PyObject_GetAttr(b, N.stream);
  PyObject* st = PyObject_GetAttr(a, N.stats);
  PyObject* recent = PyObject_GetAttr(a, N.recent);
  PyObject* one = PyLong_FromLong(1);
  PyObject* key = size != nullptr && stream != nullptr ? PyTuple_Pack(2, stream, size) : nullptr;
  bool ok = active != nullptr && ptr != nullptr && size != nullptr && st != nullptr &&
            recent != nullptr && one != nullptr && key != nullptr &&
            PyObject_SetAttr(b, N.allocated, Py_False) == 0 && PyDict_DelItem(active, ptr) == 0 &&
            add_to(st, N.allocated, size, true) && add_to(st, N.frees, one) &&
            PyObject_SetAttr(b, N.streams_used, Py_None) == 0;
  if (ok) {
    PyObject* lst = PyDict_GetItemWithError(recent, key);  // borrowed
    if (lst == nullptr && !PyErr_Occurred()) {
      lst = PyList_New(0);
      ok = lst != nullptr && PyDict_SetItem(recent, key, lst) == 0;
      Py_XDECREF(lst);  // (the dict holds it)
    }
    ok = ok && lst != nullptr && PyObject_SetAttr(b, N.cached, Py_True) == 0 &&
         PyList_Append(lst, b) == 0 && bump_recent(a, 1);
  }
  for (PyObject* o : {active, ptr, size, stream, st, recent, one, key}) Py_XDECREF(o);
  PyErr_Clear();
}

// __del__ of the buffers devplan.cpp makes (ember.cuda's CudaBuffer subclass)
PyObject* buffer_del(PyObject*, PyObject* self) {
  init_names();
  PyObject* err_type, *err_value, *err_tb;
  PyErr_Fetch(&err_type, &err_value, &err_tb);
  PyObject* a = PyObject_GetAttr(self, N.alloc);
  PyObject* b = a != nullptr ? PyObject_GetAttr(self, N.block) : nullptr;
  if (a != nullptr && b != nullptr) free_block(a, b);
  Py_XDECREF(a);
  Py_XDECREF(b);
  PyErr_Clear();
  PyErr_Restore(err_type, err_value, err_tb);
  Py_RETURN_NONE;
}

PyMethodDef kDel = {"devalloc_buffer_del", buffer_del, METH_O,
                    "__del__ of native plans' buffers: the allocator's free, natively"};

}  // namespace

void init_devalloc(py::module_& m) {
  PyObject* f = PyCFunction_New(&kDel, nullptr);
  if (f == nullptr) throw py::error_already_set();
  PyObject* meth = PyInstanceMethod_New(f);  // binds self when set as a class attribute
  Py_DECREF(f);
  if (meth == nullptr) throw py::error_already_set();
  m.attr("devalloc_buffer_del") = py::reinterpret_steal<py::object>(meth);
}
