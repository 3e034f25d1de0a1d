"""The fixed C++ of an AOT Inductor library (aoti_codegen fills in the kernels, constants and
the body of ember_aoti_run): a scope releasing handles, input checks naming the input, views
through `as_strided`, extern results copied into the layout the kernels expect, and the
weights file read into tensors at create time. Uses ember/abi.h only (target ABI 1.1).
"""

RUNTIME = r"""
#define EMBER_TARGET_VERSION 1001
#include "ember/abi.h"
#include <cstdio>
#include <string>
#include <vector>

namespace {

// Handles made during one run: released when the run returns (outputs are retained first).
struct Scope {
  std::vector<EmberTensor> tensors;
  std::vector<EmberList> lists;
  EmberTensor own(EmberTensor t) { if (t) tensors.push_back(t); return t; }
  void own_list(EmberList l) { lists.push_back(l); }
  ~Scope() {
    for (EmberTensor t : tensors) ember_tensor_release(t);
    for (EmberList l : lists) ember_list_release(l);
  }
};

#define EMBER_AOTI_TRY(call)                 \
  do {                                       \
    EmberStatus s_ = (call);                 \
    if (s_ != EMBER_OK) return s_;           \
  } while (0)

EmberStatus fail(EmberStatus s, const std::string& msg) {
  ember_set_error(msg.c_str());
  return s;
}

std::string dims(const int64_t* d, int64_t n) {
  std::string s = "[";
  for (int64_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

int32_t dtype_by_name(const std::string& n) {
  if (n == "bool") return ember_dtype_bool();
  if (n == "uint8") return ember_dtype_uint8();
  if (n == "int8") return ember_dtype_int8();
  if (n == "int16") return ember_dtype_int16();
  if (n == "int32") return ember_dtype_int32();
  if (n == "int64") return ember_dtype_int64();
  if (n == "float16") return ember_dtype_float16();
  if (n == "bfloat16") return ember_dtype_bfloat16();
  if (n == "float32") return ember_dtype_float32();
  if (n == "float64") return ember_dtype_float64();
  if (n == "complex64") return ember_dtype_complex64();
  if (n == "complex128") return ember_dtype_complex128();
  return -1;
}

// A view (new reference, owned by the scope unless it is an output) of base.
EmberStatus view(Scope& S, EmberTensor base, int64_t ndim, const int64_t* shape,
                 const int64_t* stride, int64_t offset, EmberTensor* out) {
  int64_t base_off = 0;
  EMBER_AOTI_TRY(ember_tensor_storage_offset(base, &base_off));
  EmberList sz = nullptr, st = nullptr;
  EMBER_AOTI_TRY(ember_list_new(&sz));
  S.own_list(sz);
  EMBER_AOTI_TRY(ember_list_new(&st));
  S.own_list(st);
  for (int64_t i = 0; i < ndim; ++i) {
    EMBER_AOTI_TRY(ember_list_append_int(sz, shape[i]));
    EMBER_AOTI_TRY(ember_list_append_int(st, stride[i]));
  }
  EmberSlot off = (EmberSlot)(base_off + offset);
  EmberSlot stack[4] = {ember_slot_from_ptr(base), ember_slot_from_ptr(sz),
                        ember_slot_from_ptr(st), ember_slot_from_ptr(&off)};
  EMBER_AOTI_TRY(ember_call_op("as_strided", "", stack, 4, 1));
  *out = (EmberTensor)ember_slot_to_ptr(stack[0]);
  S.own(*out);
  return EMBER_OK;
}

EmberStatus alloc(Scope& S, int64_t n, int32_t dtype, EmberTensor* t, void** p) {
  EMBER_AOTI_TRY(ember_empty_strided(1, &n, nullptr, dtype, ember_device_type_cpu(), -1, t));
  S.own(*t);
  return ember_tensor_data_ptr(*t, p);
}

// A user input: its dtype and shape as exported; other strides become a contiguous copy.
EmberStatus check_input(Scope& S, EmberTensor t, int64_t k, const char* name, int32_t dtype,
                        const char* dtype_name, int64_t ndim, const int64_t* shape,
                        const int64_t* stride, EmberTensor* out) {
  std::string who = std::string("ember_aoti_run: input ") + std::to_string(k) + " ('" + name + "')";
  if (t == nullptr) return fail(EMBER_ERR_NULL, who + " is a null tensor");
  int32_t dt = 0, dev = 0, idx = 0;
  int64_t nd = 0, sizes[16], strides[16];
  EMBER_AOTI_TRY(ember_tensor_dtype(t, &dt));
  EMBER_AOTI_TRY(ember_tensor_device(t, &dev, &idx));
  EMBER_AOTI_TRY(ember_tensor_dim(t, &nd));
  if (dev != ember_device_type_cpu())
    return fail(EMBER_ERR_VALUE, who + " is not a CPU tensor (this package runs on the CPU)");
  if (dt != dtype)
    return fail(EMBER_ERR_TYPE, who + ": expected dtype " + dtype_name + ", got another dtype");
  if (nd > 16) return fail(EMBER_ERR_VALUE, who + ": too many dimensions");
  EMBER_AOTI_TRY(ember_tensor_sizes(t, sizes, 16));
  EMBER_AOTI_TRY(ember_tensor_strides(t, strides, 16));
  bool same = nd == ndim, same_strides = true;
  for (int64_t i = 0; same && i < ndim; ++i) {
    same = sizes[i] == shape[i];
    if (shape[i] > 1 && strides[i] != stride[i]) same_strides = false;
  }
  if (!same)
    return fail(EMBER_ERR_VALUE, who + ": expected shape " + dims(shape, ndim) + ", got " +
                                     dims(sizes, nd) + " (sizes are fixed when exported)");
  *out = t;
  if (same_strides) return EMBER_OK;
  EmberTensor dst = nullptr;
  EMBER_AOTI_TRY(ember_empty_strided(ndim, shape, stride, dtype, ember_device_type_cpu(), -1,
                                     &dst));
  S.own(dst);
  EmberSlot stack[2] = {ember_slot_from_ptr(dst), ember_slot_from_ptr(t)};
  EMBER_AOTI_TRY(ember_call_op("copy_", "", stack, 2, 1));
  S.own((EmberTensor)ember_slot_to_ptr(stack[0]));
  *out = dst;
  return EMBER_OK;
}

// An extern result in the layout the kernels were generated for (copied when it differs).
EmberStatus relayout(Scope& S, int64_t ndim, const int64_t* shape, const int64_t* stride,
                     EmberTensor* t) {
  int64_t nd = 0, strides[16];
  EMBER_AOTI_TRY(ember_tensor_dim(*t, &nd));
  if (nd != ndim || nd > 16) return fail(EMBER_ERR_RUNTIME, "ember_aoti_run: an extern op "
                                                            "returned another rank");
  EMBER_AOTI_TRY(ember_tensor_strides(*t, strides, 16));
  bool same = true;
  for (int64_t i = 0; i < ndim; ++i)
    if (shape[i] > 1 && strides[i] != stride[i]) same = false;
  if (same) return EMBER_OK;
  int32_t dt = 0;
  EMBER_AOTI_TRY(ember_tensor_dtype(*t, &dt));
  EmberTensor dst = nullptr;
  EMBER_AOTI_TRY(ember_empty_strided(ndim, shape, stride, dt, ember_device_type_cpu(), -1, &dst));
  S.own(dst);
  EmberSlot stack[2] = {ember_slot_from_ptr(dst), ember_slot_from_ptr(*t)};
  EMBER_AOTI_TRY(ember_call_op("copy_", "", stack, 2, 1));
  S.own((EmberTensor)ember_slot_to_ptr(stack[0]));
  *t = dst;
  return EMBER_OK;
}

// OpenMP threads for a kernel: up to this machine's, one per grain of work (at least one).
int threads(int64_t grains) {
  int64_t n = omp_get_max_threads();
  return (int)(grains < 1 ? 1 : (grains < n ? grains : n));
}

struct ConstSpec {
  int64_t offset, nbytes, ndim, shape[8];
  const char* dtype;
};

struct Model {
  std::vector<EmberTensor> consts;
};

}  // namespace
"""

ENTRIES = r"""
extern "C" {

__attribute__((visibility("default"))) const char* ember_aoti_metadata(void) { return METADATA; }
__attribute__((visibility("default"))) int64_t ember_aoti_num_inputs(void) { return N_IN; }
__attribute__((visibility("default"))) int64_t ember_aoti_num_outputs(void) { return N_OUT; }

__attribute__((visibility("default")))
EmberStatus ember_aoti_create(const EmberAbiTable* table, const char* weights_path, void** model,
                              char* error, size_t error_size) {
  auto say = [&](const std::string& m) {
    if (error && error_size) {
      std::snprintf(error, error_size, "%s", m.c_str());
    }
  };
  if (model == nullptr) { say("ember_aoti_create: null model pointer"); return EMBER_ERR_NULL; }
  *model = nullptr;
  if (ember_abi_use(table, error, error_size) != 0) return EMBER_ERR_VALUE;
  Model* m = new Model();
  FILE* f = N_CONST ? std::fopen(weights_path ? weights_path : "", "rb") : nullptr;
  if (N_CONST && f == nullptr) {
    say(std::string("ember_aoti_create: cannot open the weights file '") +
        (weights_path ? weights_path : "(null)") + "'");
    delete m;
    return EMBER_ERR_VALUE;
  }
  EmberStatus status = EMBER_OK;
  for (int64_t i = 0; i < N_CONST && status == EMBER_OK; ++i) {
    const ConstSpec& c = CONSTS[i];
    EmberTensor t = nullptr;
    void* p = nullptr;
    status = ember_empty_strided(c.ndim, c.shape, nullptr, dtype_by_name(c.dtype),
                                 ember_device_type_cpu(), -1, &t);
    if (status == EMBER_OK) {
      m->consts.push_back(t);
      status = ember_tensor_data_ptr(t, &p);
    }
    if (status == EMBER_OK && c.nbytes &&
        (std::fseek(f, (long)c.offset, SEEK_SET) != 0 ||
         std::fread(p, 1, (size_t)c.nbytes, f) != (size_t)c.nbytes)) {
      say("ember_aoti_create: the weights file is shorter than the package says");
      status = EMBER_ERR_VALUE;
    } else if (status != EMBER_OK) {
      say(ember_last_error());
    }
  }
  if (f) std::fclose(f);
  if (status != EMBER_OK) {
    for (EmberTensor t : m->consts) ember_tensor_release(t);
    delete m;
    return status;
  }
  *model = m;
  return EMBER_OK;
}

__attribute__((visibility("default"))) void ember_aoti_destroy(void* model) {
  Model* m = static_cast<Model*>(model);
  if (m == nullptr) return;
  for (EmberTensor t : m->consts) ember_tensor_release(t);
  delete m;
}

static EmberStatus run_body(Model* m, const EmberTensor* inputs, EmberTensor* outs) {
  Scope S;
/*BODY*/
  for (int64_t k = 0; k < N_OUT; ++k) {  // the scope releases its references: keep outputs'
    EMBER_AOTI_TRY(ember_tensor_retain(outs[k]));
  }
  return EMBER_OK;
}

__attribute__((visibility("default")))
EmberStatus ember_aoti_run(void* model, const EmberTensor* inputs, int64_t num_inputs,
                           EmberTensor* outputs, int64_t num_outputs) {
  if (model == nullptr) return fail(EMBER_ERR_NULL, "ember_aoti_run: null model");
  if (num_inputs != N_IN)
    return fail(EMBER_ERR_VALUE, "ember_aoti_run: the model takes " + std::to_string(N_IN) +
                                     " inputs, got " + std::to_string(num_inputs));
  if (num_outputs != N_OUT || (N_OUT && outputs == nullptr))
    return fail(EMBER_ERR_VALUE, "ember_aoti_run: the model returns " + std::to_string(N_OUT) +
                                     " outputs, room given for " + std::to_string(num_outputs));
  if (N_IN && inputs == nullptr) return fail(EMBER_ERR_NULL, "ember_aoti_run: null inputs");
  std::vector<EmberTensor> outs((size_t)N_OUT + 1, nullptr);
  EmberStatus s = run_body(static_cast<Model*>(model), inputs, outs.data());
  if (s != EMBER_OK) return s;
  for (int64_t k = 0; k < N_OUT; ++k) outputs[k] = outs[(size_t)k];
  return EMBER_OK;
}

}  // extern "C"
"""
