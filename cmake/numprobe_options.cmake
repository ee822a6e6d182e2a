# Compile options shared by every numprobe target.
add_library(numprobe_options INTERFACE)
target_compile_options(numprobe_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-restrict>)
if(NUMPROBE_X86_64_V3 AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  # x86-64-v3 (AVX2, FMA) runs on both the development machine and the GPU machine;
  # -march=native would make binaries that fail on the other one.
  target_compile_options(numprobe_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=x86-64-v3>)
endif()
if(NUMPROBE_SANITIZE)
  target_compile_options(numprobe_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer>)
  target_link_options(numprobe_options INTERFACE -fsanitize=address,undefined)
endif()
target_link_libraries(numprobe_options INTERFACE OpenMP::OpenMP_CXX)

# numprobe_add_library(name SOURCES... [DEPS...]) with a numprobe:: alias.
function(numprobe_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT A_SOURCES)  # a layer whose sources are all headers so far
    set(A_SOURCES ${PROJECT_SOURCE_DIR}/cmake/empty.cpp)
  endif()
  add_library(${name} STATIC ${A_SOURCES})
  add_library(numprobe::${name} ALIAS ${name})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:include>)
  target_link_libraries(${name} PUBLIC ${A_DEPS} PRIVATE numprobe_options ${A_PRIVATE_DEPS})
endfunction()
