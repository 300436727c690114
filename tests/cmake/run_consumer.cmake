# Configures, builds and runs the consumer project through one route (cmake -P).
# Passes when the program ran (exit 0), or reported "no CUDA device" with exit status 77
# on a machine without a GPU.
set(configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${CONSUMER_BINARY_DIR}" -G "${GENERATOR}"
  -DROUTE=${ROUTE}
  -DGPUCMP_SOURCE_DIR=${GPUCMP_SOURCE_DIR}
  -DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}
  -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}
  -DCMAKE_BUILD_TYPE=Release)
foreach(language CXX CUDA)  # the optimization of the build that runs the test, when it says
  if(DEFINED ${language}_FLAGS_RELEASE)
    list(APPEND configure_args "-DCMAKE_${language}_FLAGS_RELEASE=${${language}_FLAGS_RELEASE}")
  endif()
endforeach()
if(DEFINED CONSUMER_OPS)
  list(APPEND configure_args "-DCONSUMER_OPS=${CONSUMER_OPS}")
endif()
if(ROUTE STREQUAL "find_package_install")
  list(APPEND configure_args "-DCMAKE_PREFIX_PATH=${GPUCMP_INSTALL_PREFIX}")
elseif(ROUTE STREQUAL "find_package_build_tree")
  list(APPEND configure_args "-Dgpucmp_DIR=${GPUCMP_BUILD_DIR}")
endif()

file(REMOVE_RECURSE "${CONSUMER_BINARY_DIR}")
execute_process(COMMAND "${CMAKE_COMMAND}" ${configure_args} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer (${ROUTE}): configure failed (${rc})")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${CONSUMER_BINARY_DIR}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer (${ROUTE}): build failed (${rc})")
endif()

set(programs consumer_host consumer)
if(ROUTE MATCHES "^find_package")
  list(APPEND programs consumer_nccl)  # needs no GPU: exit 0 everywhere
  if(EXISTS "${CONSUMER_BINARY_DIR}/consumer_sparse")
    list(APPEND programs consumer_sparse)  # loads cuSPARSELt from where the package found it
  endif()
  if(EXISTS "${CONSUMER_BINARY_DIR}/consumer_mpi")
    list(APPEND programs consumer_mpi)  # needs no GPU and no mpirun: exit 0 everywhere
  endif()
endif()
foreach(program IN LISTS programs)
  execute_process(COMMAND "${CONSUMER_BINARY_DIR}/${program}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${program} (exit ${rc}):\n${out}${err}")
  if(rc EQUAL 77 AND "${out}${err}" MATCHES "no CUDA device")
    message("consumer (${ROUTE}): ${program} built and reported that there is no CUDA device")
  elseif(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer (${ROUTE}): ${program} failed with exit status ${rc}")
  endif()
endforeach()
