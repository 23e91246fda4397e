# Installs the built tapegrad into a prefix, then configures, builds and runs tests/consumer
# against it. Every step's failure fails the test.
#   cmake -DTG_BUILD_DIR=... -DTG_PREFIX=... -DTG_CONSUMER_SOURCE=... -DTG_CONSUMER_BUILD=...
#         -DTG_BUILD_TYPE=... -DTG_CXX_COMPILER=... -P run_consumer_test.cmake
foreach(var TG_BUILD_DIR TG_PREFIX TG_CONSUMER_SOURCE TG_CONSUMER_BUILD TG_BUILD_TYPE TG_CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer_test.cmake: ${var} is not set")
  endif()
endforeach()

function(run_step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  message(STATUS "[${name}]\n${output}")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "consumer test: step '${name}' failed (${result})")
  endif()
endfunction()

file(REMOVE_RECURSE "${TG_PREFIX}" "${TG_CONSUMER_BUILD}")
run_step(install "${CMAKE_COMMAND}" --install "${TG_BUILD_DIR}" --prefix "${TG_PREFIX}" --config "${TG_BUILD_TYPE}")
run_step(configure "${CMAKE_COMMAND}" -S "${TG_CONSUMER_SOURCE}" -B "${TG_CONSUMER_BUILD}"
         "-DCMAKE_PREFIX_PATH=${TG_PREFIX}" "-DCMAKE_BUILD_TYPE=${TG_BUILD_TYPE}"
         "-DCMAKE_CXX_COMPILER=${TG_CXX_COMPILER}")
run_step(build "${CMAKE_COMMAND}" --build "${TG_CONSUMER_BUILD}" --config "${TG_BUILD_TYPE}")
# Single-config generators put app in the build dir; multi-config ones in a per-config subdir.
set(app "${TG_CONSUMER_BUILD}/app")
if(NOT EXISTS "${app}")
  set(app "${TG_CONSUMER_BUILD}/${TG_BUILD_TYPE}/app")
endif()
run_step(run "${app}")
