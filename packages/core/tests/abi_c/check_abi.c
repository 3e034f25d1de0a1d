/* Every entry of ember's stable C ABI, from plain C, including the error paths: a null handle, a
 * handle of the wrong kind, a wrong dtype code, an unknown op must give a failing status and a
 * message, never a crash. Built as a shared library and driven by test_abi_c.py through ctypes.
 *
 *   int ember_abi_c_check(const EmberAbiTable* table, char* report, size_t n)
 *     -> number of failed checks; their descriptions are appended to report.
 *   void ember_abi_c_counts(int* checks, int* failures)
 */
#include <string.h>

#include "ember/abi.h"

static int g_checks, g_failures;
static char* g_report;
static size_t g_cap;

static void note(const char* what, const char* detail) {
  size_t k = strlen(g_report);
  const char* parts[4] = {what, ": ", detail ? detail : "", "\n"};
  int p;
  for (p = 0; p < 4; ++p) {
    const char* s = parts[p];
    while (*s && k + 1 < g_cap) g_report[k++] = *s++;
  }
  g_report[k] = '\0';
}

#define CHECK(cond, what)                                   \
  do {                                                      \
    ++g_checks;                                             \
    if (!(cond)) {                                          \
      ++g_failures;                                         \
      note(what, ember_abi_table_ ? ember_last_error() : ""); \
    }                                                       \
  } while (0)

/* The call fails with `status` and leaves a non-empty message. */
#define CHECK_FAILS(call, status, what)                                    \
  do {                                                                     \
    EmberStatus s_;                                                        \
    ember_clear_error();                                                   \
    s_ = (call);                                                           \
    ++g_checks;                                                            \
    if (s_ != (status) || ember_last_error()[0] == '\0') {                 \
      ++g_failures;                                                        \
      note(what, "expected a failing status with a message");              \
    }                                                                      \
  } while (0)

/* ---- a boxed C kernel: axpy(Tensor x, Tensor y, float a) -> Tensor = a * x + y (float32) ---- */
static EmberStatus axpy_cpu(EmberSlot* stack, int64_t num_args, int64_t num_outputs, void* data) {
  EmberTensor x = (EmberTensor)ember_slot_to_ptr(stack[0]);
  EmberTensor y = (EmberTensor)ember_slot_to_ptr(stack[1]);
  double a = ember_slot_to_double(stack[2]);
  int64_t n = 0, m = 0, i, sizes[8];
  int64_t dim = 0;
  int32_t dt = 0;
  float *px, *py, *po;
  EmberTensor out = NULL;
  if (num_args != 3 || num_outputs != 1 || data != (void*)&g_checks) {
    ember_set_error("axpy: bad call");
    return EMBER_ERR_VALUE;
  }
  if (ember_tensor_dtype(x, &dt) || dt != ember_dtype_float32()) {
    ember_set_error("axpy: expected float32");
    return EMBER_ERR_TYPE;
  }
  if (ember_tensor_numel(x, &n) || ember_tensor_numel(y, &m) || n != m) {
    ember_set_error("axpy: x and y differ in size");
    return EMBER_ERR_VALUE;
  }
  if (ember_tensor_dim(x, &dim) || dim > 8 || ember_tensor_sizes(x, sizes, 8)) return 1;
  if (ember_empty_strided(dim, sizes, NULL, dt, ember_device_type_cpu(), -1, &out)) return 1;
  if (ember_tensor_data_ptr(x, (void**)&px) || ember_tensor_data_ptr(y, (void**)&py) ||
      ember_tensor_data_ptr(out, (void**)&po))
    return 1;
  for (i = 0; i < n; ++i) po[i] = (float)(a * px[i] + py[i]);
  stack[0] = ember_slot_from_ptr(out); /* the new reference goes to the caller */
  return EMBER_OK;
}

static EmberStatus axpy_meta(EmberSlot* stack, int64_t num_args, int64_t num_outputs, void* data) {
  EmberTensor x = (EmberTensor)ember_slot_to_ptr(stack[0]);
  int64_t dim = 0, sizes[8];
  int32_t dt = 0;
  EmberTensor out = NULL;
  (void)num_args, (void)num_outputs, (void)data;
  if (ember_tensor_dim(x, &dim) || dim > 8 || ember_tensor_sizes(x, sizes, 8) ||
      ember_tensor_dtype(x, &dt))
    return 1;
  if (ember_empty_strided(dim, sizes, NULL, dt, ember_device_type_meta(), -1, &out)) return 1;
  stack[0] = ember_slot_from_ptr(out);
  return EMBER_OK;
}

/* axpy_backward(Tensor grad, Tensor x, Tensor y, float a) -> (Tensor, Tensor) = (a * g, g) */
static EmberStatus axpy_backward(EmberSlot* stack, int64_t num_args, int64_t num_outputs,
                                 void* data) {
  EmberTensor g = (EmberTensor)ember_slot_to_ptr(stack[0]);
  double a = ember_slot_to_double(stack[3]);
  EmberSlot call[3];
  EmberTensor scale = NULL;
  (void)num_args, (void)num_outputs, (void)data;
  /* slots are typed by the schema: mul(Tensor self, Tensor other) needs `a` as a 0-dim tensor */
  if (ember_empty_strided(0, NULL, NULL, ember_dtype_float32(), ember_device_type_cpu(), -1,
                          &scale))
    return 1;
  call[0] = ember_slot_from_ptr(scale);
  call[1] = ember_slot_from_double(a);
  if (ember_call_op("fill_", "", call, 2, 1)) return 1;
  ember_tensor_release((EmberTensor)ember_slot_to_ptr(call[0]));
  call[0] = ember_slot_from_ptr(g);
  call[1] = ember_slot_from_ptr(scale);
  if (ember_call_op("mul", "Tensor", call, 2, 1)) return 1; /* a * g: new reference */
  ember_tensor_release(scale);
  stack[0] = call[0];
  if (ember_tensor_retain(g)) return 1; /* g itself: a new reference too */
  stack[1] = ember_slot_from_ptr(g);
  return EMBER_OK;
}

static EmberStatus always_fails(EmberSlot* stack, int64_t num_args, int64_t num_outputs,
                                void* data) {
  (void)stack, (void)num_args, (void)num_outputs, (void)data;
  ember_set_error("always_fails: this kernel refuses on purpose");
  return EMBER_ERR_RUNTIME;
}

static int g_freed;
static void free_blob(void* data, void* context) {
  (void)data;
  g_freed = *(int*)context;
}

static void check_codes(void) {
  int32_t codes[12];
  int i, j, distinct = 1;
  int64_t isz = 0;
  codes[0] = ember_dtype_bool();
  codes[1] = ember_dtype_uint8();
  codes[2] = ember_dtype_int8();
  codes[3] = ember_dtype_int16();
  codes[4] = ember_dtype_int32();
  codes[5] = ember_dtype_int64();
  codes[6] = ember_dtype_float16();
  codes[7] = ember_dtype_bfloat16();
  codes[8] = ember_dtype_float32();
  codes[9] = ember_dtype_float64();
  codes[10] = ember_dtype_complex64();
  codes[11] = ember_dtype_complex128();
  for (i = 0; i < 12; ++i)
    for (j = i + 1; j < 12; ++j) distinct &= codes[i] != codes[j];
  CHECK(distinct, "dtype codes are distinct");
  CHECK(ember_dtype_itemsize(ember_dtype_float64(), &isz) == EMBER_OK && isz == 8,
        "dtype_itemsize(float64) == 8");
  CHECK(ember_dtype_itemsize(ember_dtype_bfloat16(), &isz) == EMBER_OK && isz == 2,
        "dtype_itemsize(bfloat16) == 2");
  CHECK_FAILS(ember_dtype_itemsize(9999, &isz), EMBER_ERR_VALUE, "dtype_itemsize(bad code)");
  CHECK_FAILS(ember_dtype_itemsize(ember_dtype_int8(), NULL), EMBER_ERR_NULL,
              "dtype_itemsize(null out)");
  CHECK(ember_device_type_cpu() != ember_device_type_meta() &&
            ember_device_type_cpu() != ember_device_type_cuda(),
        "device type codes are distinct");
  CHECK(ember_layout_strided() == ember_layout_strided(), "layout_strided");
}

static void check_tensors(void) {
  int64_t sizes[2] = {2, 3}, strides[2] = {1, 2}, v[4], n = 0;
  int32_t d = 0, type = 0, index = 0, contig = 7, layout = -1;
  void* p = NULL;
  EmberTensor t = NULL, m = NULL;
  EmberList l = NULL;

  CHECK(ember_empty_strided(2, sizes, strides, ember_dtype_float32(), ember_device_type_cpu(), -1,
                            &t) == EMBER_OK && t != NULL,
        "empty_strided (column-major 2x3)");
  CHECK(ember_tensor_dim(t, &n) == EMBER_OK && n == 2, "tensor_dim");
  CHECK(ember_tensor_sizes(t, v, 4) == EMBER_OK && v[0] == 2 && v[1] == 3, "tensor_sizes");
  CHECK(ember_tensor_strides(t, v, 4) == EMBER_OK && v[0] == 1 && v[1] == 2, "tensor_strides");
  CHECK(ember_tensor_numel(t, &n) == EMBER_OK && n == 6, "tensor_numel");
  CHECK(ember_tensor_dtype(t, &d) == EMBER_OK && d == ember_dtype_float32(), "tensor_dtype");
  CHECK(ember_tensor_device(t, &type, &index) == EMBER_OK && type == ember_device_type_cpu(),
        "tensor_device");
  CHECK(ember_tensor_layout(t, &layout) == EMBER_OK && layout == ember_layout_strided(),
        "tensor_layout");
  CHECK(ember_tensor_data_ptr(t, &p) == EMBER_OK && p != NULL, "tensor_data_ptr");
  CHECK(ember_tensor_storage_offset(t, &n) == EMBER_OK && n == 0, "tensor_storage_offset");
  CHECK(ember_tensor_is_contiguous(t, &contig) == EMBER_OK && contig == 0,
        "tensor_is_contiguous (column-major is not)");
  CHECK(ember_tensor_retain(t) == EMBER_OK && ember_tensor_release(t) == EMBER_OK,
        "tensor_retain / tensor_release");

  /* error paths: null handles, null out-pointers, a list where a tensor belongs, bad codes */
  CHECK_FAILS(ember_tensor_dim(NULL, &n), EMBER_ERR_NULL, "tensor_dim(null handle)");
  CHECK_FAILS(ember_tensor_sizes(NULL, v, 4), EMBER_ERR_NULL, "tensor_sizes(null handle)");
  CHECK_FAILS(ember_tensor_strides(NULL, v, 4), EMBER_ERR_NULL, "tensor_strides(null handle)");
  CHECK_FAILS(ember_tensor_numel(NULL, &n), EMBER_ERR_NULL, "tensor_numel(null handle)");
  CHECK_FAILS(ember_tensor_dtype(NULL, &d), EMBER_ERR_NULL, "tensor_dtype(null handle)");
  CHECK_FAILS(ember_tensor_device(NULL, &type, &index), EMBER_ERR_NULL,
              "tensor_device(null handle)");
  CHECK_FAILS(ember_tensor_layout(NULL, &layout), EMBER_ERR_NULL, "tensor_layout(null handle)");
  CHECK_FAILS(ember_tensor_data_ptr(NULL, &p), EMBER_ERR_NULL, "tensor_data_ptr(null handle)");
  CHECK_FAILS(ember_tensor_storage_offset(NULL, &n), EMBER_ERR_NULL,
              "tensor_storage_offset(null handle)");
  CHECK_FAILS(ember_tensor_is_contiguous(NULL, &contig), EMBER_ERR_NULL,
              "tensor_is_contiguous(null handle)");
  CHECK_FAILS(ember_tensor_retain(NULL), EMBER_ERR_NULL, "tensor_retain(null handle)");
  CHECK_FAILS(ember_tensor_release(NULL), EMBER_ERR_NULL, "tensor_release(null handle)");
  CHECK_FAILS(ember_tensor_dim(t, NULL), EMBER_ERR_NULL, "tensor_dim(null out)");
  CHECK_FAILS(ember_tensor_sizes(t, v, 1), EMBER_ERR_INDEX, "tensor_sizes(capacity < dim)");
  CHECK(ember_list_new(&l) == EMBER_OK, "list_new");
  CHECK_FAILS(ember_tensor_dim((EmberTensor)l, &n), EMBER_ERR_TYPE, "tensor_dim(a list handle)");
  CHECK_FAILS(ember_empty_strided(2, sizes, NULL, 12345, ember_device_type_cpu(), -1, &m),
              EMBER_ERR_VALUE, "empty_strided(wrong dtype code)");
  CHECK_FAILS(ember_empty_strided(2, sizes, NULL, ember_dtype_float32(), 77, -1, &m),
              EMBER_ERR_VALUE, "empty_strided(wrong device code)");
  CHECK_FAILS(ember_empty_strided(-1, sizes, NULL, ember_dtype_float32(),
                                  ember_device_type_cpu(), -1, &m),
              EMBER_ERR_VALUE, "empty_strided(negative ndim)");
  CHECK_FAILS(ember_empty_strided(2, NULL, NULL, ember_dtype_float32(), ember_device_type_cpu(),
                                  -1, &m),
              EMBER_ERR_NULL, "empty_strided(null sizes)");
  CHECK_FAILS(ember_empty_strided(2, sizes, NULL, ember_dtype_float32(), ember_device_type_cpu(),
                                  -1, NULL),
              EMBER_ERR_NULL, "empty_strided(null out)");
  CHECK(ember_empty_strided(2, sizes, NULL, ember_dtype_int64(), ember_device_type_meta(), -1,
                            &m) == EMBER_OK,
        "empty_strided on meta");
  CHECK(ember_tensor_device(m, &type, &index) == EMBER_OK && type == ember_device_type_meta(),
        "a meta tensor's device");
  CHECK(ember_tensor_is_contiguous(m, &contig) == EMBER_OK && contig == 1,
        "contiguous strides by default");
  ember_tensor_release(m);

  /* a 0-dim tensor: no sizes to write, so a null buffer of capacity 0 is fine (C++'s
     std::vector<int64_t>{}.data() is null) */
  CHECK(ember_empty_strided(0, NULL, NULL, ember_dtype_float32(), ember_device_type_cpu(), -1,
                            &m) == EMBER_OK,
        "empty_strided with 0 dims and null sizes");
  CHECK(ember_tensor_dim(m, &n) == EMBER_OK && n == 0, "a 0-dim tensor's dim");
  CHECK(ember_tensor_sizes(m, NULL, 0) == EMBER_OK, "tensor_sizes(0-dim, null out)");
  CHECK(ember_tensor_strides(m, NULL, 0) == EMBER_OK, "tensor_strides(0-dim, null out)");
  CHECK(ember_tensor_numel(m, &n) == EMBER_OK && n == 1, "a 0-dim tensor's numel");
  ember_tensor_release(m);
  ember_list_release(l);
  ember_tensor_release(t);
}

static void check_from_blob(void) {
  static float data[6] = {0, 1, 2, 3, 4, 5};
  static int context = 42;
  int64_t sizes[2] = {3, 2}, strides[2] = {1, 3}, off = -1;
  EmberTensor t = NULL;
  float* p = NULL;
  EmberSlot stack[2];
  g_freed = 0;
  CHECK(ember_from_blob(data, 2, sizes, strides, ember_dtype_float32(), ember_device_type_cpu(),
                        -1, free_blob, &context, &t) == EMBER_OK,
        "from_blob (a transposed 2x3 view of caller memory)");
  CHECK(ember_tensor_data_ptr(t, (void**)&p) == EMBER_OK && p == data, "from_blob shares memory");
  CHECK(ember_tensor_storage_offset(t, &off) == EMBER_OK && off == 0, "from_blob offset");
  /* sum through call_op sees the strided values: 0+1+...+5 = 15 */
  stack[0] = ember_slot_from_ptr(t);
  CHECK(ember_call_op("sum", "", stack, 1, 1) == EMBER_OK, "call_op(sum) on a from_blob tensor");
  if (stack[0] != 0) {
    float* sum = NULL;
    EmberTensor r = (EmberTensor)ember_slot_to_ptr(stack[0]);
    CHECK(ember_tensor_data_ptr(r, (void**)&sum) == EMBER_OK && sum[0] == 15.0f, "sum == 15");
    ember_tensor_release(r);
  }
  ember_tensor_release(t);
  CHECK(g_freed == 42, "from_blob's deleter ran when the last reference went");
  CHECK_FAILS(ember_from_blob(data, 2, sizes, NULL, 9999, ember_device_type_cpu(), -1, NULL,
                              NULL, &t),
              EMBER_ERR_VALUE, "from_blob(wrong dtype code)");
  CHECK_FAILS(ember_from_blob(data, 2, sizes, NULL, ember_dtype_float32(),
                              ember_device_type_meta(), -1, NULL, NULL, &t),
              EMBER_ERR_VALUE, "from_blob(non-CPU device)");
  CHECK_FAILS(ember_from_blob(NULL, 2, sizes, NULL, ember_dtype_float32(),
                              ember_device_type_cpu(), -1, NULL, NULL, &t),
              EMBER_ERR_NULL, "from_blob(null data)");
}

static void check_lists_and_strings(void) {
  EmberList l = NULL;
  EmberString s = NULL;
  EmberTensor t = NULL, back = NULL;
  int64_t sizes[1] = {4}, n = 0, iv = 0;
  double fv = 0;
  const char* text = NULL;
  CHECK(ember_list_new(&l) == EMBER_OK, "list_new");
  CHECK(ember_list_append_int(l, 7) == EMBER_OK, "list_append_int");
  CHECK(ember_list_append_float(l, 2.5) == EMBER_OK, "list_append_float");
  ember_empty_strided(1, sizes, NULL, ember_dtype_float64(), ember_device_type_cpu(), -1, &t);
  CHECK(ember_list_append_tensor(l, t) == EMBER_OK, "list_append_tensor");
  CHECK(ember_list_size(l, &n) == EMBER_OK && n == 3, "list_size");
  CHECK(ember_list_get_int(l, 0, &iv) == EMBER_OK && iv == 7, "list_get_int");
  CHECK(ember_list_get_float(l, 1, &fv) == EMBER_OK && fv == 2.5, "list_get_float");
  CHECK(ember_list_get_tensor(l, 2, &back) == EMBER_OK && back == t, "list_get_tensor");
  ember_tensor_release(back);
  CHECK_FAILS(ember_list_get_int(l, 3, &iv), EMBER_ERR_INDEX, "list_get_int(out of range)");
  CHECK_FAILS(ember_list_get_int(l, -1, &iv), EMBER_ERR_INDEX, "list_get_int(negative)");
  CHECK_FAILS(ember_list_get_tensor(l, 0, &back), EMBER_ERR_TYPE,
              "list_get_tensor(an int item)");
  CHECK_FAILS(ember_list_get_int(l, 2, &iv), EMBER_ERR_TYPE, "list_get_int(a tensor item)");
  CHECK_FAILS(ember_list_get_float(l, 2, &fv), EMBER_ERR_TYPE, "list_get_float(a tensor item)");
  CHECK_FAILS(ember_list_size(NULL, &n), EMBER_ERR_NULL, "list_size(null handle)");
  CHECK_FAILS(ember_list_size((EmberList)t, &n), EMBER_ERR_TYPE, "list_size(a tensor handle)");
  CHECK_FAILS(ember_list_append_tensor(l, NULL), EMBER_ERR_NULL, "list_append_tensor(null)");
  CHECK_FAILS(ember_list_append_int(NULL, 1), EMBER_ERR_NULL, "list_append_int(null list)");
  CHECK_FAILS(ember_list_append_float(NULL, 1), EMBER_ERR_NULL, "list_append_float(null list)");
  CHECK_FAILS(ember_list_release(NULL), EMBER_ERR_NULL, "list_release(null)");
  CHECK_FAILS(ember_list_new(NULL), EMBER_ERR_NULL, "list_new(null out)");
  CHECK(ember_list_release(l) == EMBER_OK, "list_release");
  CHECK(ember_string_new("héllo", &s) == EMBER_OK, "string_new");
  CHECK(ember_string_data(s, &text) == EMBER_OK && strcmp(text, "héllo") == 0, "string_data");
  CHECK_FAILS(ember_string_data(NULL, &text), EMBER_ERR_NULL, "string_data(null)");
  CHECK_FAILS(ember_string_data((EmberString)t, &text), EMBER_ERR_TYPE,
              "string_data(a tensor handle)");
  CHECK_FAILS(ember_string_new(NULL, &s), EMBER_ERR_NULL, "string_new(null text)");
  CHECK_FAILS(ember_string_release(NULL), EMBER_ERR_NULL, "string_release(null)");
  CHECK(ember_string_release(s) == EMBER_OK, "string_release");
  ember_tensor_release(t);
}

static void check_call_op(void) {
  int64_t sizes[1] = {3};
  EmberTensor x = NULL;
  EmberSlot stack[4];
  int64_t n = 0;
  EmberList shape = NULL;
  ember_empty_strided(1, sizes, NULL, ember_dtype_float32(), ember_device_type_cpu(), -1, &x);
  /* fill_(x, 2.0) then add(x, x, alpha=3) = 8 */
  stack[0] = ember_slot_from_ptr(x);
  stack[1] = ember_slot_from_double(2.0);
  CHECK(ember_call_op("fill_", "Scalar", stack, 2, 1) == EMBER_OK, "call_op(fill_, PyTorch overload name)");
  ember_tensor_release((EmberTensor)ember_slot_to_ptr(stack[0]));
  stack[0] = ember_slot_from_ptr(x);
  stack[1] = ember_slot_from_ptr(x);
  stack[2] = ember_slot_from_double(3.0);
  CHECK(ember_call_op("aten::add", "Tensor", stack, 3, 1) == EMBER_OK, "call_op(aten::add)");
  {
    EmberTensor r = (EmberTensor)ember_slot_to_ptr(stack[0]);
    float* p = NULL;
    CHECK(ember_tensor_data_ptr(r, (void**)&p) == EMBER_OK && p[0] == 8.0f && p[2] == 8.0f,
          "add's result");
    ember_tensor_release(r);
  }
  /* an int[] argument through a list: view(x, [3, 1]) */
  ember_list_new(&shape);
  ember_list_append_int(shape, 3);
  ember_list_append_int(shape, 1);
  stack[0] = ember_slot_from_ptr(x);
  stack[1] = ember_slot_from_ptr(shape);
  CHECK(ember_call_op("view", "", stack, 2, 1) == EMBER_OK, "call_op(view) with an int[] list");
  {
    EmberTensor r = (EmberTensor)ember_slot_to_ptr(stack[0]);
    CHECK(ember_tensor_dim(r, &n) == EMBER_OK && n == 2, "view's result has 2 dims");
    ember_tensor_release(r);
  }
  ember_list_release(shape);

  CHECK_FAILS(ember_call_op("no_such_op_anywhere", "", stack, 0, 0), EMBER_ERR_NOT_FOUND,
              "call_op(unknown op)");
  CHECK_FAILS(ember_call_op("add", "NoSuchOverload", stack, 0, 0), EMBER_ERR_NOT_FOUND,
              "call_op(unknown overload)");
  CHECK_FAILS(ember_call_op(NULL, "", stack, 0, 0), EMBER_ERR_NULL, "call_op(null name)");
  CHECK_FAILS(ember_call_op("neg", "", NULL, 1, 1), EMBER_ERR_NULL, "call_op(null stack)");
  stack[0] = 0;
  CHECK_FAILS(ember_call_op("neg", "", stack, 1, 1), EMBER_ERR_NULL, "call_op(null tensor arg)");
  stack[0] = ember_slot_from_ptr(x);
  CHECK_FAILS(ember_call_op("neg", "", stack, 5, 1), EMBER_ERR_VALUE, "call_op(too many args)");
  CHECK_FAILS(ember_call_op("neg", "", stack, 1, 0), EMBER_ERR_VALUE,
              "call_op(no room for the result)");
  ember_list_new(&shape);
  stack[0] = ember_slot_from_ptr(shape);
  CHECK_FAILS(ember_call_op("neg", "", stack, 1, 1), EMBER_ERR_TYPE, "call_op(a list as tensor)");
  ember_list_release(shape);
  /* the op itself raises (shapes do not broadcast): the Python message comes back */
  {
    int64_t s2[1] = {2};
    EmberTensor y = NULL;
    ember_empty_strided(1, s2, NULL, ember_dtype_float32(), ember_device_type_cpu(), -1, &y);
    stack[0] = ember_slot_from_ptr(x);
    stack[1] = ember_slot_from_ptr(y);
    CHECK_FAILS(ember_call_op("mul", "Tensor", stack, 2, 1), EMBER_ERR_RUNTIME,
                "call_op(mul of mismatched shapes)");
    CHECK(strstr(ember_last_error(), "RuntimeError") != NULL, "the message names the exception");
    ember_tensor_release(y);
  }
  ember_tensor_release(x);
}

static void check_library(void) {
  CHECK(ember_library_define("abi_c_test",
                             "axpy(Tensor x, Tensor y, float a=1.0) -> Tensor") == EMBER_OK,
        "library_define");
  CHECK(ember_library_impl("abi_c_test", "axpy", "cpu", axpy_cpu, &g_checks) == EMBER_OK,
        "library_impl(cpu)");
  CHECK(ember_library_impl("abi_c_test", "axpy", "meta", axpy_meta, NULL) == EMBER_OK,
        "library_impl(meta)");
  CHECK(ember_library_define("abi_c_test",
                             "axpy_backward(Tensor grad, Tensor x, Tensor y, float a) -> "
                             "(Tensor, Tensor)") == EMBER_OK,
        "library_define(backward)");
  CHECK(ember_library_impl("abi_c_test", "axpy_backward", "default", axpy_backward, NULL) ==
            EMBER_OK,
        "library_impl(default)");
  CHECK(ember_library_register_autograd("abi_c_test", "axpy", "axpy_backward") == EMBER_OK,
        "library_register_autograd");
  CHECK(ember_library_define("abi_c_test", "fails(Tensor x) -> Tensor") == EMBER_OK &&
            ember_library_impl("abi_c_test", "fails", "cpu", always_fails, NULL) == EMBER_OK,
        "a failing kernel registers");
  CHECK_FAILS(ember_library_define("abi_c_test", "axpy(Tensor x) -> Tensor"), EMBER_ERR_RUNTIME,
              "library_define(twice)");
  CHECK_FAILS(ember_library_define("abi_c_test", "not a schema"), EMBER_ERR_VALUE,
              "library_define(bad schema)");
  CHECK_FAILS(ember_library_define(NULL, "x(Tensor a) -> Tensor"), EMBER_ERR_NULL,
              "library_define(null namespace)");
  CHECK_FAILS(ember_library_impl("abi_c_test", "nope", "cpu", axpy_cpu, NULL),
              EMBER_ERR_RUNTIME, "library_impl(undefined op)");
  CHECK_FAILS(ember_library_impl("abi_c_test", "axpy", "cpu", NULL, NULL), EMBER_ERR_NULL,
              "library_impl(null kernel)");
  CHECK_FAILS(ember_library_register_autograd("abi_c_test", "axpy", "missing_backward"),
              EMBER_ERR_RUNTIME, "library_register_autograd(unknown backward)");

  /* the registered op, called from C through the dispatcher */
  {
    int64_t sizes[1] = {2};
    EmberTensor x = NULL, y = NULL;
    EmberSlot stack[3];
    float *px, *py, *pr;
    ember_empty_strided(1, sizes, NULL, ember_dtype_float32(), ember_device_type_cpu(), -1, &x);
    ember_empty_strided(1, sizes, NULL, ember_dtype_float32(), ember_device_type_cpu(), -1, &y);
    ember_tensor_data_ptr(x, (void**)&px);
    ember_tensor_data_ptr(y, (void**)&py);
    px[0] = 1, px[1] = 2, py[0] = 10, py[1] = 20;
    stack[0] = ember_slot_from_ptr(x);
    stack[1] = ember_slot_from_ptr(y);
    stack[2] = ember_slot_from_double(3.0);
    CHECK(ember_call_op("abi_c_test::axpy", "", stack, 3, 1) == EMBER_OK,
          "call_op(abi_c_test::axpy)");
    ember_tensor_data_ptr((EmberTensor)ember_slot_to_ptr(stack[0]), (void**)&pr);
    CHECK(pr[0] == 13 && pr[1] == 26, "axpy's result");
    ember_tensor_release((EmberTensor)ember_slot_to_ptr(stack[0]));
    stack[0] = ember_slot_from_ptr(x);
    CHECK_FAILS(ember_call_op("abi_c_test::fails", "", stack, 1, 1), EMBER_ERR_RUNTIME,
                "a kernel's failure comes back as a status");
    CHECK(strstr(ember_last_error(), "refuses on purpose") != NULL,
          "with the kernel's own message");
    ember_tensor_release(x);
    ember_tensor_release(y);
  }
}

int ember_abi_c_check(const EmberAbiTable* table, char* report, size_t n) {
  char msg[256];
  g_report = report;
  g_cap = n;
  g_report[0] = '\0';
  g_checks = g_failures = 0;
  if (ember_abi_use(table, msg, sizeof msg) != 0) {
    note("ember_abi_use", msg);
    return 1;
  }
  ember_set_error("x");
  ember_clear_error();
  CHECK(ember_last_error()[0] == '\0', "clear_error empties last_error");
  ember_set_error("set by C");
  CHECK(strcmp(ember_last_error(), "set by C") == 0, "set_error / last_error");
  check_codes();
  check_tensors();
  check_from_blob();
  check_lists_and_strings();
  check_call_op();
  check_library();
  return g_failures;
}

void ember_abi_c_counts(int* checks, int* failures) {
  *checks = g_checks;
  *failures = g_failures;
}

/* The version check alone, on a fake table (no core needed). */
int ember_abi_c_version_check(uint32_t major, uint32_t minor, uint32_t size, char* msg,
                              size_t n) {
  EmberAbiTable t;
  memset(&t, 0, sizeof t);
  t.major = major;
  t.minor = minor;
  t.size = size;
  return ember_abi_check(&t, msg, n);
}
