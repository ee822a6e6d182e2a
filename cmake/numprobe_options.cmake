# Compile options shared by every numprobe target.
add_library(numprobe_options INTERFACE)
target_compile_options(numprobe_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
  $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wno-restrict>)  # a g++ warning; clang has no such option
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
    target_compile_options(numprobe_options INTERFACE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
  endif()
endif()
target_link_libraries(numprobe_options INTERFACE OpenMP::OpenMP_CXX)

# numprobe_private_headers(target): the repository root as a PRIVATE include directory, for a
# target built inside numprobe that includes private headers (its own layer's, or those of a
# layer below it, e.g. src/providers/provider.hpp from probes; docs/architecture.md). include/
# comes first, as it did when the root travelled with every library, so no command line moves.
function(numprobe_private_headers target)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR})
endfunction()

# numprobe_add_library(name SOURCES... [DEPS...]) with a numprobe:: alias.
function(numprobe_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT A_SOURCES)  # a layer whose sources are all headers so far
    set(A_SOURCES ${PROJECT_SOURCE_DIR}/cmake/empty.cpp)
  endif()
  add_library(${name} STATIC ${A_SOURCES})
  add_library(numprobe::${name} ALIAS ${name})
  # The interface is the public headers (include/numprobe/<layer>/) only. The repository root,
  # for the private headers (src/<layer>/x.hpp, probes/x.hpp, reports/x.hpp), is each target's
  # own: it does not travel to dependents or to a project that adds numprobe as a
  # subdirectory (docs/architecture.md, "Include directories per layer").
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:include>)
  numprobe_private_headers(${name})
  target_link_libraries(${name} PUBLIC ${A_DEPS} PRIVATE numprobe_options ${A_PRIVATE_DEPS})
endfunction()
