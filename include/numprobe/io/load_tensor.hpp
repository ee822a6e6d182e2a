#pragma once
// One tensor named on a command line: "PATH[:TENSOR][@DTYPE]".
//   model.npy                          the array in a .npy file
//   w.safetensors:layers.0.wq.weight   a tensor in a .safetensors file or an index .json
//   w.safetensors                      allowed when the file holds exactly one tensor
//   codes.npy@e4m3fn                   reads the bytes as another dtype of the same width
//                                      (needed for ml_dtypes 8-bit arrays, stored as '<V1')
#include <string_view>

#include "numprobe/io/tensor_view.hpp"

namespace numprobe::io {

// Throws numprobe::error (exit 2) naming the path and the tensor on any problem.
[[nodiscard]] tensor_view load_tensor(std::string_view spec);

}  // namespace numprobe::io
