#pragma once
// Forwarder: error.hpp moved to numprobe/base/ (the layer below formats, docs/architecture.md) so
// that formats and the GPU kernels can use it without knowing core. Kept so that existing
// includers need not change in the same step; new code includes numprobe/base/error.hpp.
#include "numprobe/base/error.hpp"
