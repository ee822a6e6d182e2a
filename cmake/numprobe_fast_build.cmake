# A quicker cold build: scripts/run.sh (the first run), scripts/test.sh and .ci/run (tests
# included), and the Python package. Off by default, so that a development tree's incremental
# build still recompiles one file per edit. Neither changes a result (the default scenario's
# numbers are the same, bit for bit: docs/measurements/first_run_2026-12-02.txt):
#   NUMPROBE_UNITY_BUILD  compiles each target's sources NUMPROBE_UNITY_BATCH_SIZE at a time in
#                         one translation unit (CMake's unity build), so every header is parsed
#                         once per batch, not once per file. A batch shares one anonymous
#                         namespace, so file-local names must differ within a target;
#   NUMPROBE_PCH          precompiles the standard and third-party headers that most files
#                         include, once per target.
option(NUMPROBE_UNITY_BUILD "Unity build of every C++ target (quicker cold build)" OFF)
set(NUMPROBE_UNITY_BATCH_SIZE 16 CACHE STRING "Sources per unity translation unit (0: one per target)")
option(NUMPROBE_PCH "Precompile the common standard and third-party headers" OFF)

if(NUMPROBE_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE ${NUMPROBE_UNITY_BATCH_SIZE})
endif()

# numprobe_fast_build_finish(): after the targets exist. Sources that cannot share a translation
# unit with their neighbours are compiled on their own.
function(numprobe_fast_build_finish)
  if(NUMPROBE_UNITY_BUILD)
    foreach(file IN LISTS NUMPROBE_UNITY_SKIP)  # relative to the repository root
      get_filename_component(dir ${PROJECT_SOURCE_DIR}/${file} DIRECTORY)
      set_source_files_properties(${PROJECT_SOURCE_DIR}/${file} DIRECTORY ${dir}
        PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endforeach()
  endif()
  if(NUMPROBE_PCH)
    foreach(t IN LISTS NUMPROBE_PCH_TARGETS)
      target_precompile_headers(${t} PRIVATE ${NUMPROBE_PCH_HEADERS})
    endforeach()
  endif()
endfunction()

# Compiled on their own (relative to the repository root): none at present. A file-local name
# that meets a neighbour's in a batch is renamed instead, so that both builds stay one program.
set(NUMPROBE_UNITY_SKIP)
set(NUMPROBE_PCH_TARGETS numprobe_formats numprobe_core numprobe_kernels_emu numprobe_metrics
  numprobe_reference numprobe_providers numprobe_probes numprobe_reports numprobe_scenario numprobe)
set(NUMPROBE_PCH_HEADERS <algorithm> <cmath> <cstdint> <string> <vector> <fmt/format.h>
  <nlohmann/json.hpp>)
