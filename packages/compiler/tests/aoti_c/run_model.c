/* Runs an AOT Inductor package's library from C: no Python code of its own, only ember's
 * stable C ABI (ember/abi.h) and the package's entry points. ember-core's ABI table lives in
 * ember._C, so the program embeds the interpreter that holds it (Py_Initialize, then
 * ember_abi_import() fetches and checks the table), as any C host of ember does.
 *
 *   run_model PACKAGE_DIR D0 D1 ...   (the extracted package's model/ folder, the input's sizes)
 *
 * The one float32 input holds ((i * 37) % 101) / 50.0 - 1.0 at flat index i. Prints each output
 * as "output K: sizes" then one value a line (%.9g); on a failing call, "error: MESSAGE" and 1.
 */
#include <Python.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "ember/abi.h"

typedef EmberStatus (*create_fn)(const EmberAbiTable*, const char*, void**, char*, size_t);
typedef EmberStatus (*run_fn)(void*, const EmberTensor*, int64_t, EmberTensor*, int64_t);
typedef void (*destroy_fn)(void*);
typedef int64_t (*count_fn)(void);

static int print_tensor(int k, EmberTensor t) {
  int64_t dim = 0, n = 0, sizes[16], i;
  int32_t dt = 0;
  EmberTensor c = NULL;
  float* p = NULL;
  EmberSlot stack[1];
  if (ember_tensor_dim(t, &dim) || dim > 16 || ember_tensor_sizes(t, sizes, 16) ||
      ember_tensor_numel(t, &n) || ember_tensor_dtype(t, &dt))
    return 1;
  if (dt != ember_dtype_float32()) {
    fprintf(stderr, "output %d is not float32\n", k);
    return 1;
  }
  stack[0] = ember_slot_from_ptr(t); /* a contiguous copy (outputs may be views) */
  if (ember_call_op("contiguous", "", stack, 1, 1)) return 1;
  c = (EmberTensor)ember_slot_to_ptr(stack[0]);
  if (ember_tensor_data_ptr(c, (void**)&p)) return 1;
  printf("output %d:", k);
  for (i = 0; i < dim; ++i) printf(" %lld", (long long)sizes[i]);
  printf("\n");
  for (i = 0; i < n; ++i) printf("%.9g\n", (double)p[i]);
  ember_tensor_release(c);
  return 0;
}

int main(int argc, char** argv) {
  char path[4096], err[1024];
  int64_t sizes[16], ndim = argc - 2, n = 1, i, num_out;
  void *lib, *model = NULL;
  EmberTensor x = NULL, outs[16];
  float* px = NULL;
  create_fn create;
  run_fn run;
  destroy_fn destroy;
  int rc = 0, k;
  if (argc < 2 || ndim > 16) {
    fprintf(stderr, "usage: run_model PACKAGE_DIR D0 D1 ...\n");
    return 2;
  }
  for (i = 0; i < ndim; ++i) n *= (sizes[i] = atoll(argv[i + 2]));
  Py_Initialize();
  if (ember_abi_import() != 0) {
    PyErr_Print();
    return 1;
  }
  snprintf(path, sizeof path, "%s/data/aotinductor/model.so", argv[1]);
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  create = (create_fn)dlsym(lib, "ember_aoti_create");
  run = (run_fn)dlsym(lib, "ember_aoti_run");
  destroy = (destroy_fn)dlsym(lib, "ember_aoti_destroy");
  num_out = ((count_fn)dlsym(lib, "ember_aoti_num_outputs"))();
  if (num_out > 16 || ((count_fn)dlsym(lib, "ember_aoti_num_inputs"))() != 1) {
    fprintf(stderr, "run_model takes models of one input and at most 16 outputs\n");
    return 2;
  }
  snprintf(path, sizeof path, "%s/data/weights/weights.bin", argv[1]);
  if (create(ember_abi_table_, path, &model, err, sizeof err) != EMBER_OK) {
    printf("error: %s\n", err);
    return 1;
  }
  if (ember_empty_strided(ndim, sizes, NULL, ember_dtype_float32(), ember_device_type_cpu(), -1,
                          &x) ||
      ember_tensor_data_ptr(x, (void**)&px)) {
    printf("error: %s\n", ember_last_error());
    return 1;
  }
  for (i = 0; i < n; ++i) px[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  if (run(model, &x, 1, outs, num_out) != EMBER_OK) {
    printf("error: %s\n", ember_last_error());
    rc = 1;
  } else {
    for (k = 0; k < num_out && rc == 0; ++k) {
      rc = print_tensor(k, outs[k]);
      ember_tensor_release(outs[k]);
    }
  }
  ember_tensor_release(x);
  destroy(model);
  fflush(stdout);
  Py_Finalize();
  return rc;
}
