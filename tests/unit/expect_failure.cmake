# Runs COMMAND, which must exit with status 1 and print an error matching EXPECTED on
# standard error.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
message("exit ${rc}: ${stderr}")
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected exit status 1, got ${rc}")
endif()
if(NOT stderr MATCHES "${EXPECTED}")
  message(FATAL_ERROR "expected an error matching '${EXPECTED}'")
endif()
