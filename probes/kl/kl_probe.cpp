#include "probes/kl/kl_probe.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "numprobe/core/result.hpp"
#include "numprobe/base/error.hpp"
#include "numprobe/io/llama_kl_base.hpp"
#include "numprobe/io/load_tensor.hpp"

namespace numprobe::probes {

using result::json_number;  // non-finite values in the schema's spelling
namespace {

// One input's rows: a tensor of logits, or the stored log-probs of a llama-perplexity
// --kl-divergence-base file (`llama`), whose rows are row_elems u16 words of which the first
// four hold the row's scale and offset (io/llama_kl_base.hpp).
struct rows_view {
  io::tensor_view t;
  std::int64_t rows = 0, vocab = 0;
  std::int64_t row_elems = 0;  // elements of t per row: vocab, or the stored row's words
  std::optional<io::llama_kl_base> llama;
};

// "[N, V]" for a tensor; the header's sizes for a llama.cpp file.
std::string describe_input(const rows_view& r) {
  if (r.llama)
    return fmt::format("(llama-perplexity file, n_ctx={}, n_chunk={}, {} scored rows of V={})", r.llama->n_ctx,
                       r.llama->n_chunk, r.rows, r.vocab);
  return fmt::format("[{}]", fmt::join(r.t.shape, ", "));
}

rows_view open_logits(const std::string& spec, const std::string& role) {
  if (spec.empty()) throw_input_error(role, "no file given");
  // By its magic, whatever its name: llama-perplexity writes no extension of its own.
  if (io::is_llama_kl_base(spec)) {
    rows_view r;
    r.llama = io::read_llama_kl_base(spec);
    r.t = r.llama->log_probs;
    r.rows = r.llama->rows();
    r.vocab = r.llama->n_vocab;
    r.row_elems = r.llama->row_words();
    return r;
  }
  rows_view r;
  r.t = io::load_tensor(spec);
  const auto& t = r.t;
  using io::dtype;
  if (t.dtype != dtype::m_f32 && t.dtype != dtype::m_f16 && t.dtype != dtype::m_bf16 &&
      t.dtype != dtype::m_f64)
    throw_input_error(t.place(), fmt::format("{} logits must be f32, f16, bf16 or f64, not {}",
                                             role, io::name(t.dtype)));
  if (t.shape.empty() || t.element_count() == 0)
    throw_input_error(t.place(), role + " logits are empty (shape must be [N, V], N, V > 0)");
  r.vocab = static_cast<std::int64_t>(t.shape.back());
  r.rows = static_cast<std::int64_t>(t.element_count()) / r.vocab;
  r.row_elems = r.vocab;
  return r;
}

// Two llama.cpp files describe the same rows only when they hold the same chunks of the same
// text: the same n_ctx, n_chunk and tokens.
void check_same_text(const rows_view& base, const rows_view& cand, const std::string& cand_spec) {
  if (!base.llama || !cand.llama) return;
  const auto &a = *base.llama, &b = *cand.llama;
  if (a.n_ctx != b.n_ctx || a.n_chunk != b.n_chunk)
    throw_input_error(cand_spec, fmt::format("llama-perplexity files of different runs: base n_ctx={} n_chunk={}, "
                                             "candidate n_ctx={} n_chunk={}",
                                             a.n_ctx, a.n_chunk, b.n_ctx, b.n_chunk));
  const auto n_tokens = static_cast<std::int64_t>(a.tokens.shape[0]);
  for (std::int64_t i = 0; i < n_tokens; ++i)
    if (a.token(i) != b.token(i))
      throw_input_error(cand_spec, fmt::format("llama-perplexity files of different texts: token {} is {} in the "
                                               "base, {} in the candidate",
                                               i, a.token(i), b.token(i)));
}

// The row's values as doubles: a tensor row widened, or a stored llama.cpp row decoded.
void row_values(const rows_view& side, const io::tensor_view& block, std::size_t at, std::vector<float>& scratch,
                std::span<double> out) {
  if (!side.llama) {
    block.decode(static_cast<std::uint64_t>(at), out);
    return;
  }
  scratch.resize(out.size());
  io::decode_llama_kl_row(block.bytes.subspan(at * 2, static_cast<std::size_t>(side.row_elems) * 2), scratch);
  std::copy(scratch.begin(), scratch.end(), out.begin());
}

struct nonfinite_log {
  std::mutex mu;
  std::int64_t count = 0, in_base = 0;
  std::vector<std::string> first;  // "base[row, col]=nan"
  void add(const char* role, std::int64_t row, std::span<const double> x) {
    std::lock_guard lock(mu);
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!std::isfinite(x[i])) {
        ++count;
        if (role[0] == 'b') ++in_base;
        if (first.size() < 5)
          first.push_back(fmt::format("{}[{}, {}]={}", role, row, i, x[i]));
      }
  }
};

// Releases a finished row block's pages of a file mapping, keeping the resident set bounded.
void release_rows(const io::tensor_view& t, std::int64_t vocab, std::int64_t r0, std::int64_t r1) {
  if (!t.owner) return;
  const auto es = static_cast<std::size_t>(io::bits(t.dtype) / 8);
  const auto off = static_cast<std::size_t>(t.bytes.data() - t.owner->bytes().data());
  t.owner->release_pages(off + static_cast<std::size_t>(r0 * vocab) * es,
                         static_cast<std::size_t>((r1 - r0) * vocab) * es);
}

// Asks the OS to start reading rows [r0, r1) of a file mapping (whole pages around them).
void prefetch_rows(const io::tensor_view& t, std::int64_t vocab, std::int64_t r0, std::int64_t r1) {
  if (!t.owner || r1 <= r0) return;
  const auto es = static_cast<std::size_t>(io::bits(t.dtype) / 8);
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(t.bytes.data()) + static_cast<std::size_t>(r0 * vocab) * es;
  const auto end = begin + static_cast<std::size_t>((r1 - r0) * vocab) * es;
  const auto b = begin / page * page;  // the mapping starts on a page: still inside it
  ::madvise(reinterpret_cast<void*>(b), end - b, MADV_WILLNEED);
}

// Row blocks of one logits tensor. When the tensor lies in a regular file, a block is read with
// pread(2) into the caller's buffer: large sequential reads, the same system calls as reading
// the file (bench/kl.cpp's baseline), and nothing left mapped. Otherwise (bytes in memory, or a
// file that changed under the mapping) the block is a view into the tensor's bytes.
struct row_reader {
  const io::tensor_view* t = nullptr;
  std::int64_t vocab = 0;
  std::size_t elem = 0;      // bytes per element
  int fd = -1;
  std::uint64_t offset = 0;  // of the tensor in the file

  row_reader(const io::tensor_view& tv, std::int64_t v) : t(&tv), vocab(v) {
    elem = static_cast<std::size_t>(io::bits(tv.dtype) / 8);
    if (!tv.owner) return;
    const int f = ::open(tv.owner->source().c_str(), O_RDONLY | O_CLOEXEC);
    if (f < 0) return;
    struct stat st {};
    if (::fstat(f, &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<std::size_t>(st.st_size) != tv.owner->bytes().size()) {
      ::close(f);
      return;
    }
    fd = f;
    offset = static_cast<std::uint64_t>(tv.bytes.data() - tv.owner->bytes().data());
    ::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(tv.bytes.size()),
                    POSIX_FADV_SEQUENTIAL);
  }
  ~row_reader() {
    if (fd >= 0) ::close(fd);
  }
  row_reader(const row_reader&) = delete;
  row_reader& operator=(const row_reader&) = delete;

  // Starts reading rows [r0, r1) into the page cache without waiting (a file-backed reader).
  void read_ahead(std::int64_t r0, std::int64_t r1) const {
    if (fd < 0 || r1 <= r0) return;
    ::posix_fadvise(fd, static_cast<off_t>(offset + static_cast<std::size_t>(r0 * vocab) * elem),
                    static_cast<off_t>(static_cast<std::size_t>((r1 - r0) * vocab) * elem),
                    POSIX_FADV_WILLNEED);
  }

  // Rows [r0, r1) as a tensor view [r1 - r0, V] of the same dtype.
  [[nodiscard]] io::tensor_view rows(std::int64_t r0, std::int64_t r1, std::vector<std::byte>& buf) const {
    io::tensor_view b;
    b.dtype = t->dtype;
    b.shape = {static_cast<std::uint64_t>(r1 - r0), static_cast<std::uint64_t>(vocab)};
    b.source = t->source;
    const std::size_t begin = static_cast<std::size_t>(r0 * vocab) * elem;
    const std::size_t len = static_cast<std::size_t>((r1 - r0) * vocab) * elem;
    if (fd < 0) {
      b.bytes = t->bytes.subspan(begin, len);
      return b;
    }
    buf.resize(len);
    std::size_t got = 0;
    while (got < len) {
      const auto n = ::pread(fd, buf.data() + got, len - got, static_cast<off_t>(offset + begin + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // the file shrank or failed under us: read the mapping instead
        b.bytes = t->bytes.subspan(begin, len);
        return b;
      }
      got += static_cast<std::size_t>(n);
    }
    b.bytes = std::span<const std::byte>(buf.data(), len);
    return b;
  }
};

template <class T>
bool aligned(const io::tensor_view& t) {
  return reinterpret_cast<std::uintptr_t>(t.bytes.data()) % alignof(T) == 0;
}

}  // namespace

namespace {

// A delta p statistic by its name after "delta_p." or "delta_p_token."; nullopt if unknown.
std::optional<double> delta_p_field(const metrics::kl_summary::delta_p_stats& d, std::string_view f) {
  if (f == "mean") return d.mean;
  if (f == "stderr") return d.stderr_;
  if (f == "rms") return d.rms;
  if (f == "rms_stderr") return d.rms_stderr;
  if (f == "min") return d.min;
  if (f == "p001") return d.p001;
  if (f == "p01") return d.p01;
  if (f == "p05") return d.p05;
  if (f == "p10") return d.p10;
  if (f == "p25") return d.p25;
  if (f == "median") return d.median;
  if (f == "p75") return d.p75;
  if (f == "p90") return d.p90;
  if (f == "p95") return d.p95;
  if (f == "p99") return d.p99;
  if (f == "p999") return d.p999;
  if (f == "max") return d.max;
  return std::nullopt;
}

std::optional<double> kld_field(const metrics::kl_summary& s, std::string_view f) {
  if (f == "kld.mean") return s.kld.mean;
  if (f == "kld.stderr") return s.kld.stderr_;
  if (f == "kld.median") return s.kld.median;
  if (f == "kld.p001") return s.kld.p001;
  if (f == "kld.p01") return s.kld.p01;
  if (f == "kld.p05") return s.kld.p05;
  if (f == "kld.p10") return s.kld.p10;
  if (f == "kld.p90") return s.kld.p90;
  if (f == "kld.p95") return s.kld.p95;
  if (f == "kld.p99") return s.kld.p99;
  if (f == "kld.p999") return s.kld.p999;
  if (f == "kld.max") return s.kld.max;
  if (f == "kld.min") return s.kld.min;
  if (f == "kld_nearest_rank.median") return s.kld_nearest_rank.median;
  if (f == "kld_nearest_rank.p90") return s.kld_nearest_rank.p90;
  if (f == "kld_nearest_rank.p99") return s.kld_nearest_rank.p99;
  if (f == "kld_nearest_rank.p999") return s.kld_nearest_rank.p999;
  return std::nullopt;
}

}  // namespace

double kl_metric(const metrics::kl_summary& s, const std::string& n) {
  if (const auto v = kld_field(s, n)) return *v;
  if (n == "top1" || n == "top1_agreement") return s.top1_agreement;
  if (n == "topk_overlap") return s.topk_overlap;
  const std::string_view name(n);
  if (name.starts_with("delta_p."))
    if (const auto v = delta_p_field(s.delta_p, name.substr(8))) return *v;
  if (name.starts_with("delta_p_token."))
    if (const auto v = delta_p_field(s.delta_p_token, name.substr(14))) return s.has_tokens ? *v : std::nan("");
  if (n == "ppl_ratio") return s.has_tokens ? s.ppl.ratio : std::nan("");
  if (n == "ln_ppl_ratio") return s.has_tokens ? s.ppl.ln_ratio_mean : std::nan("");
  throw_input_error("--bound", "unknown kl metric '" + n +
                                   "' (known: kld.mean, kld.stderr, kld.median, kld.p001|p01|p05|p10|p90|p95|"
                                   "p99|p999, kld.max, kld.min, kld_nearest_rank.median|p90|p99|p999, top1, "
                                   "topk_overlap, delta_p.mean|stderr|rms|rms_stderr|min|p001|p01|p05|p10|p25|"
                                   "median|p75|p90|p95|p99|p999|max, the same under delta_p_token., ppl_ratio, "
                                   "ln_ppl_ratio)");
}

double kl_report_metric(const kl_report& r, const std::string& name) {
  if (const auto v = position_metric(r.positions, name)) return *v;
  if (const auto v = precision_metric(r.base_precision, r.summary.kld.mean, name)) return *v;
  return kl_metric(r.summary, name);
}

kl_report run_kl(const kl_probe_options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  kl_report rep;
  rep.options = o;
  rep.options.progress = nullptr;
  {
    kl_positions asked;
    asked.bins_asked = o.positions;
    for (const auto& b : o.bounds)
      if (!position_metric(asked, b.metric) && b.metric.rfind("base_precision.", 0) != 0)
        (void)kl_metric(metrics::kl_summary{}, b.metric);
  }
  if (o.topk < 0) throw_input_error("--topk", "must be >= 0");

  const auto base = open_logits(o.base, "base");
  const auto cand = open_logits(o.cand, "candidate");
  if (base.vocab != cand.vocab)
    throw_input_error(o.cand, fmt::format("vocabulary size differs: base {} has V={}, candidate "
                                          "{} has V={}",
                                          describe_input(base), base.vocab, describe_input(cand), cand.vocab));
  if (base.rows != cand.rows)
    throw_input_error(o.cand, fmt::format("shape mismatch: base {} has {} rows, candidate {} "
                                          "has {}",
                                          describe_input(base), base.rows, describe_input(cand), cand.rows));
  check_same_text(base, cand, o.cand);
  const std::int64_t n = base.rows, v = base.vocab;
  // The rows of a llama.cpp file are chunks of rows_per_chunk() positions: bin them by their
  // place in the chunk unless --seq-len says otherwise.
  const io::llama_kl_base* layout = base.llama ? &*base.llama : cand.llama ? &*cand.llama : nullptr;
  const std::int64_t seq_len = o.seq_len == 0 && o.positions > 0 && layout ? layout->rows_per_chunk() : o.seq_len;
  check_position_flags(o.positions, seq_len, n);
  // The base's 16-bit format, when the candidate is wide enough to measure its floor. A
  // llama.cpp base has none: its 16-bit code is not bf16 or f16 (docs/kl.md).
  const io::dtype floor_base = base.llama ? io::dtype::m_f32 : base.t.dtype;
  const auto floor_format = sixteen_bit_format(floor_base);
  const std::int64_t floor_stride = row_stride_for_floor(n, v);
  const bool measure_floor =
      floor_format && !cand.llama && (cand.t.dtype == io::dtype::m_f32 || cand.t.dtype == io::dtype::m_f64);
  for (const auto& b : o.bounds)  // base_precision.* bounds need a floor: refuse them now
    (void)precision_metric(summarize_floor(floor_base, cand.t.dtype, floor_stride, {}, 0.0), 0.0, b.metric);
  std::vector<double> floors(measure_floor ? static_cast<std::size_t>((n + floor_stride - 1) / floor_stride) : 0);
  rep.base_dtype = base.llama ? std::string(k_llama_kl_dtype) : std::string(io::name(base.t.dtype));
  rep.cand_dtype = cand.llama ? std::string(k_llama_kl_dtype) : std::string(io::name(cand.t.dtype));
  if (layout) {
    rep.llama.n_ctx = layout->n_ctx;
    rep.llama.n_chunk = layout->n_chunk;
    rep.llama.first_scored = layout->first_scored();
    rep.llama.rows_per_chunk = layout->rows_per_chunk();
  }

  // Token ids: --tokens (a tensor, or a llama.cpp file's next tokens), else those stored in a
  // llama.cpp input, which is what llama-perplexity scores.
  std::vector<double> tokens;
  std::string tokens_place;
  if (!o.tokens.empty() && io::is_llama_kl_base(o.tokens)) {
    const auto t = io::read_llama_kl_base(o.tokens).next_tokens();
    tokens.assign(t.begin(), t.end());
    tokens_place = rep.tokens_from = o.tokens;
  } else if (!o.tokens.empty()) {
    const auto t = io::load_tensor(o.tokens);
    tokens = t.to_doubles();
    tokens_place = t.place();
    rep.tokens_from = o.tokens;
  } else if (layout) {
    const auto t = layout->next_tokens();
    tokens.assign(t.begin(), t.end());
    tokens_place = rep.tokens_from = layout->source;
  }
  if (!tokens.empty()) {
    if (static_cast<std::int64_t>(tokens.size()) != n)
      throw_input_error(tokens_place, fmt::format("{} token ids for {} rows", tokens.size(), n));
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (!std::isfinite(tokens[i]) || tokens[i] != std::floor(tokens[i]))
        throw_input_error(tokens_place, fmt::format("token id {} at position {} is not an integer",
                                                    tokens[i], i));
      if (!(tokens[i] >= 0 && tokens[i] < static_cast<double>(v)))
        throw_input_error(tokens_place, fmt::format("token id {} at position {} is not in [0, {})",
                                                    tokens[i], i, v));
    }
  }

  std::vector<metrics::kl_row> rows(static_cast<std::size_t>(n));
  nonfinite_log bad;
  std::atomic<std::int64_t> next{0};
  std::int64_t done = 0;
  std::mutex progress_mu;
  // Row blocks of about 8 MiB of each file: large enough for efficient read-ahead, small
  // enough that the resident window (a block per thread plus the read-ahead) stays small.
  const auto row_bytes = static_cast<std::int64_t>(std::max(base.t.bytes.size(), cand.t.bytes.size()) /
                                                   static_cast<std::size_t>(n));
  const std::int64_t block =
      o.block_rows > 0 ? o.block_rows
                       : std::clamp<std::int64_t>((8 << 20) / std::max<std::int64_t>(1, row_bytes), 1, 4096);
  // f32 (and f64) rows are compared in place in the block buffer (or the mapping, when aligned);
  // other dtypes are widened into per-thread buffers. Both give bit-identical results
  // (compare_row_checked).
  const bool direct_f32 = base.t.dtype == io::dtype::m_f32 && cand.t.dtype == io::dtype::m_f32;
  const bool direct_f64 = base.t.dtype == io::dtype::m_f64 && cand.t.dtype == io::dtype::m_f64;
  // A llama.cpp input takes llama.cpp's KL (metrics::compare_row_stored).
  const bool stored = base.llama || cand.llama;
  const std::int64_t eb = base.row_elems, ec = cand.row_elems;  // elements per row in each file
  const row_reader read_base(base.t, eb), read_cand(cand.t, ec);
  const auto worker = [&] {
    metrics::kl_scratch scratch;
    floor_scratch fs;
    std::vector<double> xb, xc;
    std::vector<float> decoded;
    std::vector<std::byte> buf_b, buf_c;
    if (!direct_f32 && !direct_f64) {
      xb.resize(static_cast<std::size_t>(v));
      xc.resize(static_cast<std::size_t>(v));
    }
    const auto vs = static_cast<std::size_t>(v);
    while (true) {
      const std::int64_t r0 = next.fetch_add(block);
      if (r0 >= n) break;
      const std::int64_t r1 = std::min(n, r0 + block);
      // The block two claims ahead starts arriving while this one is read and compared.
      const std::int64_t a0 = r0 + 2 * block, a1 = std::min(n, r0 + 3 * block);
      if (read_base.fd < 0) prefetch_rows(base.t, eb, a0, a1);
      else read_base.read_ahead(a0, a1);
      if (read_cand.fd < 0) prefetch_rows(cand.t, ec, a0, a1);
      else read_cand.read_ahead(a0, a1);
      const io::tensor_view bb = read_base.rows(r0, r1, buf_b), cb = read_cand.rows(r0, r1, buf_c);
      const bool in_place = (direct_f32 && aligned<float>(bb) && aligned<float>(cb)) ||
                            (direct_f64 && aligned<double>(bb) && aligned<double>(cb));
      if (!in_place && xb.empty()) {
        xb.resize(vs);
        xc.resize(vs);
      }
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t tok = tokens.empty() ? -1 : static_cast<std::int64_t>(tokens[r]);
        auto& out = rows[static_cast<std::size_t>(r)];
        const auto at = static_cast<std::size_t>(r - r0) * vs;  // within the block
        const auto at_b = static_cast<std::size_t>((r - r0) * eb), at_c = static_cast<std::size_t>((r - r0) * ec);
        bool ok = false;
        if (in_place && direct_f32) {
          const auto* pb = reinterpret_cast<const float*>(bb.bytes.data()) + at;
          const auto* pc = reinterpret_cast<const float*>(cb.bytes.data()) + at;
          ok = metrics::compare_row_checked(std::span<const float>(pb, vs),
                                            std::span<const float>(pc, vs), o.topk, tok, scratch, out);
        } else if (in_place) {
          const auto* pb = reinterpret_cast<const double*>(bb.bytes.data()) + at;
          const auto* pc = reinterpret_cast<const double*>(cb.bytes.data()) + at;
          ok = metrics::compare_row_checked(std::span<const double>(pb, vs),
                                            std::span<const double>(pc, vs), o.topk, tok, scratch, out);
        } else if (stored) {
          row_values(base, bb, at_b, decoded, xb);
          row_values(cand, cb, at_c, decoded, xc);
          ok = metrics::compare_row_stored({xb, base.llama.has_value()}, {xc, cand.llama.has_value()}, o.topk,
                                           tok, scratch, out);
        } else {
          bb.decode(static_cast<std::uint64_t>(at), xb);
          cb.decode(static_cast<std::uint64_t>(at), xc);
          ok = metrics::compare_row_checked(std::span<const double>(xb), std::span<const double>(xc),
                                            o.topk, tok, scratch, out);
        }
        if (!ok) {  // rare: find and log the positions, on widened copies of the rows
          std::vector<double> wb(vs), wc(vs);
          row_values(base, bb, at_b, decoded, wb);
          row_values(cand, cb, at_c, decoded, wc);
          bad.add("base", r, wb);
          bad.add("candidate", r, wc);
        }
        if (measure_floor && r % floor_stride == 0)
          floors[static_cast<std::size_t>(r / floor_stride)] =
              rounding_floor_kld(cb, static_cast<std::uint64_t>(at), vs, *floor_format, fs);
      }
      if (read_base.fd < 0) release_rows(base.t, eb, r0, r1);
      if (read_cand.fd < 0) release_rows(cand.t, ec, r0, r1);
      if (o.progress) {
        std::lock_guard lock(progress_mu);
        done += r1 - r0;
        o.progress(done, n);
      }
    }
  };
  // Per-row results do not depend on which thread computed them, so the summary is the same
  // for any thread count (tests/probes/test_kl_probe.cpp compares 1 and 2 threads).
  unsigned threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::int64_t>(threads, (n + block - 1) / block));
  if (read_base.fd < 0) prefetch_rows(base.t, eb, 0, std::min(n, 2 * block));
  else read_base.read_ahead(0, std::min(n, 2 * block));
  if (read_cand.fd < 0) prefetch_rows(cand.t, ec, 0, std::min(n, 2 * block));
  else read_cand.read_ahead(0, std::min(n, 2 * block));
  std::vector<std::jthread> pool;
  for (unsigned i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  pool.clear();  // joins

  if (bad.count > 0) {
    std::sort(bad.first.begin(), bad.first.end());
    // NaN/Inf only in the candidate is a finding about the candidate (exit 1); in the base it
    // is a bad input (exit 2): the reference itself is unusable.
    if (bad.in_base == 0)
      throw error(exit_code::m_breach, o.base + " / " + o.cand,
                  fmt::format("{} NaN/Inf candidate logits (first: {}): a finding, KL is undefined",
                              bad.count, fmt::join(bad.first, ", ")));
    throw_input_error(o.base + " / " + o.cand,
                      fmt::format("{} NaN/Inf logits (first: {}); KL needs finite values",
                                  bad.count, fmt::join(bad.first, ", ")));
  }

  rep.summary = metrics::summarize(rows, v, o.topk, !tokens.empty(), o.worst);
  rep.positions = kl_by_position(rows, o.positions, seq_len);
  rep.base_precision = summarize_floor(floor_base, cand.t.dtype, floor_stride, floors, rep.summary.kld.mean);
  rep.case_id = fmt::format("kl(N={},V={},base={},cand={},topk={}{}{}{})", n, v, rep.base_dtype,
                            rep.cand_dtype, o.topk, tokens.empty() ? "" : ",tokens",
                            o.positions > 0 ? fmt::format(",positions={}", o.positions) : "",
                            seq_len > 0 ? fmt::format(",seq_len={}", seq_len) : "");
  for (const auto& b : o.bounds) {
    const double m = kl_report_metric(rep, b.metric);
    if (!b.holds(m)) rep.breaches.push_back({b.text(), m});
  }
  rep.bytes_read = static_cast<double>(base.t.bytes.size() + cand.t.bytes.size());
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

namespace {

nlohmann::json delta_p_json(const metrics::kl_summary::delta_p_stats& d) {
  return {{"mean", json_number(d.mean)},     {"stderr", json_number(d.stderr_)}, {"rms", json_number(d.rms)},
          {"rms_stderr", json_number(d.rms_stderr)},
          {"min", json_number(d.min)},       {"p001", json_number(d.p001)},      {"p01", json_number(d.p01)},
          {"p05", json_number(d.p05)},       {"p10", json_number(d.p10)},        {"p25", json_number(d.p25)},
          {"median", json_number(d.median)}, {"p75", json_number(d.p75)},        {"p90", json_number(d.p90)},
          {"p95", json_number(d.p95)},       {"p99", json_number(d.p99)},        {"p999", json_number(d.p999)},
          {"max", json_number(d.max)}};
}

}  // namespace

nlohmann::json to_json(const kl_report& r) {
  const auto& s = r.summary;
  nlohmann::json j;
  j["case"] = r.case_id;
  j["inputs"] = {{"base", r.options.base},
                 {"candidate", r.options.cand},
                 {"tokens", r.tokens_from.empty() ? r.options.tokens : r.tokens_from},
                 {"base_dtype", r.base_dtype},
                 {"candidate_dtype", r.cand_dtype}};
  j["rows"] = s.rows;
  j["vocab"] = s.vocab;
  j["kld"] = {{"mean", json_number(s.kld.mean)},     {"stderr", json_number(s.kld.stderr_)},
              {"median", json_number(s.kld.median)}, {"p90", json_number(s.kld.p90)},
              {"p99", json_number(s.kld.p99)},       {"p999", json_number(s.kld.p999)},
              {"max", json_number(s.kld.max)},       {"min", json_number(s.kld.min)},
              {"p001", json_number(s.kld.p001)},     {"p01", json_number(s.kld.p01)},
              {"p05", json_number(s.kld.p05)},       {"p10", json_number(s.kld.p10)},
              {"p95", json_number(s.kld.p95)}};
  const auto& nr = s.kld_nearest_rank;
  j["kld_nearest_rank"] = {{"median", json_number(nr.median)},
                           {"p90", json_number(nr.p90)},
                           {"p99", json_number(nr.p99)},
                           {"p999", json_number(nr.p999)}};
  j["top1_agreement"] = json_number(s.top1_agreement);
  j["top1_stderr"] = json_number(s.top1_stderr);
  j["top1_same"] = s.top1_same;
  j["delta_p"] = delta_p_json(s.delta_p);
  j["delta_p_token"] = s.has_tokens ? delta_p_json(s.delta_p_token) : nlohmann::json(nullptr);
  j["topk"] = {{"k", s.topk}, {"overlap", json_number(s.topk_overlap)}};
  if (s.has_tokens)
    j["ppl"] = {{"base", json_number(s.ppl.base)},
                {"candidate", json_number(s.ppl.cand)},
                {"ratio", json_number(s.ppl.ratio)},
                {"ln_ratio_mean", json_number(s.ppl.ln_ratio_mean)},
                {"ln_ratio_stderr", json_number(s.ppl.ln_ratio_stderr)}};
  else
    j["ppl"] = nullptr;
  j["worst"] = nlohmann::json::array();
  for (const auto& w : s.worst) {
    j["worst"].push_back({{"row", w.row},
                          {"kld", json_number(w.kld)},
                          {"top_base", w.top_base},
                          {"top_candidate", w.top_cand},
                          {"p_base_top", json_number(w.p_base_top)},
                          {"q_base_top", json_number(w.q_base_top)}});
    if (r.llama.n_ctx > 0) j["worst"].back()["position"] = r.llama.position(w.row);
  }
  // Absent unless an input is a llama.cpp file.
  if (r.llama.n_ctx > 0)
    j["llama"] = {{"n_ctx", r.llama.n_ctx},
                  {"n_chunk", r.llama.n_chunk},
                  {"first_scored", r.llama.first_scored},
                  {"rows_per_chunk", r.llama.rows_per_chunk}};
  // Absent without --positions, so documents of runs without it keep their fields.
  if (r.positions.bins_asked > 0) j["positions"] = to_json(r.positions);
  j["base_precision"] = to_json(r.base_precision);
  j["breaches"] = nlohmann::json::array();
  for (const auto& b : r.breaches) j["breaches"].push_back({{"bound", b.bound}, {"measured", json_number(b.measured)}});
  j["seconds"] = r.seconds;
  return j;
}

}  // namespace numprobe::probes
