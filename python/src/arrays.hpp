#pragma once
// NumPy arrays across the binding: inputs arrive as C-contiguous float64 (the Python side
// converts anything with __array__ or __dlpack__ first), outputs leave as NumPy arrays that own
// a moved std::vector, so nothing is copied on the way out.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "numprobe/base/error.hpp"

namespace numprobe::python {

namespace nb = nanobind;

using in_array = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;

[[nodiscard]] inline std::span<const double> view(const in_array& a) {
  return {a.data(), a.size()};
}
[[nodiscard]] inline std::vector<double> copy(const in_array& a) {
  return {a.data(), a.data() + a.size()};
}

template <class T>
[[nodiscard]] nb::ndarray<nb::numpy, T> to_numpy(std::vector<T>&& v, std::vector<std::size_t> shape) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner);
}

[[nodiscard]] inline std::size_t u(std::int64_t v) { return static_cast<std::size_t>(v); }

// The modules' parts, each in its own file.
void bind_reference(nb::module_& m);
void bind_quant(nb::module_& m);
void bind_attention(nb::module_& m);
void bind_kl(nb::module_& m);
void bind_probes(nb::module_& m);

}  // namespace numprobe::python
