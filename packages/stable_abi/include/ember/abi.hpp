// Header-only C++ layer over ember/abi.h (placeholder: the stable-ABI issue adds RAII tensors and
// op registration macros).
#pragma once

#include "ember/abi.h"

namespace ember::abi {

inline constexpr int kVersionMajor = EMBER_ABI_VERSION_MAJOR;
inline constexpr int kVersionMinor = EMBER_ABI_VERSION_MINOR;

}  // namespace ember::abi
