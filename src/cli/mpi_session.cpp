#include "src/cli/mpi_session.hpp"

#include <cstdlib>
#include <fmt/format.h>
#include <optional>

#include "numprobe/base/error.hpp"

#if defined(NUMPROBE_HAVE_MPI)
#include <mpi.h>
#endif
#include <nlohmann/json.hpp>

namespace numprobe::cli {

int mpi_session::finish(const std::function<int()>& root_work) const {
  if (m_rank != 0) return broadcast(0);
  int code = 0;
  try {
    code = root_work();
  } catch (const error& e) {
    (void)broadcast(static_cast<int>(e.code()));
    throw;
  } catch (...) {
    (void)broadcast(3);
    throw;
  }
  return broadcast(code);
}

std::vector<std::string> mpi_session::run_and_gather(const std::function<std::string()>& produce) const {
  std::string mine;
  std::optional<error> failed;
  try {
    mine = produce();
  } catch (const error& e) {
    failed = e;
    // A document no rank writes otherwise: its rank's error, for rank 0 to name.
    mine = nlohmann::json{{"numprobe_rank_error", e.what()}, {"code", static_cast<int>(e.code())}}.dump();
  }
  auto all = gather(mine);
  // Rank 0 finds the first failed rank and tells every rank, so that none goes on to a later
  // collective call that rank 0, leaving with the error, would never make.
  std::optional<error> first;
  for (std::size_t r = 0; r < all.size() && !first; ++r) {
    const auto j = nlohmann::json::parse(all[r], nullptr, false);
    if (j.is_object() && j.contains("numprobe_rank_error"))
      first.emplace(static_cast<exit_code>(j.value("code", 3)), fmt::format("rank {}", r),
                    j.value("numprobe_rank_error", std::string()));
  }
  const int code = broadcast(first ? static_cast<int>(first->code()) : 0);
  if (m_rank == 0 && first) throw *first;
  if (failed) throw *failed;
  if (code != 0) throw error(static_cast<exit_code>(code), "--mpi", "stopped: another rank failed (rank 0 names it)");
  return all;
}

std::vector<std::string> mpi_session::exchange(const std::function<std::string()>& produce) const {
  // Each rank's message: 'D' and its bytes, or 'E', the exit code and the error's text.
  std::string mine;
  try {
    mine = "D" + produce();
  } catch (const error& e) {
    mine = fmt::format("E{}{}", static_cast<char>('0' + static_cast<int>(e.code())), e.what());
  }
  auto all = allgather(mine);
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty() || (all[r][0] != 'D' && all[r][0] != 'E'))
      throw_backend_error("--mpi", fmt::format("rank {} sent no result", r));
    if (all[r][0] == 'E' && all[r].size() >= 2)
      throw error(static_cast<exit_code>(all[r][1] - '0'), fmt::format("rank {}", r), all[r].substr(2));
    all[r].erase(0, 1);
  }
  return all;
}

#if defined(NUMPROBE_HAVE_MPI)

namespace {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int n = 0;
  MPI_Error_string(rc, text, &n);
  throw_backend_error("--mpi", fmt::format("{} failed: {}", call, std::string(text, static_cast<std::size_t>(n))));
}

}  // namespace

bool mpi_built() { return true; }

mpi_session::mpi_session() {
  int ready = 0;
  check(MPI_Initialized(&ready), "MPI_Initialized");
  if (!ready) check(MPI_Init(nullptr, nullptr), "MPI_Init");
  check(MPI_Comm_rank(MPI_COMM_WORLD, &m_rank), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &m_size), "MPI_Comm_size");
  if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"); local && *local) m_local_rank = std::atoi(local);
}

mpi_session::~mpi_session() {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

std::vector<std::string> mpi_session::gather(const std::string& text) const {
  // Lengths first, then the bytes; a document is at most a few hundred MB, under INT_MAX.
  const int n = static_cast<int>(text.size());
  std::vector<int> sizes(m_rank == 0 ? static_cast<std::size_t>(m_size) : 0);
  check(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
  std::vector<int> offsets(sizes.size());
  std::string all;
  if (m_rank == 0) {
    long long total = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      offsets[i] = static_cast<int>(total);
      total += sizes[i];
    }
    if (total > 0x7fffffff) throw_backend_error("--mpi", "the ranks' documents exceed 2 GiB together");
    all.resize(static_cast<std::size_t>(total));
  }
  check(MPI_Gatherv(text.data(), n, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD),
        "MPI_Gatherv");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(sizes[i])));
  return out;
}

std::vector<std::string> mpi_session::allgather(const std::string& text) const {
  const int n = static_cast<int>(text.size());
  std::vector<int> sizes(static_cast<std::size_t>(m_size));
  check(MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
  std::vector<int> offsets(sizes.size());
  long long total = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    offsets[i] = static_cast<int>(total);
    total += sizes[i];
  }
  if (total > 0x7fffffff) throw_backend_error("--mpi", "the ranks' results exceed 2 GiB together");
  std::string all(static_cast<std::size_t>(total), '\0');
  check(MPI_Allgatherv(text.data(), n, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD),
        "MPI_Allgatherv");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(sizes[i])));
  return out;
}

int mpi_session::broadcast(int value) const {
  check(MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
  return value;
}

#else

bool mpi_built() { return false; }

mpi_session::mpi_session() {
  throw_input_error("--mpi", "needs an MPI build (configure with Open MPI installed, -DNUMPROBE_ENABLE_MPI=ON)");
}
mpi_session::~mpi_session() = default;
std::vector<std::string> mpi_session::gather(const std::string& text) const { return {text}; }
std::vector<std::string> mpi_session::allgather(const std::string& text) const { return {text}; }
int mpi_session::broadcast(int value) const { return value; }

#endif

}  // namespace numprobe::cli
