// What the device launch plan files share (devplan.cpp: the plan cache and the builder's
// answers; devplan_key.cpp: keys; devplan_launch.cpp: packing, allocation and launch).
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ember_dev {

// how a builder keys each argument: kTensor (dtype, device, sizes, strides, 16-byte alignment),
// kScalar (a runtime scalar: its type), kValue (its value), kIdent (its identity), kTensor256
// (a tensor keyed by its alignment class up to 256 bytes: cuBLASLt's algorithms depend on it),
// kInts (a tuple or list of ints or bools, by value: reduction dims, output masks)
enum Kind : char { kTensor = 0, kScalar = 1, kValue = 2, kIdent = 3, kTensor256 = 4, kInts = 5 };

struct ArgKey {
  char kind = kValue;
  PyTypeObject* type = nullptr;  // scalars: exact Python type
  long long i = 0;               // kValue int/bool value or float bits; kScalar: int is i64
  PyObject* obj = nullptr;       // kValue str / kIdent object (owned); kTensor: dtype (owned)
  PyObject* device = nullptr;    // kTensor (owned)
  std::vector<Py_ssize_t> shape, stride;  // kInts: the values in shape
  int cap = 16;                  // kTensor: the alignment class is counted up to this
  int align = 0;                 // kTensor: align_class(address, cap)
  Py_ssize_t itemsize = 0;
};

struct Param {
  int src;     // >= 0: argument position; -1: the output's address; -2: a constant
  char ctype;  // p: u64 address, ?: i1 (int8), b/h/i/q: i8/16/32/64, B/H/I/Q unsigned, f, d
  long long ival = 0;
  double fval = 0;
};

// One launch of a plan: a kernel, or a C call of u64 arguments (cuBLASLt, a copy).
struct Step {
  uint64_t func = 0;              // CUfunction; 0: no launch (fake hook, or nothing)
  bool ccall = false;             // func is a C function of len(params) u64 arguments returning
                                  // a status (cuBLASLt's cublasLtMatmul), not a CUfunction
  unsigned gx = 1, gy = 1, gz = 1, bx = 32, shared = 0;
  std::vector<Param> params;
  PyObject* fake = nullptr;       // (packed bytes) -> None, or nullptr
};

// A buffer a plan allocates besides its first output: another output, or a temporary freed
// after the launches (stream-ordered reuse: the allocator's next block on the same stream).
struct Buf {
  bool out = false;
  PyObject* shape = nullptr;      // outputs: their layout and dtype
  PyObject* stride = nullptr;
  PyObject* rdt = nullptr;
  PyObject* nbytes = nullptr;
  PyObject* size = nullptr;
  PyObject* rkey = nullptr;
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
  uint64_t ctx = 0;               // the context the functions were loaded in (0: do not check)
  std::vector<Step> steps;        // in order (parameter source -1: the output, -2: a constant,
  std::vector<Buf> bufs;          // -3 - j: bufs[j]); outputs after the first make a tuple
  int reg = 0;                    // index of the device registration
  // the result tuple's items when some are None (a gradient not asked for): -1 None, 0 the
  // first output, k the k-th output among bufs; empty: (first output, outputs in bufs...)
  std::vector<int> ret;
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

constexpr int kMaxPlans = 64;  // per op
constexpr int kMaxFailed = 4096;
constexpr int kMaxAsks = 2;
constexpr int kMaxParams = 64;
constexpr int kMaxBufs = 8;      // buffers besides the first output
constexpr int kMaxSteps = 16;

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
extern DG D;

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


// the 16-byte class of an address up to cap bytes: 0 below 16, else min(cap, its lowest set bit)
inline int align_class(uint64_t a, int cap) {
  if (a == 0) return cap;
  uint64_t low = a & (~a + 1);
  if (low < 16) return 0;
  return low >= static_cast<uint64_t>(cap) ? cap : static_cast<int>(low);
}

constexpr long long kI32Max = 2147483647LL;

// devplan_key.cpp
bool tensor_addr(PyObject* t, Py_ssize_t itemsize, uint64_t* out);
bool match(const ArgKey& k, PyObject* v, uint64_t* addr);
bool make_key(char kind, PyObject* v, ArgKey* k);
uint64_t pattern_hash(PyObject* args);

// devplan_launch.cpp
bool open_cuda();
PyObject* replay(const DevPlan* p, PyObject* args, const uint64_t* addrs);

}  // namespace ember_dev
