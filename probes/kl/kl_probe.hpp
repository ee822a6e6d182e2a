#pragma once
// The kl probe: how far a candidate model's next-token distributions moved from a base
// model's, position by position. Two [N, V] tensors of logits or log-probs (.npy or
// .safetensors; f32, f16, bf16 or f64; leading dimensions flatten into N) are streamed in row
// blocks from their memory maps (read-ahead requested two blocks ahead, pages released behind),
// compared with metrics::compare_row_checked on worker threads (f32/f64 rows in place, other
// dtypes widened to double per row), and summarized with metrics::summarize. Each row's result
// is independent of the thread that computed it, so any --threads gives the same report.
// Memory: the per-row results (N of them), per thread a few V-length buffers, and the resident
// window of the mappings (a block per thread plus read-ahead).
//
// Either input may instead be a llama-perplexity --kl-divergence-base file, recognised by its
// magic (io/llama_kl_base.hpp): its rows are the stored log-probs of the scored positions,
// decoded as llama.cpp decodes them and compared with llama.cpp's KL
// (metrics::compare_row_stored); its tokens are the default --tokens (docs/kl.md).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numprobe/core/result.hpp"
#include "numprobe/core/bound.hpp"
#include "numprobe/metrics/kl.hpp"
#include "probes/kl/kl_positions.hpp"
#include "probes/kl/kl_precision_floor.hpp"

namespace numprobe::probes {

struct kl_probe_options {
  std::string base;    // PATH[:TENSOR] (io::load_tensor)
  std::string cand;    // PATH[:TENSOR]
  std::string tokens;  // optional PATH[:TENSOR] of N integer token ids: perplexity ratio
  int topk = 10;
  std::size_t worst = 10;
  std::vector<bound> bounds;
  unsigned threads = 0;  // 0: hardware concurrency
  std::int64_t block_rows = 0;  // rows per work item; 0: about 8 MiB of each file
  std::int64_t positions = 0;   // position bins (kl_positions.hpp); 0: no KL by position
  std::int64_t seq_len = 0;     // positions per sequence; 0: the rows are one sequence
  // Called with (rows done, rows total) after each row block, from a worker thread under a lock.
  std::function<void(std::int64_t, std::int64_t)> progress;
};

struct kl_breach {
  std::string bound;
  double measured = 0.0;
};

// The dtype name kl reports for a llama-perplexity --kl-divergence-base input.
inline constexpr const char* k_llama_kl_dtype = "llama_kld_base";

// The row layout of a llama.cpp input (n_ctx 0: none): row r is chunk r / rows_per_chunk, at
// token index chunk n_ctx + first_scored + r % rows_per_chunk of the file's text.
struct kl_llama_layout {
  std::int64_t n_ctx = 0, n_chunk = 0, first_scored = 0, rows_per_chunk = 0;
  [[nodiscard]] std::int64_t position(std::int64_t row) const {
    return row / rows_per_chunk * n_ctx + first_scored + row % rows_per_chunk;
  }
};

struct kl_report {
  std::string case_id;
  kl_probe_options options;
  std::string base_dtype, cand_dtype;
  std::string tokens_from;  // --tokens, or the llama.cpp file whose stored tokens were used
  kl_llama_layout llama;
  metrics::kl_summary summary;
  kl_positions positions;           // bins_asked == 0 without --positions
  kl_base_precision base_precision;  // format empty when the base is f32 or f64
  std::vector<kl_breach> breaches;
  double seconds = 0.0;
  double bytes_read = 0.0;  // both files' tensor bytes
};

// The metric names --bound accepts: kld.mean, kld.stderr, kld.median, kld.p001 ... kld.p999
// (p001 p01 p05 p10 p90 p95 p99 p999), kld.max, kld.min, kld_nearest_rank.median|p90|p99|p999,
// top1 (= top1_agreement), topk_overlap, delta_p.mean, delta_p.rms, delta_p.rms_stderr,
// delta_p.min, delta_p.p001 ... delta_p.p999, delta_p.max, the same under delta_p_token.
// (NaN without tokens), ppl_ratio, ln_ppl_ratio. Throws an input error on an unknown name.
[[nodiscard]] double kl_metric(const metrics::kl_summary& s, const std::string& name);

// kl_metric's names, plus those of KL by position and of the base's precision floor:
// positions.last_over_first (last bin's KL mean / first bin's), positions.slope_per_1k (nats per
// 1000 positions), positions.log2_slope (nats per doubling), positions.r2,
// base_precision.floor_kld_mean and base_precision.mean_over_floor (kld.mean / floor).
[[nodiscard]] double kl_report_metric(const kl_report& r, const std::string& name);

// Throws numprobe::error (exit 2) with one line naming the file: unreadable or empty files,
// unsupported dtypes, a V or N mismatch, NaN/Inf values (count and first positions).
[[nodiscard]] kl_report run_kl(const kl_probe_options& o);

// Nested objects, so j["kld"]["p99"] and j["delta_p"]["rms"] are the kld.p99 and
// delta_p.rms; top1_agreement is a top-level number.
[[nodiscard]] nlohmann::json to_json(const kl_report& r);

// The result model (metrics, gates, tables, curves; to_json as details), shared by the command
// and the scenario runner.
void fill_result(const kl_report& r, const std::vector<bound>& bounds, result::check_result& out);

}  // namespace numprobe::probes
