// The double instantiation of the templated reference; tests instantiate cpp_bin_float_50.
#include "reference/attention_impl.hpp"

namespace numprobe::reference {

template attention_output attention_generic<double>(const attention_case&, std::span<const double>,
                                                    std::span<const std::int64_t>,
                                                    std::span<const double>,
                                                    std::span<const double>);

}  // namespace numprobe::reference
