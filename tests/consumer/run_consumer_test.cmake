# Configures, builds and runs tests/consumer against tapegrad, one of two ways:
#   installed:     TG_BUILD_DIR and TG_PREFIX set: installs the built tapegrad into the prefix and
#                  the consumer finds it with find_package;
#   add_subdirectory: TG_SOURCE_DIR set: the consumer adds tapegrad's source tree as a subproject,
#                  built in TG_BINARY_DIR when that is set (inside the consumer's build otherwise).
# Every step's failure fails the test.
#   cmake [-DTG_BUILD_DIR=... -DTG_PREFIX=... | -DTG_SOURCE_DIR=...] -DTG_CONSUMER_SOURCE=...
#         -DTG_CONSUMER_BUILD=... -DTG_BUILD_TYPE=... -DTG_CXX_COMPILER=... -P run_consumer_test.cmake
set(required TG_CONSUMER_SOURCE TG_CONSUMER_BUILD TG_BUILD_TYPE TG_CXX_COMPILER)
if(NOT DEFINED TG_SOURCE_DIR)
  list(APPEND required TG_BUILD_DIR TG_PREFIX)
endif()
foreach(var ${required})
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

file(REMOVE_RECURSE "${TG_CONSUMER_BUILD}")
if(DEFINED TG_SOURCE_DIR)
  set(locate "-DTG_SOURCE_DIR=${TG_SOURCE_DIR}")
  if(DEFINED TG_BINARY_DIR)
    file(REMOVE_RECURSE "${TG_BINARY_DIR}")
    list(APPEND locate "-DTG_BINARY_DIR=${TG_BINARY_DIR}")
  endif()
else()
  file(REMOVE_RECURSE "${TG_PREFIX}")
  run_step(install "${CMAKE_COMMAND}" --install "${TG_BUILD_DIR}" --prefix "${TG_PREFIX}" --config "${TG_BUILD_TYPE}")
  set(locate "-DCMAKE_PREFIX_PATH=${TG_PREFIX}")
endif()
# The parent build's compiler launcher (ccache), so that rebuilding tapegrad as a subproject hits its cache.
if(TG_CXX_COMPILER_LAUNCHER)
  list(APPEND locate "-DCMAKE_CXX_COMPILER_LAUNCHER=${TG_CXX_COMPILER_LAUNCHER}")
endif()
run_step(configure "${CMAKE_COMMAND}" -S "${TG_CONSUMER_SOURCE}" -B "${TG_CONSUMER_BUILD}" ${locate}
         "-DCMAKE_BUILD_TYPE=${TG_BUILD_TYPE}" "-DCMAKE_CXX_COMPILER=${TG_CXX_COMPILER}")
# As many jobs as cores, not an unbounded make -j: ctest runs other tests beside this one.
cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
run_step(build "${CMAKE_COMMAND}" --build "${TG_CONSUMER_BUILD}" --config "${TG_BUILD_TYPE}" --parallel ${cores})
# Single-config generators put app in the build dir; multi-config ones in a per-config subdir.
set(app "${TG_CONSUMER_BUILD}/app")
if(NOT EXISTS "${app}")
  set(app "${TG_CONSUMER_BUILD}/${TG_BUILD_TYPE}/app")
endif()
run_step(run "${app}")
