# The checks on examples/fashion_mnist that a regex over its output cannot make:
#
#   cmake -DPROGRAM=<exe> -DWORK_DIR=<dir> -DARGS="--limit;2000;..." -DMODE=train  -P fashion_mnist.cmake
#     one short run: exit 0, metrics.csv with its header and one row per epoch, the checkpoint, the
#     loss below chance level (ln 10 = 2.303) and the test accuracy far above it (10%), and
#     metrics.png whenever gnuplot is on PATH.
#   cmake -DPROGRAM=<exe> -DWORK_DIR=<dir> -DARGS=... -DMODE=resume -P fashion_mnist.cmake
#     two epochs straight against one epoch, a stop, and --resume for the second: the final
#     checkpoints must be byte-identical, and so must metrics.csv but for its seconds column.
#   cmake -DPROGRAM=<exe> -DWORK_DIR=<dir> -DARGS=... -DMODE=no_gnuplot -P fashion_mnist.cmake
#     with no gnuplot on PATH: it says so, skips metrics.png and still writes metrics.csv.
foreach(required PROGRAM WORK_DIR ARGS MODE)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "fashion_mnist.cmake: -D${required}=... is required")
  endif()
endforeach()

# Runs the program with ARGS and the extra arguments into `out_dir`, its output into `output`
# (when given); fails on a non-zero exit. LAUNCHER may prefix the command (cmake -E env ...).
function(run out_dir)
  execute_process(COMMAND ${LAUNCHER} ${PROGRAM} ${ARGS} --out ${out_dir} ${ARGN}
                  RESULT_VARIABLE exit_code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${PROGRAM} ${ARGS} --out ${out_dir} ${ARGN}\n${out}${err}")
  if(NOT exit_code STREQUAL "0")
    message(FATAL_ERROR "exited with ${exit_code}")
  endif()
  set(output "${out}${err}" PARENT_SCOPE)
endfunction()

# metrics.csv's rows without the seconds column (the last), one list element per row.
function(rows_without_seconds csv result)
  file(STRINGS ${csv} lines)
  set(rows "")
  foreach(line ${lines})
    string(REGEX REPLACE ",[^,]*$" "" row "${line}")
    list(APPEND rows "${row}")
  endforeach()
  set(${result} "${rows}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})

if(MODE STREQUAL "train")
  run(${WORK_DIR})
  foreach(file metrics.csv checkpoint.safetensors)
    if(NOT EXISTS ${WORK_DIR}/${file})
      message(FATAL_ERROR "no ${WORK_DIR}/${file}")
    endif()
  endforeach()
  file(STRINGS ${WORK_DIR}/metrics.csv lines)
  list(GET lines 0 header)
  if(NOT header STREQUAL "epoch,train_loss,train_acc,test_loss,test_acc,lr,seconds")
    message(FATAL_ERROR "metrics.csv's header is '${header}'")
  endif()
  list(GET lines 1 first_epoch)
  string(REPLACE "," ";" fields "${first_epoch}")
  list(GET fields 1 train_loss)
  list(GET fields 3 test_loss)
  list(GET fields 4 test_accuracy)
  # CMake's if() compares integers only: compare thousandths.
  foreach(name train_loss test_loss test_accuracy)
    string(REGEX MATCH "^([0-9]+)\\.([0-9][0-9][0-9])" digits "${${name}}")
    if(NOT digits)
      message(FATAL_ERROR "metrics.csv: ${name} '${${name}}' is not a number")
    endif()
    math(EXPR ${name}_milli "${CMAKE_MATCH_1} * 1000 + 1${CMAKE_MATCH_2} - 1000")
  endforeach()
  # Chance level is ln 10 = 2.303 (a uniform guess); label smoothing keeps even a perfect model's
  # loss near 0.5. 2,000 images in one epoch reach ≈ 1.4 and ≈ 70%.
  if(train_loss_milli GREATER_EQUAL 2100 OR test_loss_milli GREATER_EQUAL 2000)
    message(FATAL_ERROR "the loss did not fall from ln 10 = 2.303: train ${train_loss}, test ${test_loss}")
  endif()
  if(test_accuracy_milli LESS 500)
    message(FATAL_ERROR "test accuracy ${test_accuracy} is not far above chance (0.1)")
  endif()
  find_program(gnuplot gnuplot)
  if(gnuplot AND NOT EXISTS ${WORK_DIR}/metrics.png)
    message(FATAL_ERROR "gnuplot is at ${gnuplot} but ${WORK_DIR}/metrics.png was not written")
  endif()
elseif(MODE STREQUAL "resume")
  run(${WORK_DIR}/straight --epochs 2)
  run(${WORK_DIR}/resumed --epochs 2 --stop-after 1)
  run(${WORK_DIR}/resumed --epochs 2 --resume)
  file(SHA256 ${WORK_DIR}/straight/checkpoint.safetensors straight_hash)
  file(SHA256 ${WORK_DIR}/resumed/checkpoint.safetensors resumed_hash)
  rows_without_seconds(${WORK_DIR}/straight/metrics.csv straight_rows)
  rows_without_seconds(${WORK_DIR}/resumed/metrics.csv resumed_rows)
  list(LENGTH straight_rows row_count)
  if(NOT row_count EQUAL 3)
    message(FATAL_ERROR "metrics.csv of the straight run has ${row_count} lines, expected a header and 2 epochs")
  endif()
  if(NOT straight_rows STREQUAL resumed_rows)
    message(FATAL_ERROR "metrics.csv differs:\n  straight: ${straight_rows}\n  resumed:  ${resumed_rows}")
  endif()
  if(NOT straight_hash STREQUAL resumed_hash)
    message(FATAL_ERROR "the final checkpoints differ: ${straight_hash} vs ${resumed_hash}")
  endif()
  message("resumed run bitwise identical to the straight one")
elseif(MODE STREQUAL "no_gnuplot")
  # A PATH with nothing on it: the program must not need any other tool.
  file(MAKE_DIRECTORY ${WORK_DIR}/empty_path)
  set(LAUNCHER ${CMAKE_COMMAND} -E env PATH=${WORK_DIR}/empty_path)
  run(${WORK_DIR}/out)
  if(NOT output MATCHES "gnuplot not found: metrics.png skipped")
    message(FATAL_ERROR "no 'gnuplot not found: metrics.png skipped' in the output")
  endif()
  if(NOT EXISTS ${WORK_DIR}/out/metrics.csv OR EXISTS ${WORK_DIR}/out/metrics.png)
    message(FATAL_ERROR "expected metrics.csv and no metrics.png in ${WORK_DIR}/out")
  endif()
else()
  message(FATAL_ERROR "fashion_mnist.cmake: unknown MODE '${MODE}'")
endif()
