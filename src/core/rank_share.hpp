#pragma once
// One rank's share of a sweep under `--mpi` (issue 32): `drift` measures the lengths, `audit` the
// bug classes, whose index modulo the rank count is the rank; every rank then receives every
// rank's measurements and puts them back in the order one process would have made them, so the
// report is the single-process report. The exchange is a function, so probes know no MPI: the CLI
// (src/cli/mpi_session.hpp) supplies it. Byte layout of what is exchanged: src/core/wire.hpp.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace numprobe {

struct rank_share {
  int rank = 0;
  int size = 1;
  // Collective: runs `produce` (this rank's share, as bytes) and returns every rank's bytes in
  // rank order, on every rank. When `produce` throws on any rank, every rank throws (the error
  // names the rank), so no rank waits forever for another.
  std::function<std::vector<std::string>(const std::function<std::string()>&)> exchange;

  [[nodiscard]] bool split() const { return size > 1 && static_cast<bool>(exchange); }
  // Whether item `i` of a sweep is this rank's to measure (round robin: lengths grow along a
  // sweep, so each rank gets short and long ones).
  [[nodiscard]] bool mine(std::size_t i) const {
    return !split() || static_cast<int>(i % static_cast<std::size_t>(size)) == rank;
  }
};

}  // namespace numprobe
