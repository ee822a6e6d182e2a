// `numprobe kl` with llama-perplexity --kl-divergence-base files (issue 29 item 6), through the
// real binary: a llama.cpp base against candidate logits, tokens taken from the file, the JSON
// fields it adds; hostile files exit 2 with one line naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "numprobe/base/rng.hpp"
#include "numprobe/io/npy.hpp"
#include "support/llama_kl_writer.hpp"
#include "support/run_command.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using numprobe::testing::run_numprobe;

// 4 chunks of n_ctx 16: 7 scored rows each (positions 8..14), V = 200.
struct llama_files {
  fs::path dir = fs::temp_directory_path() / ("numprobe_cli_llama_kl_" + std::to_string(::getpid()));
  static constexpr std::int32_t n_ctx = 16, n_vocab = 200, n_chunk = 4, rows = 28;
  std::vector<std::int32_t> tokens;
  std::string base, cand, bytes;
  llama_files() {
    fs::create_directories(dir);
    for (int i = 0; i < n_ctx * n_chunk; ++i) tokens.push_back((i * 37 + 5) % n_vocab);
    std::vector<std::vector<float>> b;
    std::vector<float> c;
    for (int r = 0; r < rows; ++r) {
      std::vector<float> row(n_vocab);
      for (int i = 0; i < n_vocab; ++i) {
        const auto at = static_cast<std::uint64_t>(r * n_vocab + i);
        row[i] = static_cast<float>(3.0 * numprobe::normal_at(4, 1, at));
        c.push_back(row[i] + static_cast<float>(0.3 * numprobe::normal_at(4, 2, at)));
      }
      b.push_back(std::move(row));
    }
    bytes = numprobe::testing::llama_kl_file_bytes(n_ctx, n_vocab, n_chunk, tokens, b);
    base = path("base.dat");  // llama-perplexity's files have no extension of their own
    numprobe::testing::write_llama_kl_file(base, bytes);
    cand = path("cand.npy");
    numprobe::io::write_npy(cand, std::vector<std::uint64_t>{rows, n_vocab}, c);
  }
  ~llama_files() { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  std::string with_bytes(const std::string& name, const std::string& b) const {
    const auto p = path(name);
    numprobe::testing::write_llama_kl_file(p, b);
    return p;
  }
};

TEST(cli_llama_kl, base_file_against_candidate_logits) {
  llama_files f;
  const auto r = run_numprobe("kl " + f.base + " " + f.cand + " --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["rows"], 28);
  EXPECT_EQ(j["vocab"], 200);
  EXPECT_EQ(j["inputs"]["base_dtype"], "llama_kld_base");
  EXPECT_EQ(j["inputs"]["candidate_dtype"], "f32");
  EXPECT_EQ(j["inputs"]["tokens"], f.base) << "tokens come from the base file";
  EXPECT_EQ(j["llama"]["n_ctx"], 16);
  EXPECT_EQ(j["llama"]["n_chunk"], 4);
  EXPECT_EQ(j["llama"]["first_scored"], 8);
  EXPECT_EQ(j["llama"]["rows_per_chunk"], 7);
  for (const char* k : {"mean", "median", "p99", "p999", "p95", "p001"}) EXPECT_TRUE(j["kld"][k].is_number()) << k;
  for (const char* k : {"median", "p90", "p99", "p999"}) EXPECT_TRUE(j["kld_nearest_rank"][k].is_number()) << k;
  EXPECT_GT(j["kld"]["mean"].get<double>(), 0.0);
  EXPECT_TRUE(j["ppl"]["ratio"].is_number());
  EXPECT_GT(j["delta_p_token"]["rms"].get<double>(), 0.0);
  EXPECT_TRUE(j["delta_p_token"]["rms_stderr"].is_number());
  EXPECT_TRUE(j["delta_p"]["rms"].is_number()) << "kl's own dp stays";
  // worst[].position: the row's token index in the file's text (chunk 16 + 8 + i).
  for (const auto& w : j["worst"]) {
    const std::int64_t row = w["row"];
    EXPECT_EQ(w["position"].get<std::int64_t>(), row / 7 * 16 + 8 + row % 7);
  }
  EXPECT_NE(j["case"].get<std::string>().find("base=llama_kld_base"), std::string::npos);
}

TEST(cli_llama_kl, text_report_names_the_llama_layout_and_dp_kind) {
  llama_files f;
  const auto r = run_numprobe("kl " + f.base + " " + f.cand);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("4 chunks of n_ctx 16: positions 8..14 of each scored"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("RMS dp (base top-1)"), std::string::npos) << r.out;
  // Without tokens (two tensors), kl's own dp carries its label.
  const auto t = run_numprobe("kl " + f.cand + " " + f.cand);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("Mean dp (base top-1)"), std::string::npos) << t.out;
}

TEST(cli_llama_kl, candidate_file_and_tokens_file) {
  llama_files f;
  // A stored file against itself: exactly 0.
  const auto same = run_numprobe("kl " + f.base + " " + f.base + " --json -");
  ASSERT_EQ(same.exit_code, 0) << same.err;
  const auto j = json::parse(same.out);
  EXPECT_EQ(j["kld"]["max"], 0.0);
  EXPECT_EQ(j["top1_agreement"], 1.0);
  // A stored file as the candidate of a tensor base, and as --tokens of two tensors.
  const auto rev = run_numprobe("kl " + f.cand + " " + f.base + " --json -");
  ASSERT_EQ(rev.exit_code, 0) << rev.err;
  EXPECT_EQ(json::parse(rev.out)["inputs"]["candidate_dtype"], "llama_kld_base");
  const auto tok = run_numprobe("kl " + f.cand + " " + f.cand + " --tokens " + f.base + " --json -");
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  EXPECT_EQ(json::parse(tok.out)["ppl"]["ratio"], 1.0);
  // --positions bins the rows by their place in the chunk (seq_len = rows per chunk).
  const auto pos = run_numprobe("kl " + f.base + " " + f.cand + " --positions 7 --json -");
  ASSERT_EQ(pos.exit_code, 0) << pos.err;
  EXPECT_EQ(json::parse(pos.out)["positions"]["seq_len"], 7);
  EXPECT_EQ(json::parse(pos.out)["positions"]["sequences"], 4);
}

void expect_input_error(const std::string& args, const std::string& needle) {
  const auto r = run_numprobe(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}

std::string header(std::int32_t n_ctx, std::int32_t n_vocab, std::int32_t n_chunk) {
  std::string h("_logits_", 8);
  for (std::int32_t v : {n_ctx, n_vocab, n_chunk}) h.append(reinterpret_cast<const char*>(&v), 4);
  return h;
}

TEST(cli_llama_kl, hostile_files_exit_2) {
  llama_files f;
  const auto truncated = f.with_bytes("truncated.kld", f.bytes.substr(0, f.bytes.size() - 100));
  expect_input_error("kl " + truncated + " " + f.cand, "truncated.kld: truncated");
  const auto huge = f.with_bytes("huge.kld", header(16, std::numeric_limits<std::int32_t>::max(), 4) +
                                                 f.bytes.substr(20));
  expect_input_error("kl " + huge + " " + f.cand, "huge.kld: truncated");
  auto magic = f.bytes;
  magic[1] = 'L';  // "_Logits_": not this format, nor any other kl reads
  const auto wrong = f.with_bytes("wrong_magic.kld", magic);
  expect_input_error("kl " + wrong + " " + f.cand, "wrong_magic.kld");
  const auto short_ctx = f.with_bytes("ctx.kld", header(2, 200, 1) + std::string(8, '\0'));
  expect_input_error("kl " + short_ctx + " " + f.cand, "n_ctx = 2");
  // Row count: the candidate has 28 rows; a file with 3 chunks has 21.
  auto three = header(16, 200, 3) + f.bytes.substr(20, 4 * 48) +
               f.bytes.substr(20 + 4 * 64, 21 * (200 + 4) * 2);
  expect_input_error("kl " + f.with_bytes("three.kld", three) + " " + f.cand, "shape mismatch");
  // Two stored files of different texts.
  auto other = f.bytes;
  other[20 + 4 * 3] ^= 1;  // token 3
  expect_input_error("kl " + f.base + " " + f.with_bytes("other.kld", other), "token 3 is");
}

}  // namespace
