// kl against llama.cpp's numbers (issue 29 item 6): llama-perplexity --kl-divergence-base files
// written here as perplexity.cpp writes them (tests/support/llama_kl_writer.hpp) and read back;
// llama.cpp's KL and statistics on a hand-checked example; the kl probe against a literal
// float re-statement of perplexity.cpp's kl_divergence() arithmetic; hostile headers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/base/rng.hpp"
#include "numprobe/io/llama_kl_base.hpp"
#include "numprobe/io/load_tensor.hpp"
#include "numprobe/io/mapped_file.hpp"
#include "numprobe/io/npy.hpp"
#include "numprobe/metrics/kl.hpp"
#include "probes/kl/kl_probe.hpp"
#include "support/llama_kl_writer.hpp"

namespace {

namespace fs = std::filesystem;
using numprobe::testing::llama_kl_file_bytes;

// A small run: n_chunk chunks of n_ctx tokens, logits for every scored row. Rows vary in
// spread so that some entries fall more than 16 below the maximum (clamped), one row is
// constant (scale 0), and candidates disagree on the top token now and then.
struct small_run {
  std::int32_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
  std::vector<std::int32_t> tokens;
  std::vector<std::vector<float>> base, cand;  // per scored row
  std::int64_t rows_per_chunk() const { return n_ctx - 1 - n_ctx / 2; }
  std::string bytes() const { return llama_kl_file_bytes(n_ctx, n_vocab, n_chunk, tokens, base); }
};

small_run make_run(std::int32_t n_ctx, std::int32_t n_vocab, std::int32_t n_chunk, std::uint64_t seed) {
  small_run s{n_ctx, n_vocab, n_chunk, {}, {}, {}};
  for (std::int64_t i = 0; i < std::int64_t{n_ctx} * n_chunk; ++i)
    s.tokens.push_back(static_cast<std::int32_t>(
        std::fabs(numprobe::normal_at(seed, 9, static_cast<std::uint64_t>(i))) * 1e6) % n_vocab);
  const std::int64_t rows = s.rows_per_chunk() * n_chunk;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double spread = r % 4 == 0 ? 8.0 : r % 4 == 1 ? 3.0 : 1.5;  // 8: many clamped entries
    std::vector<float> b(static_cast<std::size_t>(n_vocab)), c(b.size());
    for (std::int32_t i = 0; i < n_vocab; ++i) {
      const auto at = static_cast<std::uint64_t>(r * n_vocab + i);
      b[i] = static_cast<float>(spread * numprobe::normal_at(seed, 1, at));
      c[i] = b[i] + static_cast<float>((r % 7 == 3 ? 2.0 : 0.2) * numprobe::normal_at(seed, 2, at));
    }
    if (r == 5) std::fill(b.begin(), b.end(), 1.25f);  // a constant row: scale 0
    s.base.push_back(std::move(b));
    s.cand.push_back(std::move(c));
  }
  return s;
}

numprobe::io::llama_kl_base parse_bytes(const std::string& bytes, const std::string& name = "run.kld") {
  return numprobe::io::parse_llama_kl_base(numprobe::io::mapped_file::from_bytes(
      std::as_bytes(std::span(bytes.data(), bytes.size())), name));
}

std::vector<float> decoded_row(const numprobe::io::llama_kl_base& b, std::int64_t r) {
  std::vector<float> out(static_cast<std::size_t>(b.n_vocab));
  const auto row = static_cast<std::size_t>(b.row_words()) * 2;
  numprobe::io::decode_llama_kl_row(b.log_probs.bytes.subspan(static_cast<std::size_t>(r) * row, row), out);
  return out;
}

float word_float(const std::string& bytes, std::size_t at) {
  float f;
  std::memcpy(&f, bytes.data() + at, 4);
  return f;
}

// ---- the file format -----------------------------------------------------------------------

TEST(llama_kl_base, header_tokens_and_rows_read_back) {
  for (const std::int32_t v : {301, 300}) {  // odd: one pad word per row
    const auto run = make_run(9, v, 3, 11);
    const auto bytes = run.bytes();
    const auto b = parse_bytes(bytes);
    EXPECT_EQ(b.n_ctx, 9);
    EXPECT_EQ(b.n_vocab, v);
    EXPECT_EQ(b.n_chunk, 3);
    EXPECT_EQ(b.first_scored(), 4);
    EXPECT_EQ(b.rows_per_chunk(), 4);  // positions 4..7 of 0..8: 8 predicts past the chunk
    EXPECT_EQ(b.rows(), 12);
    EXPECT_EQ(b.row_words(), 2 * ((v + 1) / 2) + 4);
    EXPECT_EQ(b.log_probs.shape, (std::vector<std::uint64_t>{12, static_cast<std::uint64_t>(b.row_words())}));
    const auto next = b.next_tokens();
    for (std::int64_t r = 0; r < b.rows(); ++r) {
      const std::int64_t chunk = r / 4, i = r % 4;
      EXPECT_EQ(b.position(r), chunk * 9 + 4 + i);
      EXPECT_EQ(next[static_cast<std::size_t>(r)], run.tokens[static_cast<std::size_t>(chunk * 9 + 4 + i + 1)]);
    }
    for (std::int64_t i = 0; i < 27; ++i) EXPECT_EQ(b.token(i), run.tokens[static_cast<std::size_t>(i)]);
  }
}

// Each decoded log-prob against log_softmax of the float logits in double. Unclamped entries:
// within half a code step (scale / 2), plus 2% of a step for the float product
// (1 / scale) (x - lo) (relative error ~2^-23 of a code up to 65535, ~0.008 codes), plus float
// rounding of lse, min_log_prob and the decode (a few ulps of numbers below |min_log_prob| + 17:
// 16 2^-24 (|min_log_prob| + 17) covers them). Clamped entries (x <= lo): exactly min_log_prob.
TEST(llama_kl_base, decoded_log_probs_are_within_half_a_step) {
  const auto run = make_run(9, 301, 3, 12);
  const auto bytes = run.bytes();
  const auto b = parse_bytes(bytes);
  const std::size_t header = numprobe::io::k_llama_kl_header_bytes + 4 * 27;
  std::int64_t clamped = 0;
  for (std::int64_t r = 0; r < b.rows(); ++r) {
    const auto& x = run.base[static_cast<std::size_t>(r)];
    std::vector<double> xd(x.begin(), x.end()), lp(x.size());
    numprobe::metrics::log_softmax(xd, lp);
    const std::size_t at = header + static_cast<std::size_t>(r * b.row_words()) * 2;
    const float scale = word_float(bytes, at), min_lp = word_float(bytes, at + 4);
    const float mx = *std::max_element(x.begin(), x.end());
    const float lo = std::max(*std::min_element(x.begin(), x.end()), mx - 16);
    const auto d = decoded_row(b, r);
    if (r == 5) {  // constant row: scale 0, every entry log(1/V)
      EXPECT_EQ(scale, 0.0f);
      for (float y : d) EXPECT_NEAR(y, -std::log(301.0), 1e-6);
      continue;
    }
    const double tol = 0.52 * scale + 16 * 0x1p-24 * (std::fabs(min_lp) + 17);
    for (std::size_t j = 0; j < d.size(); ++j) {
      if (x[j] > lo) {
        ASSERT_NEAR(d[j], lp[j], tol) << "row " << r << " entry " << j;
        continue;
      }
      ASSERT_EQ(d[j], min_lp) << "row " << r << " entry " << j;  // code 0
      if (x[j] == lo) {
        ASSERT_NEAR(d[j], lp[j], tol) << "row " << r << " entry " << j;  // the row's minimum
      } else {  // more than 16 below the maximum: clamped to -16 - lse <= -16
        ++clamped;
        ASSERT_LE(d[j], -16.0f);
      }
    }
    EXPECT_LE(scale, 16.0f / 65535.0f * (1 + 1e-6f));
    // The storage's floor: a candidate equal to the base's own logits. llama.cpp's KL keeps
    // entries with stored log p > -16, where stored = true + e (|e| <= tol), so it is
    // sum_kept p e^e e, at most tol (1 + tol) in size (sum p <= 1); dropped entries add nothing.
    numprobe::metrics::kl_scratch ks;
    numprobe::metrics::kl_row kr;
    const std::vector<double> dd(d.begin(), d.end());
    ASSERT_TRUE(numprobe::metrics::compare_row_stored({dd, true}, {xd, false}, 1, -1, ks, kr));
    EXPECT_LE(std::fabs(kr.kld), tol * (1 + tol)) << "row " << r;
  }
  EXPECT_GT(clamped, 0) << "the spread-8 rows must reach the clamp";
}

// ---- llama.cpp's definitions on a hand-checked example --------------------------------------

// One stored row whose decoded log-probs are exact: scale 1/16, min_log_prob -20, codes
// {0, 304, 312, 48} -> {-20, -1, -0.5, -17}. Candidate logits all 0: log q = -ln 4 each.
// llama.cpp sums only entries with log p > -16 (entries 1 and 2):
//   KL = e^-1 (ln 4 - 1) + e^-0.5 (ln 4 - 0.5) = 0.6796744572460989
// (the two skipped entries would add e^-17 (ln 4 - 17) + e^-20 (ln 4 - 20) = -6.85e-7).
TEST(llama_kl_metrics, stored_row_kl_by_hand) {
  std::string row(8 + 8, '\0');
  const float scale = 0.0625f, min_lp = -20.0f;
  std::memcpy(row.data(), &scale, 4);
  std::memcpy(row.data() + 4, &min_lp, 4);
  const std::uint16_t codes[4] = {0, 304, 312, 48};
  std::memcpy(row.data() + 8, codes, 8);
  std::vector<float> lpf(4);
  numprobe::io::decode_llama_kl_row(std::as_bytes(std::span(row.data(), row.size())), lpf);
  EXPECT_EQ(lpf, (std::vector<float>{-20.0f, -1.0f, -0.5f, -17.0f}));

  const std::vector<double> lp(lpf.begin(), lpf.end()), cand(4, 0.0);
  numprobe::metrics::kl_scratch s;
  numprobe::metrics::kl_row r;
  ASSERT_TRUE(numprobe::metrics::compare_row_stored({lp, true}, {cand, false}, 2, 1, s, r));
  const double ln4 = std::log(4.0);
  EXPECT_NEAR(r.kld, std::exp(-1.0) * (ln4 - 1) + std::exp(-0.5) * (ln4 - 0.5), 1e-15);
  EXPECT_NEAR(r.kld, 0.6796744572460989, 1e-15);
  EXPECT_EQ(r.top_base, 2);
  EXPECT_EQ(r.top_cand, 0);  // a four-way tie: the first index, as llama.cpp's strict '>'
  EXPECT_NEAR(r.p_base_top, std::exp(-0.5), 1e-15);
  EXPECT_NEAR(r.q_base_top, 0.25, 1e-15);
  EXPECT_DOUBLE_EQ(r.topk_overlap, 0.5);  // top-2 {2, 1} and {0, 1}
  EXPECT_NEAR(r.nll_base, 1.0, 1e-15);    // -log p(token 1), as stored
  EXPECT_NEAR(r.nll_cand, ln4, 1e-15);

  // The same rows as logits (the stored values renormalized): every entry counts, and the
  // clamped ones' mass changes the result. This is what kl computes for a tensor base.
  numprobe::metrics::kl_row t;
  ASSERT_TRUE(numprobe::metrics::compare_row_stored({lp, false}, {cand, false}, 2, 1, s, t));
  EXPECT_GT(std::fabs(t.kld - r.kld), 1e-3);
}

// Four rows with set KLs, tops and token log-probs; each statistic by hand.
//   KL {0.4, 0.1, 0.3, 0.2}: mean 0.25; median (0.2 + 0.3) / 2 = 0.25 (nearest rank: 0.2);
//   p99: h = 0.99 * 3 = 2.97 -> 0.3 + 0.97 * 0.1 = 0.397; p999: 0.3997; p90: 0.37; p01: 0.103.
//   same top on 3 rows of 4: 0.75 +- sqrt(0.75 * 0.25 / 3) = 0.25.
//   dp at the token (q - p) {0.1, -0.2, 0.05, 0.05}: mean 0, RMS sqrt(0.055 / 4) = 0.1172604;
//   RMS's error 0.5 / RMS * se(dp^2) = 0.5 / 0.1172604 * 0.0089268 = 0.0380639.
TEST(llama_kl_metrics, summary_statistics_by_hand) {
  const double kl[4] = {0.4, 0.1, 0.3, 0.2};
  const double p[4] = {0.5, 0.6, 0.25, 0.3}, q[4] = {0.6, 0.4, 0.3, 0.35};
  std::vector<numprobe::metrics::kl_row> rows(4);
  for (int i = 0; i < 4; ++i) {
    rows[i].kld = kl[i];
    rows[i].top_base = 7;
    rows[i].top_cand = i == 2 ? 8 : 7;
    rows[i].nll_base = -std::log(p[i]);
    rows[i].nll_cand = -std::log(q[i]);
  }
  const auto s = numprobe::metrics::summarize(rows, 10, 1, true, 0);
  EXPECT_NEAR(s.kld.mean, 0.25, 1e-15);
  EXPECT_NEAR(s.kld.median, 0.25, 1e-15);
  EXPECT_EQ(s.kld_nearest_rank.median, 0.2);
  EXPECT_NEAR(s.kld.p99, 0.397, 1e-15);
  EXPECT_NEAR(s.kld.p999, 0.3997, 1e-15);
  EXPECT_NEAR(s.kld.p90, 0.37, 1e-15);
  EXPECT_NEAR(s.kld.p01, 0.103, 1e-15);
  EXPECT_EQ(s.kld_nearest_rank.p99, 0.4);
  EXPECT_EQ(s.top1_same, 3);
  EXPECT_DOUBLE_EQ(s.top1_agreement, 0.75);
  EXPECT_NEAR(s.top1_stderr, 0.25, 1e-15);
  EXPECT_NEAR(s.delta_p_token.mean, 0.0, 1e-15);
  EXPECT_NEAR(s.delta_p_token.rms, 0.11726039399558574, 1e-14);
  EXPECT_NEAR(s.delta_p_token.rms_stderr, 0.03806394141919142, 1e-14);
  EXPECT_NEAR(s.delta_p_token.median, 0.05, 1e-15);  // sorted {-0.2, 0.05, 0.05, 0.1}
  EXPECT_NEAR(s.delta_p_token.max, 0.1, 1e-15);
}

TEST(llama_kl_metrics, interpolated_percentile_edges) {
  std::vector<double> one{3.0};
  EXPECT_EQ(numprobe::metrics::interpolated_percentile(one, 0.999), 3.0);
  std::vector<double> v{5, 1, 4, 2, 3};
  EXPECT_EQ(numprobe::metrics::interpolated_percentile(v, 0.5), 3.0);  // odd: the middle
  EXPECT_EQ(numprobe::metrics::interpolated_percentile(v, 0.0), 1.0);
  EXPECT_EQ(numprobe::metrics::interpolated_percentile(v, 1.0), 5.0);
  EXPECT_NEAR(numprobe::metrics::interpolated_percentile(v, 0.9), 4.6, 1e-15);  // h = 3.6
  std::vector<double> none;
  EXPECT_TRUE(std::isnan(numprobe::metrics::interpolated_percentile(none, 0.5)));
}

// ---- the kl probe against perplexity.cpp's kl_divergence(), restated in float ---------------

// One row as llama.cpp's log_softmax(int, const float*, const uint16_t*, int, kl_divergence_result&)
// computes it: candidate logits x, the stored base row, the next token.
struct llama_row {
  double kld;
  bool same_top;
  float nll, nll_base, p_diff;
};

llama_row llama_reference_row(const std::vector<float>& x, std::span<const std::byte> stored, int tok) {
  const int n = static_cast<int>(x.size());
  float max_logit = x[0];
  int imax = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > max_logit) max_logit = x[i], imax = i;
  double sum_exp = 0.0;
  for (int i = 0; i < n; ++i) sum_exp += std::exp(x[i] - max_logit);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  float scale, min_lp;
  std::memcpy(&scale, stored.data(), 4);
  std::memcpy(&min_lp, stored.data() + 4, 4);
  std::vector<std::uint16_t> q(static_cast<std::size_t>(n));
  std::memcpy(q.data(), stored.data() + 8, q.size() * 2);
  auto base_lp = [&](int i) { return std::fma(scale, static_cast<float>(q[i]), 0.0f) + min_lp; };
  llama_row r{};
  r.nll = max_logit + log_sum_exp - x[tok];
  r.nll_base = -base_lp(tok);
  max_logit += log_sum_exp;
  double sum = 0;
  int imax_base = -1;
  float lp_max = 0;
  for (int i = 0; i < n; ++i) {
    const float lp = base_lp(i);
    if (i == 0 || lp > lp_max) lp_max = lp, imax_base = i;
    if (lp > -16.f) {
      const float pb = std::exp(lp);
      sum += std::fma(pb, lp - x[i] + max_logit, 0.0f);
    }
  }
  r.kld = sum;
  r.same_top = imax == imax_base;
  r.p_diff = std::exp(-r.nll) - std::exp(-r.nll_base);
  return r;
}

// mean_and_uncertainty in kl_divergence(): the mean and sqrt(var / (n - 1)), 0 for n <= 10.
std::pair<double, double> llama_mean_unc(double sum, double sum2, std::size_t n) {
  const double f = sum / static_cast<double>(n);
  double df = sum2 / static_cast<double>(n) - f * f;
  df = df > 0 && n > 10 ? std::sqrt(df / static_cast<double>(n - 1)) : 0.;
  return {f, df};
}

// kl_divergence()'s percentile lambda, on sorted floats, in float.
float llama_percentile(const std::vector<float>& v, float fraction) {
  float p = fraction * static_cast<float>(v.size() - 1);
  const auto ip = static_cast<std::size_t>(p);
  p -= static_cast<float>(ip);
  return (1 - p) * v[ip] + p * v[std::min(ip + 1, v.size() - 1)];
}

struct temp_dir {
  fs::path dir = fs::temp_directory_path() / ("numprobe_llama_kl_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(dir); }
  ~temp_dir() { fs::remove_all(dir); }
  std::string path(const std::string& n) const { return (dir / n).string(); }
};

// Tolerances: llama.cpp's per-row arithmetic is float. Its KL terms p (lp - x + (max + lse))
// carry a few float roundings of numbers up to |max logit + lse| <= 60 here: 60 * 2^-24 * 4
// = 1.4e-5 per term at worst, but they enter weighted by p (sum p <= 1), so 2e-5 bounds a row's
// KL difference. Statistics of values each within that bound move by at most the bound.
// The candidate's llama.cpp log-softmax is float: nll to ~|max + lse| 2^-23 = 1e-5.
TEST(llama_kl_probe, statistics_match_llama_cpp_kl_divergence) {
  const auto run = make_run(64, 257, 8, 21);  // 8 chunks x 31 scored rows = 248 >= 100 rows
  temp_dir d;
  const auto base_path = d.path("base.bin");  // no extension: found by its magic
  const auto bytes = run.bytes();
  numprobe::testing::write_llama_kl_file(base_path, bytes);
  std::vector<float> flat;
  for (const auto& r : run.cand) flat.insert(flat.end(), r.begin(), r.end());
  const auto cand_path = d.path("cand.npy");
  numprobe::io::write_npy(cand_path, std::vector<std::uint64_t>{run.cand.size(), 257}, flat);

  numprobe::probes::kl_probe_options o;
  o.base = base_path;
  o.cand = cand_path;
  o.threads = 2;
  o.worst = run.cand.size();
  const auto rep = numprobe::probes::run_kl(o);
  const auto& s = rep.summary;
  ASSERT_EQ(s.rows, 248);
  EXPECT_TRUE(s.has_tokens) << "the file's tokens are the default";
  EXPECT_EQ(rep.base_dtype, numprobe::probes::k_llama_kl_dtype);
  EXPECT_EQ(rep.llama.n_ctx, 64);
  EXPECT_EQ(rep.llama.rows_per_chunk, 31);

  // llama.cpp's accumulation, row by row, then its final statistics.
  const auto b = parse_bytes(bytes);
  const auto next = b.next_tokens();
  double sum_kld = 0, sum_kld2 = 0, sum_nll = 0, sum_nll2 = 0, sum_nllb = 0, sum_nllb2 = 0, sum_nn = 0;
  double sum_pd = 0, sum_pd2 = 0, sum_pd4 = 0;
  std::size_t same = 0;
  std::vector<float> klds, pdiffs;
  std::vector<double> row_kld(static_cast<std::size_t>(s.rows));
  for (const auto& w : s.worst) row_kld[static_cast<std::size_t>(w.row)] = w.kld;
  const auto row_bytes = static_cast<std::size_t>(b.row_words()) * 2;
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const auto x = llama_reference_row(run.cand[static_cast<std::size_t>(r)],
                                       b.log_probs.bytes.subspan(static_cast<std::size_t>(r) * row_bytes, row_bytes),
                                       static_cast<int>(next[static_cast<std::size_t>(r)]));
    ASSERT_NEAR(row_kld[static_cast<std::size_t>(r)], x.kld, 2e-5) << "row " << r;
    sum_kld += x.kld;
    sum_kld2 += x.kld * x.kld;
    // llama.cpp's products of floats are float products, added into double sums.
    sum_nll += x.nll;
    sum_nll2 += x.nll * x.nll;
    sum_nllb += x.nll_base;
    sum_nllb2 += x.nll_base * x.nll_base;
    sum_nn += x.nll * x.nll_base;
    sum_pd += x.p_diff;
    const double pd2 = x.p_diff * x.p_diff;
    sum_pd2 += pd2;
    sum_pd4 += pd2 * pd2;
    same += x.same_top ? 1 : 0;
    klds.push_back(static_cast<float>(x.kld));
    pdiffs.push_back(x.p_diff);
  }
  const std::size_t n = klds.size();
  std::sort(klds.begin(), klds.end());
  std::sort(pdiffs.begin(), pdiffs.end());
  const auto kl = llama_mean_unc(sum_kld, sum_kld2, n);
  EXPECT_NEAR(s.kld.mean, kl.first, 2e-5);
  EXPECT_NEAR(s.kld.stderr_, kl.second, 2e-3 * kl.second);  // one formula; float-rounded inputs
  const float median = n % 2 == 0 ? 0.5f * (klds[n / 2] + klds[n / 2 - 1]) : klds[n / 2];
  EXPECT_NEAR(s.kld.median, median, 2e-5);
  EXPECT_NEAR(s.kld.p99, llama_percentile(klds, 0.990f), 2e-5);
  EXPECT_NEAR(s.kld.p999, llama_percentile(klds, 0.999f), 2e-5);
  EXPECT_NEAR(s.kld.p90, llama_percentile(klds, 0.900f), 2e-5);
  EXPECT_NEAR(s.kld.p95, llama_percentile(klds, 0.950f), 2e-5);
  EXPECT_NEAR(s.kld.p01, llama_percentile(klds, 0.010f), 2e-5);
  EXPECT_NEAR(s.kld.max, klds.back(), 2e-5);
  // Same top p: the same count (both take the first index of the stored maximum).
  EXPECT_EQ(static_cast<std::size_t>(s.top1_same), same);
  EXPECT_GT(same, n / 2);
  EXPECT_LT(same, n);
  const double top = static_cast<double>(same) / static_cast<double>(n);
  EXPECT_NEAR(s.top1_stderr, std::sqrt(top * (1 - top) / static_cast<double>(n - 1)), 1e-15);
  // RMS dp and its error; dp is a difference of probabilities from float nlls: 2e-6.
  const auto mse = llama_mean_unc(sum_pd2, sum_pd4, n);
  const double rms = std::sqrt(mse.first);
  EXPECT_NEAR(s.delta_p_token.rms, rms, 2e-6);
  EXPECT_NEAR(s.delta_p_token.rms_stderr, 0.5 / rms * mse.second, 1e-3 * 0.5 / rms * mse.second);
  EXPECT_NEAR(s.delta_p_token.mean, sum_pd / static_cast<double>(n), 2e-6);
  const float pd_median = 0.5f * (pdiffs[n / 2] + pdiffs[n / 2 - 1]);
  EXPECT_NEAR(s.delta_p_token.median, pd_median, 2e-6);
  EXPECT_NEAR(s.delta_p_token.p99, llama_percentile(pdiffs, 0.99f), 2e-6);
  // Perplexities and ln(PPL(Q)/PPL(base)) with its error (llama.cpp's error from the two
  // variances and their covariance is the standard error of the mean difference).
  const auto lq = llama_mean_unc(sum_nll, sum_nll2, n), lb = llama_mean_unc(sum_nllb, sum_nllb2, n);
  EXPECT_NEAR(std::log(s.ppl.cand), lq.first, 1e-5);
  EXPECT_NEAR(std::log(s.ppl.base), lb.first, 1e-5);
  const double cov = (sum_nn / static_cast<double>(n) - lq.first * lb.first) / static_cast<double>(n - 1);
  const double ln_unc = std::sqrt(lq.second * lq.second + lb.second * lb.second - 2 * cov);
  EXPECT_NEAR(s.ppl.ln_ratio_mean, lq.first - lb.first, 1e-5);
  EXPECT_NEAR(s.ppl.ln_ratio_stderr, ln_unc, 1e-3 * ln_unc);
}

// Two stored files of the same run: the candidate's log-probs are used as stored too, so a
// file against itself is exactly 0 and every top agrees.
TEST(llama_kl_probe, a_file_against_itself_is_zero) {
  const auto run = make_run(9, 301, 3, 13);
  temp_dir d;
  const auto path = d.path("run.kld");
  numprobe::testing::write_llama_kl_file(path, run.bytes());
  numprobe::probes::kl_probe_options o;
  o.base = o.cand = path;
  const auto rep = numprobe::probes::run_kl(o);
  EXPECT_EQ(rep.summary.kld.max, 0.0);
  EXPECT_EQ(rep.summary.kld.min, 0.0);
  EXPECT_EQ(rep.summary.top1_agreement, 1.0);
  EXPECT_EQ(rep.summary.delta_p_token.rms, 0.0);
  EXPECT_EQ(rep.cand_dtype, numprobe::probes::k_llama_kl_dtype);
}

// ---- hostile files -------------------------------------------------------------------------

std::string header(std::int32_t n_ctx, std::int32_t n_vocab, std::int32_t n_chunk) {
  std::string h("_logits_", 8);
  for (std::int32_t v : {n_ctx, n_vocab, n_chunk}) h.append(reinterpret_cast<const char*>(&v), 4);
  return h;
}

// The error (exit 2) parsing `bytes` gives: one line, naming the file.
std::string parse_error(const std::string& bytes) {
  try {
    (void)parse_bytes(bytes, "hostile.kld");
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), numprobe::exit_code::m_input);
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.rfind("hostile.kld: ", 0), 0u) << what;
    return what;
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(llama_kl_base, hostile_headers_are_input_errors) {
  const auto good = make_run(9, 301, 3, 14).bytes();
  auto wrong_magic = good;
  wrong_magic[6] = 'z';
  EXPECT_NE(parse_error(wrong_magic).find("does not start with \"_logits_\""), std::string::npos);
  EXPECT_NE(parse_error("_log").find("does not start with"), std::string::npos);
  // llama-perplexity's own leftover when the text is too short: magic and n_ctx only.
  EXPECT_NE(parse_error(good.substr(0, 12)).find("header cut short: 12 bytes"), std::string::npos);
  // A huge n_vocab with a small body: refused from the sizes alone (nothing is allocated).
  auto huge_vocab = header(512, std::numeric_limits<std::int32_t>::max(), 1) + std::string(2048 + 64, '\0');
  EXPECT_NE(parse_error(huge_vocab).find("truncated"), std::string::npos);
  // Sizes whose product passes 2^64: saturated, still "truncated".
  const auto huge_all = header(std::numeric_limits<std::int32_t>::max(), std::numeric_limits<std::int32_t>::max(),
                               std::numeric_limits<std::int32_t>::max());
  EXPECT_NE(parse_error(huge_all).find("needs more than 2^64"), std::string::npos);
  // One byte short, one byte over.
  const auto cut = parse_error(good.substr(0, good.size() - 1));
  EXPECT_NE(cut.find("truncated"), std::string::npos);
  EXPECT_NE(cut.find("2 of 3 chunks complete"), std::string::npos) << cut;
  EXPECT_NE(parse_error(good + "x").find("1 more than its header"), std::string::npos);
  // Sizes out of range.
  EXPECT_NE(parse_error(header(2, 10, 1) + std::string(8, '\0')).find("n_ctx = 2"), std::string::npos);
  EXPECT_NE(parse_error(header(-5, 10, 1)).find("n_ctx = -5"), std::string::npos);
  EXPECT_NE(parse_error(header(9, 0, 1)).find("n_vocab = 0"), std::string::npos);
  EXPECT_NE(parse_error(header(9, -1, 1)).find("n_vocab = -1"), std::string::npos);
  EXPECT_NE(parse_error(header(9, 10, 0)).find("n_chunk = 0"), std::string::npos);
}

// Any other command that reads a tensor (io::load_tensor) says what the file is.
TEST(llama_kl_base, load_tensor_names_the_format) {
  temp_dir d;
  const auto path = d.path("run.kld");
  numprobe::testing::write_llama_kl_file(path, make_run(9, 301, 3, 16).bytes());
  try {
    (void)numprobe::io::load_tensor(path);
    ADD_FAILURE() << "no error";
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), numprobe::exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find("a llama-perplexity --kl-divergence-base file"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(numprobe::io::is_llama_kl_base(path));
  EXPECT_FALSE(numprobe::io::is_llama_kl_base(d.path("missing")));
  EXPECT_FALSE(numprobe::io::is_llama_kl_base(d.dir.string()));
}

TEST(llama_kl_base, a_token_outside_the_vocabulary_is_an_input_error) {
  auto run = make_run(9, 301, 3, 15);
  run.tokens[9 + 4 + 2] = 301;  // predicted by chunk 1's row 1 (overall row 5)
  const auto b = parse_bytes(run.bytes(), "bad_token.kld");
  try {
    (void)b.next_tokens();
    ADD_FAILURE() << "no error";
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), numprobe::exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find("token id 301 at index 15 (predicted by row 5)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
