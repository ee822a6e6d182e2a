# Compile options shared by every numprobe target.
add_library(numprobe_options INTERFACE)
target_compile_options(numprobe_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
  $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wno-restrict>  # a g++ warning; clang has no such option
  # Every fp operation of an emulated kernel or a reference is rounded where the code says so:
  # no a * b + c contracted into an fma (g++ contracts by default, across statements, once FMA is
  # in the target; clang within one expression). A fused step is written as std::fma.
  $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>)
# A warning fails the build where asked (CI: .ci/run and scripts/test.sh under CI=true): the
# tree is warning-free under -Wall -Wextra with g++ and clang, and stays so.
option(NUMPROBE_WERROR "Treat C++ compiler warnings as errors" OFF)
if(NUMPROBE_WERROR)
  target_compile_options(numprobe_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
if(NUMPROBE_X86_64_V3 AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  # x86-64-v3 (AVX2, FMA) runs on both the development machine and the GPU machine;
  # -march=native would make binaries that fail on the other one.
  target_compile_options(numprobe_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=x86-64-v3>)
endif()
if(NUMPROBE_SANITIZE)
  target_compile_options(numprobe_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer>)
  target_link_options(numprobe_options INTERFACE -fsanitize=address,undefined)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # libFuzzer's coverage hooks in every library, so this one sanitizer tree also builds the
    # fuzz targets (tests/fuzz, run by scripts/fuzz.sh). The test binaries link no libFuzzer:
    # the ASan runtime supplies no-op hooks.
    # Not in the test programs (numprobe_add_test sets NUMPROBE_TEST_PROGRAM): they are not
    # fuzzed, and the hooks cost compile and run time. A target's own -fno-sanitize would come
    # before this interface option on the command line, and lose.
    target_compile_options(numprobe_options INTERFACE
      $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<NOT:$<BOOL:$<TARGET_PROPERTY:NUMPROBE_TEST_PROGRAM>>>>:-fsanitize=fuzzer-no-link>)
  endif()
endif()
target_link_libraries(numprobe_options INTERFACE OpenMP::OpenMP_CXX)

# numprobe_private_headers(target [SOURCES...]): what a target built inside numprobe may include,
# PRIVATE. A layer's target (its sources, or SOURCES, in a folder of the layer table) sees its
# layer's staged directory only: its own headers and those of the layers it knows about,
# public (numprobe/...) and private (src/<layer>/x.hpp, probes/<family>/x.hpp, reports/x.hpp), so an
# upward include does not compile. Any other target (bench, fuzz drivers) sees include/ and the
# repository root. cmake/numprobe_layers.cmake stages the directories from docs/architecture.md.
function(numprobe_private_headers target)
  _numprobe_header_sources(${target} ${ARGN})
  numprobe_layer_include_dirs(private public ${H_SOURCES})
  target_include_directories(${target} PRIVATE ${private})
endfunction()

# numprobe_add_library(name SOURCES... [DEPS...]) with a numprobe:: alias.
function(numprobe_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT A_SOURCES)  # a layer whose sources are all headers so far
    set(A_SOURCES ${PROJECT_SOURCE_DIR}/cmake/empty.cpp)
  endif()
  add_library(${name} STATIC ${A_SOURCES})
  add_library(numprobe::${name} ALIAS ${name})
  numprobe_layer_of_sources(layer ${A_SOURCES})
  if(NUMPROBE_LAYERS_STAGED AND NOT layer AND NOT A_SOURCES MATCHES "cmake/empty.cpp$")
    message(FATAL_ERROR "numprobe: ${name}'s sources are in no layer of docs/architecture.md")
  endif()
  # The interface is the public headers of the layer and those below it; the private headers
  # (src/<layer>/x.hpp, probes/<family>/x.hpp, reports/x.hpp) are each target's own: they do not travel
  # to dependents or to a project that adds numprobe as a subdirectory (docs/architecture.md,
  # "Include directories per layer").
  numprobe_public_headers(${name})
  numprobe_private_headers(${name})
  target_link_libraries(${name} PUBLIC ${A_DEPS} PRIVATE numprobe_options ${A_PRIVATE_DEPS})
endfunction()
