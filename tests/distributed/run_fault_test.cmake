# Runs fault_rank under mpirun with 3 ranks and checks that the job ends by itself within TIMEOUT
# seconds with a non-zero status (and, for MODE throw and throw_async, tapegrad's message naming the failed rank).
#   cmake -DMPIEXEC=<mpirun and its flags, up to -np> -DPROGRAM=<fault_rank> -DMODE=exit|throw|exit_async|throw_async -DTIMEOUT=<s> -P run_fault_test.cmake
execute_process(COMMAND ${MPIEXEC} 3 ${PROGRAM} ${MODE}
  TIMEOUT ${TIMEOUT} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE errors)
message(STATUS "mpirun ended with: ${status}\n${output}${errors}")
if(status MATCHES "timeout")
  message(FATAL_ERROR "the healthy ranks still waited after ${TIMEOUT} s")
elseif(status EQUAL 0)
  message(FATAL_ERROR "mpirun reported success although rank 1 failed")
endif()
if(MODE MATCHES "^throw" AND NOT errors MATCHES "rank 1 of 3: uncaught: fault_rank: rank 1 fails on purpose")
  message(FATAL_ERROR "tapegrad's message about the uncaught exception is missing")
endif()
