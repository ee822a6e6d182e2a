# ctest bench_reference_args: the bench's command line without running the benchmark.
# --help prints the usage and exits 0; a bad SEQ or an extra argument exits 2 with one line
# on stderr naming the argument. cmake -DBENCH=path/to/bench_reference -P this file.
function(expect rc_want out_regex)
  execute_process(COMMAND ${BENCH} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
    TIMEOUT 30)
  if(NOT rc STREQUAL "${rc_want}")
    message(FATAL_ERROR "bench_reference ${ARGN}: exit ${rc}, want ${rc_want}\nstdout: ${out}\nstderr: ${err}")
  endif()
  if(rc_want EQUAL 0)
    set(text "${out}")
  else()
    set(text "${err}")
    string(REGEX MATCHALL "\n" newlines "${err}")
    list(LENGTH newlines n)
    if(NOT n EQUAL 1 OR NOT out STREQUAL "")
      message(FATAL_ERROR "bench_reference ${ARGN}: want one line on stderr and nothing on stdout, "
        "got stdout '${out}' stderr '${err}'")
    endif()
  endif()
  if(NOT text MATCHES "${out_regex}")
    message(FATAL_ERROR "bench_reference ${ARGN}: output does not match '${out_regex}':\n${text}")
  endif()
endfunction()

expect(0 "^usage: bench_reference \\[SEQ\\]" --help)
expect(0 "^usage: bench_reference \\[SEQ\\]" -h)
expect(2 "^bench_reference: SEQ .*'--bogus'" --bogus)
expect(2 "^bench_reference: SEQ .*'12x'" 12x)
expect(2 "^bench_reference: SEQ .*'0'" 0)
expect(2 "^bench_reference: SEQ .*'99999999999999999999'" 99999999999999999999)
expect(2 "^bench_reference: one argument \\(SEQ\\) expected, got 2" 64 64)
