#pragma once
// `--backend exec:CMD` and `--backend exec-worker:CMD`: any external program as the kernel
// under test. Per case numprobe writes the inputs as .npy files plus case.json into a fresh
// temporary directory (exec_provider_files.hpp), runs the command with {in}, {out} and {case}
// substituted (no shell), with a time limit, and reads o.npy (and lse.npy) back. The worker
// variant keeps one process for the whole sweep (exec_provider_worker.hpp).
namespace numprobe {
void register_exec_provider();
}  // namespace numprobe
