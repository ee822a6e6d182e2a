#pragma once
// Subcommand registration: each subcommand lives in its own file as a setup_X(app) function that
// adds its options and a callback; main.cpp lists them, one registration line each.
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace numprobe::cli {

// The exit code a subcommand's callback wants (0..3); set by the callback, read by main.
int& exit_status();

void setup_backends(CLI::App& app);
void setup_formats(CLI::App& app);
void setup_quant(CLI::App& app);
void setup_attention(CLI::App& app);
void setup_drift(CLI::App& app);
void setup_bisect(CLI::App& app);
void setup_audit(CLI::App& app);
void setup_kvcache(CLI::App& app);
void setup_softmax(CLI::App& app);
void setup_scan(CLI::App& app);
void setup_convert(CLI::App& app);
void setup_kl(CLI::App& app);
void setup_run(CLI::App& app);
void setup_merge(CLI::App& app);
void setup_invariance(CLI::App& app);
void setup_mma(CLI::App& app);
void setup_burnin(CLI::App& app);

}  // namespace numprobe::cli
