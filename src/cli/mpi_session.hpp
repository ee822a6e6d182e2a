#pragma once
// `--mpi` (issue 32 C): one process per rank, one rank per GPU. Each rank runs its share and
// sends its JSON document to rank 0, which joins them into the report a single process writes.
// Built with MPI only where configure found it (cmake/numprobe_mpi.cmake); otherwise making a
// session is an input error (exit 2) saying so.
#include <functional>
#include <string>
#include <vector>

#include "src/core/rank_share.hpp"

namespace numprobe::cli {

class mpi_session {
 public:
  // MPI_Init (once per process); throws numprobe::error (exit 2) in a build without MPI.
  mpi_session();
  ~mpi_session();
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;

  [[nodiscard]] int rank() const { return m_rank; }
  [[nodiscard]] int size() const { return m_size; }
  // The rank's index among the ranks of its node (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK; 0 when
  // the launcher does not say): the GPU ordinal a rank uses.
  [[nodiscard]] int local_rank() const { return m_local_rank; }
  // Every rank's text, in rank order, on rank 0; an empty vector on the others. Collective: every
  // rank must call it, so a rank that fails sends a document saying so rather than nothing.
  [[nodiscard]] std::vector<std::string> gather(const std::string& text) const;
  // Runs `produce` on every rank and gathers what it returns on rank 0 (rank order). A rank whose
  // `produce` throws numprobe::error still takes part (so no rank waits for it forever), and the
  // error comes out after the gather: on its own rank, and on rank 0 naming the rank, as
  // "rank R: <error>" with the error's exit code. An empty vector on the other ranks.
  [[nodiscard]] std::vector<std::string> run_and_gather(const std::function<std::string()>& produce) const;
  // Every rank's text, in rank order, on every rank (MPI_Allgatherv). Collective.
  [[nodiscard]] std::vector<std::string> allgather(const std::string& text) const;
  // Runs `produce` on every rank and returns every rank's bytes on every rank (rank order): the
  // exchange of a rank_share (src/core/rank_share.hpp). When `produce` throws numprobe::error on
  // some rank, every rank throws after the exchange: the first failed rank's error, as "rank R:
  // <error>" with its exit code.
  [[nodiscard]] std::vector<std::string> exchange(const std::function<std::string()>& produce) const;
  // The end of a command under mpirun: rank 0 runs `root_work` (the merge and the reports) and
  // every rank returns its exit code. When `root_work` throws, the error's code still reaches the
  // other ranks (waiting for it) before rank 0 rethrows, so no rank waits forever.
  [[nodiscard]] int finish(const std::function<int()>& root_work) const;
  // This session as a sweep's share (drift, audit): this rank's index and count, and exchange().
  [[nodiscard]] rank_share share() const {
    return {m_rank, m_size, [this](const std::function<std::string()>& produce) { return exchange(produce); }};
  }
  // Rank 0's value on every rank (the exit status, so mpirun's status is the run's).
  [[nodiscard]] int broadcast(int value) const;

 private:
  int m_rank = 0, m_size = 1, m_local_rank = 0;
};

// Whether this build has MPI.
[[nodiscard]] bool mpi_built();

}  // namespace numprobe::cli
