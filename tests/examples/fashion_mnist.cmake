# The checks on examples/fashion_mnist that a regex over its output cannot make:
#
#   cmake -DPROGRAM=<exe> -DWORK_DIR=<dir> -DARGS="--limit;2000;..." -DMODE=train [-DEXPECT_OUTPUT=<regex>] -P fashion_mnist.cmake
#     one short run: exit 0, metrics.csv with its header and one row per epoch, the checkpoint, the
#     loss below chance level (ln 10 = 2.303) and the test accuracy far above it (10%), and
#     metrics.png whenever gnuplot is on PATH; its output matches EXPECT_OUTPUT when given.
#   cmake -DPROGRAM=<exe> -DWORK_DIR=<dir> -DARGS=... -DMODE=resume -P fashion_mnist.cmake
#     two epochs straight against one epoch, a stop, and --resume for the second: the final
#     checkpoints must be byte-identical, and so must metrics.csv but for its seconds column.
#   cmake -DPROGRAM=<exe> -DWORK_DIR=<dir> -DARGS=... -DMODE=no_gnuplot -P fashion_mnist.cmake
#     with no gnuplot on PATH: it says so, skips metrics.png and still writes metrics.csv.
#   cmake ... -DMODE=distributed_train -DMPIEXEC="mpiexec;--allow-run-as-root;--oversubscribe;-n" [-DRANK_OPTIONS=...] -P ...
#     --distributed on 2 ranks, each given its own --out (one mpirun, two programs): rank 0's
#     directory holds the files and the loss fell, rank 1's was never made, the progress bar printed
#     one line for the epoch, no redraws (mpirun gives ranks a terminal); a second run gives
#     bitwise the same checkpoint and metrics.csv (but for its seconds).
#   cmake ... -DMODE=distributed_resume -DMPIEXEC=... -P fashion_mnist.cmake
#     the resume check above, with every run on 2 ranks; then --resume on 1 rank must fail.
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

# metrics.csv in `directory`: its header, a loss below chance level (ln 10 = 2.303) and a test
# accuracy far above it (10%), and metrics.png whenever gnuplot is on PATH.
function(check_trained directory)
  foreach(file metrics.csv checkpoint.safetensors)
    if(NOT EXISTS ${directory}/${file})
      message(FATAL_ERROR "no ${directory}/${file}")
    endif()
  endforeach()
  file(STRINGS ${directory}/metrics.csv lines)
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
  if(gnuplot AND NOT EXISTS ${directory}/metrics.png)
    message(FATAL_ERROR "gnuplot is at ${gnuplot} but ${directory}/metrics.png was not written")
  endif()
endfunction()

# The final checkpoints and metrics.csv (without its seconds) of two runs must be byte-identical.
function(check_identical first second what)
  file(SHA256 ${first}/checkpoint.safetensors first_hash)
  file(SHA256 ${second}/checkpoint.safetensors second_hash)
  rows_without_seconds(${first}/metrics.csv first_rows)
  rows_without_seconds(${second}/metrics.csv second_rows)
  if(NOT first_rows STREQUAL second_rows)
    message(FATAL_ERROR "metrics.csv differs:\n  ${first}: ${first_rows}\n  ${second}: ${second_rows}")
  endif()
  if(NOT first_hash STREQUAL second_hash)
    message(FATAL_ERROR "the final checkpoints differ: ${first_hash} vs ${second_hash}")
  endif()
  message("${what}")
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
if(MODE MATCHES "^distributed")
  if(NOT DEFINED MPIEXEC)
    message(FATAL_ERROR "fashion_mnist.cmake: MODE ${MODE} needs -DMPIEXEC=...")
  endif()
  set(LAUNCHER ${MPIEXEC} 2)
  list(APPEND ARGS --distributed)
endif()

if(MODE STREQUAL "train")
  run(${WORK_DIR})
  check_trained(${WORK_DIR})
  if(DEFINED EXPECT_OUTPUT AND NOT output MATCHES "${EXPECT_OUTPUT}")
    message(FATAL_ERROR "the output does not match '${EXPECT_OUTPUT}'")
  endif()
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
elseif(MODE STREQUAL "distributed_train")
  # One job, two programs (MPI's MPMD form): rank 0 writes to rank0/, rank 1 is told rank1/.
  # mpirun's per-rank options (RANK_OPTIONS, e.g. -x for the sanitizers) hold for one program each.
  execute_process(COMMAND ${MPIEXEC} 1 ${PROGRAM} ${ARGS} --out ${WORK_DIR}/rank0 :
                          ${RANK_OPTIONS} -n 1 ${PROGRAM} ${ARGS} --out ${WORK_DIR}/rank1
                  RESULT_VARIABLE exit_code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${PROGRAM} ${ARGS} on 2 ranks\n${out}${err}")
  if(NOT exit_code STREQUAL "0")
    message(FATAL_ERROR "exited with ${exit_code}")
  endif()
  check_trained(${WORK_DIR}/rank0)
  if(EXISTS ${WORK_DIR}/rank1)
    message(FATAL_ERROR "rank 1 made ${WORK_DIR}/rank1: only rank 0 writes files")
  endif()
  string(REGEX MATCHALL "final test accuracy" finals "${out}")
  list(LENGTH finals final_count)
  if(NOT final_count EQUAL 1 OR NOT out MATCHES "distributed: 2 ranks, each 1000 training images per epoch")
    message(FATAL_ERROR "expected rank 0 alone to print, once, the 2 ranks and the final accuracy")
  endif()
  # mpirun gives each rank a pseudo-terminal even though this output goes to a pipe: the progress
  # bar must still print one line per epoch, never a carriage-return redraw.
  if(out MATCHES "\r" OR NOT out MATCHES "\nepoch 1/1 2000/2000  loss [0-9.]+  acc [0-9.]+  test_acc [0-9.]+  ")
    message(FATAL_ERROR "expected one line for the epoch, without carriage returns")
  endif()
  run(${WORK_DIR}/again)
  check_identical(${WORK_DIR}/rank0 ${WORK_DIR}/again "two runs on 2 ranks bitwise identical")
elseif(MODE STREQUAL "distributed_resume" OR MODE STREQUAL "resume")
  run(${WORK_DIR}/straight --epochs 2)
  run(${WORK_DIR}/resumed --epochs 2 --stop-after 1)
  run(${WORK_DIR}/resumed --epochs 2 --resume)
  rows_without_seconds(${WORK_DIR}/straight/metrics.csv straight_rows)
  list(LENGTH straight_rows row_count)
  if(NOT row_count EQUAL 3)
    message(FATAL_ERROR "metrics.csv of the straight run has ${row_count} lines, expected a header and 2 epochs")
  endif()
  check_identical(${WORK_DIR}/straight ${WORK_DIR}/resumed "resumed run bitwise identical to the straight one")
  if(MODE STREQUAL "distributed_resume")
    # Resuming on another number of ranks: the checkpoint holds 2 dropout generators, 1 is asked for.
    execute_process(COMMAND ${MPIEXEC} 1 ${PROGRAM} ${ARGS} --epochs 3 --resume --out ${WORK_DIR}/straight
                    RESULT_VARIABLE exit_code OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(exit_code STREQUAL "0" OR NOT "${out}${err}" MATCHES "holds the state of 2 random generator\\(s\\), but 1 were given")
      message(FATAL_ERROR "resuming 2 ranks' checkpoint on 1 rank: expected an error naming the generators, got "
                          "exit ${exit_code}:\n${out}${err}")
    endif()
  endif()
else()
  message(FATAL_ERROR "fashion_mnist.cmake: unknown MODE '${MODE}'")
endif()
