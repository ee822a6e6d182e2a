#pragma once
// Host buffers in the plugin ABI's terms (numprobe/kernel_abi.h): dtype names, masks, dense
// tensor descriptors, and one host buffer of an ABI dtype. The 16-bit dtypes go through the one
// host encoder (host_dtype.hpp), as the built-in GPU kernels' inputs do.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/kernel_abi.h"

namespace numprobe::plugin {

[[nodiscard]] std::string dtype_name(int d);
// "f32,bf16" for a dtype bit mask; "none" for 0.
[[nodiscard]] std::string dtype_list(std::uint32_t mask);
// The ABI mask of a case's mask (a numprobe_mask value); -1 for masks the ABI has no value for
// (ranges). An int: -1 is no enumerator, and casting it to numprobe_mask would be undefined.
[[nodiscard]] int abi_mask(mask_kind m);
// A row-major tensor descriptor of `data`.
[[nodiscard]] numprobe_tensor dense(void* data, int dtype, std::initializer_list<std::int64_t> shape);
[[nodiscard]] std::size_t dtype_bytes(int d);

// One host buffer of an ABI dtype (f64, f32, bf16, f16): filled from doubles exactly
// representable in it, or poisoned (NaN) for an output; read back as doubles.
class host_tensor {
 public:
  // Element by element, on all cores for long-context cases (each element is its own bytes).
  host_tensor(int dtype, std::span<const double> x);
  host_tensor(int dtype, std::size_t n);
  [[nodiscard]] void* data() { return m_bytes.data(); }
  [[nodiscard]] std::size_t bytes() const { return m_bytes.size(); }
  [[nodiscard]] double at(std::size_t i) const;

 private:
  template <class U>
  U load(std::size_t i) const {
    U u;
    std::memcpy(&u, m_bytes.data() + i * sizeof(U), sizeof(U));
    return u;
  }
  template <class U>
  void store(std::size_t i, U u) {
    std::memcpy(m_bytes.data() + i * sizeof(U), &u, sizeof(U));
  }
  void set(std::size_t i, double x);
  int m_dtype;
  std::vector<unsigned char> m_bytes;
};

}  // namespace numprobe::plugin
