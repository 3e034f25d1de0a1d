// core's implementation of the stable C ABI (abi_table.cpp): adds the capsule "_ABI_TABLE",
// abi_version() and the boxed-kernel trampoline to ember._C.
#pragma once

#include <pybind11/pybind11.h>

void init_abi(pybind11::module_& m);
