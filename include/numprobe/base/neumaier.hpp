// Neumaier's compensated sum in double (Neumaier 1974): the error is bounded by about
// 2u * sum |x_i| whatever the length, so a 256K-entry row or a 128K-long dot product sums as
// accurately as a short one. One definition for the metrics and the probes.
#pragma once

#include <cmath>

namespace numprobe {

struct neumaier {
  double s = 0.0, c = 0.0;  // the running sum and its compensation
  void add(double x) {
    const double t = s + x;
    c += std::fabs(s) >= std::fabs(x) ? (s - t) + x : (x - t) + s;
    s = t;
  }
  [[nodiscard]] double value() const { return s + c; }
};

}  // namespace numprobe
