# Runs PROGRAM with every GPU hidden (CUDA_VISIBLE_DEVICES=-1) and checks the documented behaviour: each GPU benchmark
# is skipped with "no CUDA device: ...", and the exit status is 77.
# An empty value would unset the variable in CMake; -1 is an index that hides every device.
set(ENV{CUDA_VISIBLE_DEVICES} "-1")
execute_process(COMMAND "${PROGRAM}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 77)
  message(FATAL_ERROR "expected exit status 77 without a CUDA device, got ${rc}")
endif()
if(NOT "${out}${err}" MATCHES "ERROR OCCURRED: 'no CUDA device: |error_message.*no CUDA device: ")
  message(FATAL_ERROR "expected every benchmark to be skipped with 'no CUDA device: ...'")
endif()
