/* ember's stable C ABI: what an extension may use of ember-core, through one function table.
 *
 * An extension built against ABI major M and targeting minor N (EMBER_TARGET_VERSION) runs on every
 * core offering ABI M.x with x >= N, without recompiling. Within a major version entries are only
 * ever appended to the table: never removed, reordered or changed. Core hands the table out as the
 * capsule "ember._C._ABI_TABLE" (like NumPy's _ARRAY_API); ember_abi_import() fetches and checks it.
 *
 * Conventions
 *   - Every entry that can fail returns an EmberStatus (EMBER_OK == 0) and writes results through
 *     out-pointers; on failure ember_last_error() says why (per thread). Nothing throws or aborts:
 *     a null handle, a wrong dtype or an unknown op name is a failing status and a message.
 *   - Handles (EmberTensor, EmberList, EmberString) are opaque references. A handle an entry gives
 *     out (created tensors, call_op results) is owned by the caller: release it. Handles passed
 *     in are borrowed. A boxed kernel gets borrowed inputs and stores new references as outputs.
 *   - dtype / device / layout codes come from functions (ember_dtype_float32()), never constants.
 *   - The boxed stack: one 64-bit slot (EmberSlot) per argument, typed by the op's schema:
 *       Tensor: an EmberTensor (0 = None for Tensor?)   int, SymInt: int64_t
 *       float, Scalar: a double's bits (ember_slot_from_double / ember_slot_to_double)
 *       bool: 0 / 1        ScalarType: a dtype code      str: an EmberString
 *       int[], float[], Tensor[]: an EmberList           Device: ember_slot_from_device(type, index)
 *       optional non-tensor (int?, float?, ...): a pointer to an EmberSlot holding it, 0 = None
 *     Outputs overwrite the stack from slot 0, one slot per return.
 *
 * Versions: 1.0 tensors, lists, strings, call_op, library define/impl.
 *           1.1 from_blob, library_register_autograd, set_error.
 */
#ifndef EMBER_ABI_H
#define EMBER_ABI_H

#include <stddef.h>
#include <stdint.h>

#define EMBER_ABI_VERSION_MAJOR 1
#define EMBER_ABI_VERSION_MINOR 1

/* One integer for comparisons: major * 1000 + minor. */
#define EMBER_ABI_VERSION_OF(major, minor) ((major) * 1000 + (minor))
#define EMBER_ABI_VERSION EMBER_ABI_VERSION_OF(EMBER_ABI_VERSION_MAJOR, EMBER_ABI_VERSION_MINOR)

/* The version an extension targets (define it before including this header): entries newer than
 * it are not declared (using one is a compile error), and import refuses a core offering less. */
#ifndef EMBER_TARGET_VERSION
#define EMBER_TARGET_VERSION EMBER_ABI_VERSION
#endif
#if EMBER_TARGET_VERSION / 1000 != EMBER_ABI_VERSION_MAJOR
#error "EMBER_TARGET_VERSION names another ABI major version than this ember/abi.h"
#endif
#if EMBER_TARGET_VERSION > EMBER_ABI_VERSION
#error "EMBER_TARGET_VERSION is newer than this ember/abi.h: install a newer ember-stable-abi"
#endif
#define EMBER_TARGET_MINOR (EMBER_TARGET_VERSION % 1000)

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t EmberStatus;
#define EMBER_OK 0
#define EMBER_ERR_RUNTIME 1     /* the op or kernel raised */
#define EMBER_ERR_NULL 2        /* a null handle or out-pointer */
#define EMBER_ERR_TYPE 3        /* a handle of the wrong kind, an argument of the wrong type */
#define EMBER_ERR_VALUE 4       /* a bad value: unknown dtype or device code, bad sizes */
#define EMBER_ERR_NOT_FOUND 5   /* an unknown op or namespace */
#define EMBER_ERR_INDEX 6       /* an index out of range */

typedef struct EmberTensorOpaque* EmberTensor;
typedef struct EmberListOpaque* EmberList;
typedef struct EmberStringOpaque* EmberString;
typedef uint64_t EmberSlot;

/* A boxed kernel: reads its num_args inputs from stack, writes its num_outputs results there. */
typedef EmberStatus (*EmberBoxedKernel)(EmberSlot* stack, int64_t num_args, int64_t num_outputs,
                                        void* user_data);
/* Frees from_blob memory when the tensor (and every view of it) is gone. */
typedef void (*EmberDeleter)(void* data, void* context);

typedef struct EmberAbiTable {
  /* ---- header: what the core offers ---- */
  uint32_t major;
  uint32_t minor;
  uint32_t size; /* sizeof the core's table: entries past it do not exist */
  uint32_t reserved;

  /* ---- 1.0 ---- */
  const char* (*last_error)(void);
  void (*clear_error)(void);

  int32_t (*dtype_bool)(void);
  int32_t (*dtype_uint8)(void);
  int32_t (*dtype_int8)(void);
  int32_t (*dtype_int16)(void);
  int32_t (*dtype_int32)(void);
  int32_t (*dtype_int64)(void);
  int32_t (*dtype_float16)(void);
  int32_t (*dtype_bfloat16)(void);
  int32_t (*dtype_float32)(void);
  int32_t (*dtype_float64)(void);
  int32_t (*dtype_complex64)(void);
  int32_t (*dtype_complex128)(void);
  EmberStatus (*dtype_itemsize)(int32_t dtype, int64_t* out);
  int32_t (*device_type_cpu)(void);
  int32_t (*device_type_meta)(void);
  int32_t (*device_type_cuda)(void);
  int32_t (*layout_strided)(void);

  EmberStatus (*tensor_dim)(EmberTensor t, int64_t* out);
  EmberStatus (*tensor_sizes)(EmberTensor t, int64_t* out, int64_t capacity);
  EmberStatus (*tensor_strides)(EmberTensor t, int64_t* out, int64_t capacity);
  EmberStatus (*tensor_numel)(EmberTensor t, int64_t* out);
  EmberStatus (*tensor_dtype)(EmberTensor t, int32_t* out);
  EmberStatus (*tensor_device)(EmberTensor t, int32_t* device_type, int32_t* device_index);
  EmberStatus (*tensor_layout)(EmberTensor t, int32_t* out);
  EmberStatus (*tensor_data_ptr)(EmberTensor t, void** out); /* at the storage offset */
  EmberStatus (*tensor_storage_offset)(EmberTensor t, int64_t* out);
  EmberStatus (*tensor_is_contiguous)(EmberTensor t, int32_t* out);
  EmberStatus (*empty_strided)(int64_t ndim, const int64_t* sizes, const int64_t* strides,
                               int32_t dtype, int32_t device_type, int32_t device_index,
                               EmberTensor* out);
  EmberStatus (*tensor_retain)(EmberTensor t);
  EmberStatus (*tensor_release)(EmberTensor t);

  EmberStatus (*list_new)(EmberList* out);
  EmberStatus (*list_size)(EmberList l, int64_t* out);
  EmberStatus (*list_append_tensor)(EmberList l, EmberTensor t);
  EmberStatus (*list_append_int)(EmberList l, int64_t v);
  EmberStatus (*list_append_float)(EmberList l, double v);
  EmberStatus (*list_get_tensor)(EmberList l, int64_t i, EmberTensor* out); /* new reference */
  EmberStatus (*list_get_int)(EmberList l, int64_t i, int64_t* out);
  EmberStatus (*list_get_float)(EmberList l, int64_t i, double* out);
  EmberStatus (*list_release)(EmberList l);

  EmberStatus (*string_new)(const char* utf8, EmberString* out);
  EmberStatus (*string_data)(EmberString s, const char** out); /* valid while s lives */
  EmberStatus (*string_release)(EmberString s);

  /* Run an op through the dispatcher: name "aten::add" or "add" or "ns::op", overload "" or
   * "Tensor". stack holds max(num_args, num_outputs) slots; trailing defaulted args may be left
   * out of num_args. */
  EmberStatus (*call_op)(const char* name, const char* overload, EmberSlot* stack,
                         int64_t num_args, int64_t num_outputs);
  /* Define "name(Tensor x, float k) -> Tensor" in namespace ns (ember.ops.<ns>.<name>). */
  EmberStatus (*library_define)(const char* ns, const char* schema);
  /* A boxed kernel of ns::name for a device type ("cpu", "cuda", ...), "meta" for the fake
   * kernel (outputs' shapes and dtypes, on the meta device) or "default" for every device. */
  EmberStatus (*library_impl)(const char* ns, const char* name, const char* device_type,
                              EmberBoxedKernel kernel, void* user_data);

  /* ---- 1.1 ---- */
  EmberStatus (*from_blob)(void* data, int64_t ndim, const int64_t* sizes, const int64_t* strides,
                           int32_t dtype, int32_t device_type, int32_t device_index,
                           EmberDeleter deleter, void* context, EmberTensor* out);
  /* The derivative of ns::name is the op `backward` ("ns::name_backward"): it takes the output
   * gradients, then every argument of ns::name, and returns one gradient per Tensor argument. */
  EmberStatus (*library_register_autograd)(const char* ns, const char* name,
                                           const char* backward);
  /* For a kernel to report why it fails (then return EMBER_ERR_RUNTIME). */
  void (*set_error)(const char* message);
} EmberAbiTable;

/* Bytes of the table up to and including version 1.minor (what a core of that minor offers). */
#define EMBER_ABI_TABLE_SIZE_1_0 offsetof(EmberAbiTable, from_blob)
#define EMBER_ABI_TABLE_SIZE_1_1 sizeof(EmberAbiTable)

/* ---- slots ---- */
static inline EmberSlot ember_slot_from_double(double v) {
  union { double d; uint64_t u; } x;
  x.d = v;
  return x.u;
}
static inline double ember_slot_to_double(EmberSlot s) {
  union { double d; uint64_t u; } x;
  x.u = s;
  return x.d;
}
static inline EmberSlot ember_slot_from_ptr(const void* p) { return (EmberSlot)(uintptr_t)p; }
static inline void* ember_slot_to_ptr(EmberSlot s) { return (void*)(uintptr_t)s; }
static inline EmberSlot ember_slot_from_device(int32_t type, int32_t index) {
  return ((EmberSlot)(uint32_t)type << 32) | (uint32_t)index;
}

/* ---- the table this translation unit uses ---- */
/* One per translation unit (like NumPy's PyArray_API without PY_ARRAY_UNIQUE_SYMBOL): call
 * ember_abi_import() (or ember_abi_use()) in each file that calls the ember_* functions. */
#if defined(__GNUC__)
__attribute__((unused))
#endif
static const EmberAbiTable* ember_abi_table_ = NULL;

/* Check a table against this extension's target; 0 when usable, else -1 and a message in msg. */
static inline int ember_abi_check(const EmberAbiTable* t, char* msg, size_t n) {
  unsigned want_minor = (unsigned)EMBER_TARGET_MINOR;
  size_t want_size = want_minor >= 1 ? EMBER_ABI_TABLE_SIZE_1_1 : EMBER_ABI_TABLE_SIZE_1_0;
  int ok = t != NULL && t->major == EMBER_ABI_VERSION_MAJOR && t->minor >= want_minor &&
           t->size >= want_size;
  if (!ok && msg != NULL && n > 0) {
    unsigned major = t ? t->major : 0, minor = t ? t->minor : 0;
    int k = 0;
    const char* tail = "";
    if (t == NULL) {
      tail = " (no table)";
    } else if (major != EMBER_ABI_VERSION_MAJOR) {
      tail = ": rebuild the extension against this core's ember-stable-abi";
    } else {
      tail = ": upgrade ember-core";
    }
    /* snprintf is C99; written out so the header needs nothing beyond stddef/stdint */
    {
      static const char head[] = "this extension targets ember stable ABI ";
      const char* parts[2] = {head, " but the installed ember-core offers ABI "};
      unsigned nums[4] = {EMBER_ABI_VERSION_MAJOR, want_minor, major, minor};
      int p, q;
      for (p = 0; p < 2; ++p) {
        const char* s = parts[p];
        while (*s && (size_t)k + 1 < n) msg[k++] = *s++;
        for (q = 0; q < 2; ++q) {
          char buf[12];
          int m = 0;
          unsigned v = nums[p * 2 + q];
          do { buf[m++] = (char)('0' + v % 10); v /= 10; } while (v && m < 11);
          while (m && (size_t)k + 1 < n) msg[k++] = buf[--m];
          if (q == 0 && (size_t)k + 1 < n) msg[k++] = '.';
        }
      }
      while (*tail && (size_t)k + 1 < n) msg[k++] = *tail++;
      msg[k] = '\0';
    }
  }
  return ok ? 0 : -1;
}

/* Use a table obtained elsewhere (a C test, an AOT-compiled model): checks it like import. */
static inline int ember_abi_use(const EmberAbiTable* t, char* msg, size_t n) {
  if (ember_abi_check(t, msg, n) != 0) return -1;
  ember_abi_table_ = t;
  return 0;
}

#ifdef Py_PYTHON_H
/* Fetch core's table (imports ember._C); on a core offering less than EMBER_TARGET_VERSION,
 * sets ImportError naming both versions and returns -1. */
static inline int ember_abi_import(void) {
  char msg[256];
  const EmberAbiTable* t = NULL;
  /* PyCapsule_Import only walks attributes: import the submodule itself first */
  PyObject* mod = PyImport_ImportModule("ember._C");
  if (mod != NULL) {
    Py_DECREF(mod);
    t = (const EmberAbiTable*)PyCapsule_Import("ember._C._ABI_TABLE", 0);
  }
  if (t == NULL) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_Format(PyExc_ImportError,
                 "ember's stable ABI is not available: ember._C (ember-core's native part) could "
                 "not be loaded (%S)",
                 value ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return -1;
  }
  if (ember_abi_use(t, msg, sizeof msg) != 0) {
    PyErr_SetString(PyExc_ImportError, msg);
    return -1;
  }
  return 0;
}
#endif

/* ---- the entries, as functions (declared only up to EMBER_TARGET_VERSION) ---- */
#define EMBER_ABI_T_ (ember_abi_table_)
static inline const char* ember_last_error(void) { return EMBER_ABI_T_->last_error(); }
static inline void ember_clear_error(void) { EMBER_ABI_T_->clear_error(); }
static inline int32_t ember_dtype_bool(void) { return EMBER_ABI_T_->dtype_bool(); }
static inline int32_t ember_dtype_uint8(void) { return EMBER_ABI_T_->dtype_uint8(); }
static inline int32_t ember_dtype_int8(void) { return EMBER_ABI_T_->dtype_int8(); }
static inline int32_t ember_dtype_int16(void) { return EMBER_ABI_T_->dtype_int16(); }
static inline int32_t ember_dtype_int32(void) { return EMBER_ABI_T_->dtype_int32(); }
static inline int32_t ember_dtype_int64(void) { return EMBER_ABI_T_->dtype_int64(); }
static inline int32_t ember_dtype_float16(void) { return EMBER_ABI_T_->dtype_float16(); }
static inline int32_t ember_dtype_bfloat16(void) { return EMBER_ABI_T_->dtype_bfloat16(); }
static inline int32_t ember_dtype_float32(void) { return EMBER_ABI_T_->dtype_float32(); }
static inline int32_t ember_dtype_float64(void) { return EMBER_ABI_T_->dtype_float64(); }
static inline int32_t ember_dtype_complex64(void) { return EMBER_ABI_T_->dtype_complex64(); }
static inline int32_t ember_dtype_complex128(void) { return EMBER_ABI_T_->dtype_complex128(); }
static inline EmberStatus ember_dtype_itemsize(int32_t d, int64_t* out) {
  return EMBER_ABI_T_->dtype_itemsize(d, out);
}
static inline int32_t ember_device_type_cpu(void) { return EMBER_ABI_T_->device_type_cpu(); }
static inline int32_t ember_device_type_meta(void) { return EMBER_ABI_T_->device_type_meta(); }
static inline int32_t ember_device_type_cuda(void) { return EMBER_ABI_T_->device_type_cuda(); }
static inline int32_t ember_layout_strided(void) { return EMBER_ABI_T_->layout_strided(); }
static inline EmberStatus ember_tensor_dim(EmberTensor t, int64_t* out) {
  return EMBER_ABI_T_->tensor_dim(t, out);
}
static inline EmberStatus ember_tensor_sizes(EmberTensor t, int64_t* out, int64_t cap) {
  return EMBER_ABI_T_->tensor_sizes(t, out, cap);
}
static inline EmberStatus ember_tensor_strides(EmberTensor t, int64_t* out, int64_t cap) {
  return EMBER_ABI_T_->tensor_strides(t, out, cap);
}
static inline EmberStatus ember_tensor_numel(EmberTensor t, int64_t* out) {
  return EMBER_ABI_T_->tensor_numel(t, out);
}
static inline EmberStatus ember_tensor_dtype(EmberTensor t, int32_t* out) {
  return EMBER_ABI_T_->tensor_dtype(t, out);
}
static inline EmberStatus ember_tensor_device(EmberTensor t, int32_t* type, int32_t* index) {
  return EMBER_ABI_T_->tensor_device(t, type, index);
}
static inline EmberStatus ember_tensor_layout(EmberTensor t, int32_t* out) {
  return EMBER_ABI_T_->tensor_layout(t, out);
}
static inline EmberStatus ember_tensor_data_ptr(EmberTensor t, void** out) {
  return EMBER_ABI_T_->tensor_data_ptr(t, out);
}
static inline EmberStatus ember_tensor_storage_offset(EmberTensor t, int64_t* out) {
  return EMBER_ABI_T_->tensor_storage_offset(t, out);
}
static inline EmberStatus ember_tensor_is_contiguous(EmberTensor t, int32_t* out) {
  return EMBER_ABI_T_->tensor_is_contiguous(t, out);
}
static inline EmberStatus ember_empty_strided(int64_t ndim, const int64_t* sizes,
                                              const int64_t* strides, int32_t dtype,
                                              int32_t device_type, int32_t device_index,
                                              EmberTensor* out) {
  return EMBER_ABI_T_->empty_strided(ndim, sizes, strides, dtype, device_type, device_index, out);
}
static inline EmberStatus ember_tensor_retain(EmberTensor t) { return EMBER_ABI_T_->tensor_retain(t); }
static inline EmberStatus ember_tensor_release(EmberTensor t) {
  return EMBER_ABI_T_->tensor_release(t);
}
static inline EmberStatus ember_list_new(EmberList* out) { return EMBER_ABI_T_->list_new(out); }
static inline EmberStatus ember_list_size(EmberList l, int64_t* out) {
  return EMBER_ABI_T_->list_size(l, out);
}
static inline EmberStatus ember_list_append_tensor(EmberList l, EmberTensor t) {
  return EMBER_ABI_T_->list_append_tensor(l, t);
}
static inline EmberStatus ember_list_append_int(EmberList l, int64_t v) {
  return EMBER_ABI_T_->list_append_int(l, v);
}
static inline EmberStatus ember_list_append_float(EmberList l, double v) {
  return EMBER_ABI_T_->list_append_float(l, v);
}
static inline EmberStatus ember_list_get_tensor(EmberList l, int64_t i, EmberTensor* out) {
  return EMBER_ABI_T_->list_get_tensor(l, i, out);
}
static inline EmberStatus ember_list_get_int(EmberList l, int64_t i, int64_t* out) {
  return EMBER_ABI_T_->list_get_int(l, i, out);
}
static inline EmberStatus ember_list_get_float(EmberList l, int64_t i, double* out) {
  return EMBER_ABI_T_->list_get_float(l, i, out);
}
static inline EmberStatus ember_list_release(EmberList l) { return EMBER_ABI_T_->list_release(l); }
static inline EmberStatus ember_string_new(const char* s, EmberString* out) {
  return EMBER_ABI_T_->string_new(s, out);
}
static inline EmberStatus ember_string_data(EmberString s, const char** out) {
  return EMBER_ABI_T_->string_data(s, out);
}
static inline EmberStatus ember_string_release(EmberString s) {
  return EMBER_ABI_T_->string_release(s);
}
static inline EmberStatus ember_call_op(const char* name, const char* overload, EmberSlot* stack,
                                        int64_t num_args, int64_t num_outputs) {
  return EMBER_ABI_T_->call_op(name, overload, stack, num_args, num_outputs);
}
static inline EmberStatus ember_library_define(const char* ns, const char* schema) {
  return EMBER_ABI_T_->library_define(ns, schema);
}
static inline EmberStatus ember_library_impl(const char* ns, const char* name,
                                             const char* device_type, EmberBoxedKernel kernel,
                                             void* user_data) {
  return EMBER_ABI_T_->library_impl(ns, name, device_type, kernel, user_data);
}

#if EMBER_TARGET_VERSION >= 1001
static inline EmberStatus ember_from_blob(void* data, int64_t ndim, const int64_t* sizes,
                                          const int64_t* strides, int32_t dtype,
                                          int32_t device_type, int32_t device_index,
                                          EmberDeleter deleter, void* context, EmberTensor* out) {
  return EMBER_ABI_T_->from_blob(data, ndim, sizes, strides, dtype, device_type, device_index,
                                 deleter, context, out);
}
static inline EmberStatus ember_library_register_autograd(const char* ns, const char* name,
                                                          const char* backward) {
  return EMBER_ABI_T_->library_register_autograd(ns, name, backward);
}
static inline void ember_set_error(const char* message) { EMBER_ABI_T_->set_error(message); }
#endif

#ifdef __cplusplus
}
#endif

#endif /* EMBER_ABI_H */
