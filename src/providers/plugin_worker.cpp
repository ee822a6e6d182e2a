#include "src/providers/plugin_worker.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "numprobe/base/error.hpp"
#include "src/core/interrupt.hpp"
#include "src/providers/exec_provider_process.hpp"
#include "src/providers/exec_provider_worker.hpp"

namespace numprobe::plugin {
namespace {

// ------------------------------------------------------------------ the shared call file

constexpr char k_magic[8] = {'N', 'P', 'P', 'L', 'U', 'G', '0', '1'};
constexpr std::uint32_t k_max_regions = 8;
enum class wire_op : std::uint32_t { m_load = 1, m_forward = 2, m_decode = 3 };

struct wire_region {
  std::uint64_t offset, bytes;
  std::uint32_t output, pad;
};

// Both ends are the same numprobe build, so the layout is this struct's; the worker still
// checks every offset and count against the file's size.
struct wire_header {
  char magic[8];
  std::uint32_t op, n_regions;
  std::uint64_t n_decode, total_bytes, params_offset;
  std::int32_t status, answered;  // written by the worker
  std::int64_t failed_index;
  numprobe_capabilities caps;
  char name[256], description[1024], message[2048];
  wire_region regions[k_max_regions];
};

std::size_t align64(std::size_t n) { return (n + 63) & ~std::size_t{63}; }

void copy_text(char* dst, std::size_t cap, const std::string& s) {
  const std::size_t n = std::min(s.size(), cap - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

std::string read_text(const char* src, std::size_t cap) { return std::string(src, strnlen(src, cap)); }

// A MAP_SHARED view of the call file, unmapped on scope exit.
class mapping {
 public:
  mapping(int fd, std::size_t bytes) : m_bytes(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    m_base = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
  }
  ~mapping() {
    if (m_base) ::munmap(m_base, m_bytes);
  }
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  [[nodiscard]] unsigned char* base() const { return m_base; }
  [[nodiscard]] wire_header& header() const { return *reinterpret_cast<wire_header*>(m_base); }

 private:
  unsigned char* m_base = nullptr;
  std::size_t m_bytes;
};

std::string& registered_executable() {
  static std::string path;
  return path;
}

// ------------------------------------------------------------------ worker side

// Serves one RUN: "" when answered in the file, else the message for an ERR line.
std::string serve(const std::string& file, std::unique_ptr<library>& lib, const std::string& path,
                  int device) {
  const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return fmt::format("{}: cannot open: {}", file, std::strerror(errno));
  struct stat st {};
  const bool ok = ::fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) >= sizeof(wire_header);
  const auto size = ok ? static_cast<std::size_t>(st.st_size) : 0;
  if (!ok) {
    ::close(fd);
    return fmt::format("{}: shorter than the call header", file);
  }
  mapping map(fd, size);
  ::close(fd);
  if (!map.base()) return fmt::format("{}: mmap failed: {}", file, std::strerror(errno));
  wire_header& h = map.header();
  const auto op = static_cast<wire_op>(h.op);
  const std::size_t params_bytes = op == wire_op::m_decode ? sizeof(numprobe_decode_params) : sizeof(numprobe_attention_params);
  if (std::memcmp(h.magic, k_magic, sizeof(k_magic)) != 0 || h.total_bytes != size ||
      h.n_regions > k_max_regions || h.n_decode > size / params_bytes ||
      h.params_offset > size || (op != wire_op::m_load && h.params_offset + (op == wire_op::m_decode ? h.n_decode : 1) * params_bytes > size))
    return fmt::format("{}: not a call file of this numprobe build", file);
  for (std::uint32_t i = 0; i < h.n_regions; ++i)
    if (h.regions[i].offset > size || h.regions[i].bytes > size - h.regions[i].offset)
      return fmt::format("{}: buffer {} lies outside the file", file, i);
  try {
    if (!lib) lib = std::make_unique<library>(path, device);
    if (op == wire_op::m_load) {
      h.caps = lib->caps().caps;
      copy_text(h.name, sizeof(h.name), lib->caps().name);
      copy_text(h.description, sizeof(h.description), lib->caps().description);
      h.answered = 1;
      return {};
    }
    if (op != wire_op::m_forward && op != wire_op::m_decode) return fmt::format("unknown operation {}", h.op);
    call c;
    c.is_decode = op == wire_op::m_decode;
    const unsigned char* params = map.base() + h.params_offset;
    if (c.is_decode) {
      c.decode.resize(h.n_decode);
      if (h.n_decode) std::memcpy(c.decode.data(), params, h.n_decode * params_bytes);
    } else {
      std::memcpy(&c.forward, params, params_bytes);
    }
    for (std::uint32_t i = 0; i < h.n_regions; ++i)
      c.regions.push_back({map.base() + h.regions[i].offset, h.regions[i].bytes, h.regions[i].output != 0});
    std::string bad;
    for_each_tensor(c, [&](numprobe_tensor& t) {
      const auto enc = reinterpret_cast<std::uintptr_t>(t.data);
      if (enc == 0) return;
      if (enc - 1 > size) bad = "a tensor lies outside the file";
      else t.data = map.base() + (enc - 1);
    });
    if (!bad.empty()) return fmt::format("{}: {}", file, bad);
    const call_result r = lib->invoke(c);
    h.status = r.status;
    h.failed_index = r.failed_index;
    copy_text(h.message, sizeof(h.message), r.message);
    h.answered = 1;
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

bool write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

void set_worker_executable(std::string path) { registered_executable() = std::move(path); }

std::string worker_executable(const std::string& place) {
  if (const char* env = std::getenv("NUMPROBE_PLUGIN_WORKER"); env && *env) return env;
  if (!registered_executable().empty()) return registered_executable();
  throw_backend_error(place, "plugin:PATH runs the plugin in a numprobe worker process and this "
                             "program is not numprobe: set NUMPROBE_PLUGIN_WORKER to a numprobe "
                             "binary, or use plugin-inproc:PATH (no isolation)");
}

int worker_main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "numprobe: error: %s: expected PATH DEVICE CALL_FILE (started by numprobe, not by hand)\n",
                 k_worker_subcommand);
    return 2;
  }
  // The worker goes when numprobe goes, even when numprobe is killed with SIGKILL.
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) return 3;
  // The protocol keeps private descriptors: a plugin printing to stdout writes to the log.
  const int in = ::fcntl(0, F_DUPFD_CLOEXEC, 3), out = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
  if (in < 0 || out < 0) return 3;
  ::dup2(2, 1);
  if (const int null_fd = ::open("/dev/null", O_RDONLY); null_fd >= 0) {
    ::dup2(null_fd, 0);
    ::close(null_fd);
  }
  const std::string path = argv[2];
  const std::string call_file = argv[4];
  const int device = std::atoi(argv[3]);
  if (!write_all(out, fmt::format("READY {}\n", exec::k_worker_protocol_version))) return 3;
  std::unique_ptr<library> lib;
  std::string buffer;
  char chunk[4096];
  for (;;) {
    const auto nl = buffer.find('\n');
    if (nl == std::string::npos) {
      const ssize_t n = ::read(in, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return 0;  // numprobe closed the socket
      buffer.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    const std::string line = buffer.substr(0, nl);
    buffer.erase(0, nl + 1);
    if (line == "QUIT") return 0;
    if (line.rfind("RUN ", 0) != 0) continue;
    std::string msg = serve(call_file, lib, path, device);
    for (char& ch : msg)
      if (ch == '\n' || ch == '\r') ch = ' ';
    if (!write_all(out, msg.empty() ? std::string("OK\n") : "ERR " + msg + "\n")) return 3;
  }
}

// ------------------------------------------------------------------ numprobe side

worker_client::worker_client(std::string plugin_path, int device, double timeout_s)
    : m_plugin(std::move(plugin_path)) {
  const std::string place = fmt::format("plugin {}", m_plugin);
  const std::string exe = worker_executable(place);
  m_session = exec::make_temp_dir("numprobe-plugin");
  // The call file: anonymous shared memory (memfd) that the worker opens through /proc, so the
  // buffers never reach a disk-backed file system; a file in the session folder otherwise.
  std::string file;
  m_fd = ::memfd_create("numprobe-plugin-call", MFD_CLOEXEC);
  if (m_fd >= 0) {
    file = fmt::format("/proc/{}/fd/{}", ::getpid(), m_fd);
  } else {
    file = m_session + "/call.bin";
    m_fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  }
  if (m_fd < 0) {
    const int e = errno;
    exec::remove_tree(m_session);
    throw_backend_error(file, fmt::format("cannot create the call file: {}", std::strerror(e)));
  }
  std::vector<std::string> argv = {exe, k_worker_subcommand, m_plugin, std::to_string(device), file};
  m_worker = std::make_unique<exec::worker_process>(std::move(argv), timeout_s, m_session + "/worker.log",
                                                    "the plugin's worker process");
}

worker_client::~worker_client() {
  m_worker.reset();  // QUIT (or a kill) before the folder goes
  if (m_fd >= 0) ::close(m_fd);
  exec::remove_tree(m_session);
}

int worker_client::starts() const { return m_worker->starts(); }

void worker_client::request(const std::string& who) {
  std::string msg;
  try {
    msg = m_worker->request(m_session);
  } catch (const interrupted&) {
    throw;
  } catch (const error& e) {
    throw_backend_error(who, e.what());
  }
  // The worker's own refusal (a load error, a device failure): its text, already one line.
  if (!msg.empty()) throw error(exit_code::m_backend, who == fmt::format("plugin {}", m_plugin) ? "" : who, msg);
}

capabilities worker_client::load() {
  const std::size_t total = align64(sizeof(wire_header));
  if (::ftruncate(m_fd, static_cast<off_t>(total)) != 0)
    throw_backend_error(m_session, fmt::format("cannot size the call file: {}", std::strerror(errno)));
  mapping map(m_fd, total);
  if (!map.base()) throw_backend_error(m_session, fmt::format("mmap failed: {}", std::strerror(errno)));
  wire_header& h = map.header();
  std::memset(&h, 0, sizeof(h));
  std::memcpy(h.magic, k_magic, sizeof(k_magic));
  h.op = static_cast<std::uint32_t>(wire_op::m_load);
  h.total_bytes = total;
  h.params_offset = total;
  request(fmt::format("plugin {}", m_plugin));
  if (h.answered != 1) throw_backend_error(fmt::format("plugin {}", m_plugin), "the worker answered OK without the capabilities");
  capabilities caps;
  caps.caps = h.caps;
  caps.caps.name = caps.caps.description = nullptr;
  caps.name = read_text(h.name, sizeof(h.name));
  caps.description = read_text(h.description, sizeof(h.description));
  return caps;
}

call_result worker_client::invoke(call& c, const std::string& who) {
  if (c.regions.size() > k_max_regions) throw_backend_error(who, "internal error: too many buffers for the worker");
  const std::size_t params_bytes =
      c.is_decode ? c.decode.size() * sizeof(numprobe_decode_params) : sizeof(numprobe_attention_params);
  std::size_t off = align64(sizeof(wire_header));
  const std::size_t params_offset = off;
  off = align64(off + params_bytes);
  std::vector<std::size_t> offsets;
  for (const region& g : c.regions) {
    offsets.push_back(off);
    off = align64(off + g.bytes);
  }
  const std::size_t total = off;
  if (::ftruncate(m_fd, static_cast<off_t>(total)) != 0)
    throw_backend_error(who, fmt::format("cannot size the call file to {} bytes: {}", total,
                                         std::strerror(errno)));
  mapping map(m_fd, total);
  if (!map.base()) throw_backend_error(who, fmt::format("mmap of {} bytes failed: {}", total, std::strerror(errno)));
  wire_header& h = map.header();
  std::memset(&h, 0, sizeof(h));
  std::memcpy(h.magic, k_magic, sizeof(k_magic));
  h.op = static_cast<std::uint32_t>(c.is_decode ? wire_op::m_decode : wire_op::m_forward);
  h.n_regions = static_cast<std::uint32_t>(c.regions.size());
  h.n_decode = c.decode.size();
  h.total_bytes = total;
  h.params_offset = params_offset;
  for (std::size_t i = 0; i < c.regions.size(); ++i) {
    h.regions[i] = {offsets[i], c.regions[i].bytes, c.regions[i].output ? 1u : 0u, 0};
    if (c.regions[i].bytes) std::memcpy(map.base() + offsets[i], c.regions[i].host, c.regions[i].bytes);
  }
  // The params with each data pointer written as 1 + its offset in the file (0: null).
  call wire = c;
  for_each_tensor(wire, [&](numprobe_tensor& t) {
    if (!t.data) return;
    const auto* p = static_cast<const unsigned char*>(t.data);
    for (std::size_t i = 0; i < c.regions.size(); ++i) {
      const auto* base = static_cast<const unsigned char*>(c.regions[i].host);
      if (p >= base && p <= base + c.regions[i].bytes) {
        t.data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(offsets[i] + static_cast<std::size_t>(p - base) + 1));
        return;
      }
    }
    throw_backend_error(who, "internal error: a tensor outside every buffer");
  });
  if (c.is_decode) {
    if (!wire.decode.empty()) std::memcpy(map.base() + params_offset, wire.decode.data(), params_bytes);
  } else {
    std::memcpy(map.base() + params_offset, &wire.forward, params_bytes);
  }
  request(who);
  if (h.answered != 1) throw_backend_error(who, "the plugin's worker process answered OK without a result");
  call_result r;
  r.status = h.status;
  r.failed_index = h.failed_index;
  r.message = read_text(h.message, sizeof(h.message));
  if (r.status == NUMPROBE_STATUS_OK)
    for (std::size_t i = 0; i < c.regions.size(); ++i)
      if (c.regions[i].output && c.regions[i].bytes)
        std::memcpy(c.regions[i].host, map.base() + offsets[i], c.regions[i].bytes);
  return r;
}

}  // namespace numprobe::plugin
