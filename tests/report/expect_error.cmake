# Runs COMMAND, which must fail with exit status 1, print an error matching EXPECTED, and
# leave MUST_NOT_EXIST unwritten.
file(REMOVE "${MUST_NOT_EXIST}")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
message("exit ${rc}: ${stderr}")
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected exit status 1, got ${rc}")
endif()
if(NOT stderr MATCHES "gpucmp-report: error: .*${EXPECTED}")
  message(FATAL_ERROR "expected an error matching '${EXPECTED}'")
endif()
if(EXISTS "${MUST_NOT_EXIST}")
  message(FATAL_ERROR "an output was written although the input was bad: ${MUST_NOT_EXIST}")
endif()
