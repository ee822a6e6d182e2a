# The compiler refuses an upward include (docs/architecture.md, "Include directories per
# layer"): run by ctest as `cmake -P` with the include directories of two layer targets.
#   -DCXX=compiler -DWORK=dir -DLOW_DIRS=a|b -DHIGH_DIRS=a|b [-DSTAGED=ON|OFF]
# LOW_DIRS are the bottom layer's (numprobe_formats), HIGH_DIRS those of a layer above it
# (numprobe_probes). Three compiles, each with -fsyntax-only:
#   allowed:  formats' own headers, public and private, and base's, with LOW_DIRS: compiles;
#   upward:   a probes header and a core header with LOW_DIRS: both refused, not found;
#   control:  the same probes header with HIGH_DIRS: compiles, so the refusal is the layer's
#             directory and not a broken header.
# Exit 0 when all three hold, 1 otherwise, 77 (skipped) when nothing was staged (configure
# warned: no symlinks or no python3).
if(NOT STAGED)
  message("layers: no per-layer include directories were staged (see the configure warning)")
  cmake_language(EXIT 77)
endif()
string(REPLACE "|" ";" low "${LOW_DIRS}")
string(REPLACE "|" ";" high "${HIGH_DIRS}")
list(TRANSFORM low PREPEND -I)
list(TRANSFORM high PREPEND -I)
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/allowed.cpp "#include \"numprobe/base/error.hpp\"
#include \"numprobe/formats/format.hpp\"
#include \"src/formats/rne_block_quantizer.hpp\"
int main() { return 0; }
")
set(upward_headers probes/kl/kl_probe.hpp numprobe/core/result.hpp)
set(failures 0)

function(compile name source dirs expect)  # expect: ok, or the header that must be missing
  execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only ${dirs} ${source}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(expect STREQUAL "ok")
    set(good FALSE)
    if(rc EQUAL 0)
      set(good TRUE)
    endif()
    set(what "compiles")
  else()
    set(good FALSE)
    # g++: "fatal error: H: No such file or directory"; clang: "fatal error: 'H' file not found"
    if(NOT rc EQUAL 0 AND out MATCHES "${expect}: No such file|'${expect}' file not found")
      set(good TRUE)
    endif()
    set(what "refused (${expect} not found)")
  endif()
  if(good)
    message("layers: ${name}: ${what}, as required")
  else()
    message("layers: FAIL ${name}: expected ${what}; exit ${rc}\n${out}")
    math(EXPR f "${failures} + 1")
    set(failures ${f} PARENT_SCOPE)
  endif()
endfunction()

compile("allowed (formats sees formats and base)" ${WORK}/allowed.cpp "${low}" ok)
foreach(h IN LISTS upward_headers)
  string(MAKE_C_IDENTIFIER ${h} stem)
  file(WRITE ${WORK}/upward_${stem}.cpp "#include \"${h}\"\nint main() { return 0; }\n")
  compile("upward (formats includes ${h})" ${WORK}/upward_${stem}.cpp "${low}" "${h}")
endforeach()
list(GET upward_headers 0 probes_header)
string(MAKE_C_IDENTIFIER ${probes_header} stem)
compile("control (probes includes ${probes_header})" ${WORK}/upward_${stem}.cpp "${high}" ok)
if(failures GREATER 0)
  message(FATAL_ERROR "layers: ${failures} of 4 compiles went the wrong way")
endif()
