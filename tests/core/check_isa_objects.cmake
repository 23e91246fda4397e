# Fails when an object file compiled for a vector level (tg_add_isa_kernels) defines a weak symbol —
# one the linker merges with same-named copies from other objects, keeping any one of them — outside
# that level's namespaces, with AVX (VEX/EVEX-encoded) code in it. Such a copy could replace the
# plain x86-64 one used by the rest of the library and fault on a CPU without AVX.
#   cmake -DOBJECTS=<object>:<object>:... -P check_isa_objects.cmake
string(REPLACE ":" ";" objects "${OBJECTS}")
set(offenders "")
foreach(object IN LISTS objects)
  execute_process(COMMAND nm -C --defined-only ${object} OUTPUT_VARIABLE symbols COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND objdump -d -C --no-show-raw-insn ${object} OUTPUT_VARIABLE disassembly
                  COMMAND_ERROR_IS_FATAL ANY)
  string(REPLACE "\n" ";" symbol_lines "${symbols}")
  foreach(line IN LISTS symbol_lines)
    if(NOT line MATCHES "^[0-9a-f]+ W (.+)$")
      continue()
    endif()
    set(symbol "${CMAKE_MATCH_1}")
    if(symbol MATCHES "::(v2|v3|avx512)::|helpers_(v2|v3|avx512)")
      continue()
    endif()
    # The function's body: from its label to the next blank line.
    string(FIND "${disassembly}" "<${symbol}>:\n" start)
    if(start EQUAL -1)
      continue()
    endif()
    string(SUBSTRING "${disassembly}" ${start} -1 body)
    string(FIND "${body}" "\n\n" end)
    string(SUBSTRING "${body}" 0 ${end} body)
    if(body MATCHES "%[yz]mm|\tv[a-z]")
      list(APPEND offenders "${object}: ${symbol}")
    endif()
  endforeach()
endforeach()
list(LENGTH objects count)
if(offenders)
  list(JOIN offenders "\n  " listing)
  message(FATAL_ERROR "weak symbols with AVX code outside the per-level namespaces:\n  ${listing}")
endif()
message(STATUS "${count} per-level objects: no weak symbol with AVX code outside their namespaces")
