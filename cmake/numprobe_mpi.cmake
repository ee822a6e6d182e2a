# MPI is optional and auto-detected, like the GPU toolchains (numprobe_gpu.cmake): with it, `run`
# and `scan` take --mpi (one rank per GPU, results gathered on rank 0, docs/scale.md); without it,
# --mpi says it needs an MPI build (exit 2). Only the numprobe executable links MPI.
set(NUMPROBE_ENABLE_MPI AUTO CACHE STRING "Build the --mpi mode with MPI (ON/OFF/AUTO)")
set(NUMPROBE_HAVE_MPI OFF)
if(NOT NUMPROBE_ENABLE_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(NUMPROBE_HAVE_MPI ON)
  elseif(NUMPROBE_ENABLE_MPI STREQUAL "ON")
    message(FATAL_ERROR "NUMPROBE_ENABLE_MPI=ON but no MPI (C++) was found (scripts/setup.sh --mpi installs Open MPI)")
  endif()
endif()
message(STATUS "numprobe: MPI ${NUMPROBE_HAVE_MPI}")
