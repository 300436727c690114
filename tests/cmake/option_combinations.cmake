# A packager's and an embedder's configurations (cmake -P): every combination of
# GPUCMP_BUILD_TESTS, GPUCMP_BUILD_EXAMPLES, GPUCMP_BUILD_BENCHMARKS, GPUCMP_BUILD_TOOLS and
# GPUCMP_INSTALL configures (one folder, configured again for each: CMake re-runs every
# CMakeLists.txt, so a function defined only under some option is found missing, as it was
# before the packaging fix). Then the packager's build: tests, examples and benchmarks off,
# tools on and then off, built and installed; the install holds the headers, the CMake package
# and gpucmp-report exactly when the tools are on, and a find_package consumer builds and runs
# against each install.
# Inputs: GPUCMP_SOURCE_DIR, WORK_DIR, GENERATOR, CUDA_COMPILER, CUDA_ARCHITECTURES,
# CONSUMER_SOURCE_DIR, RUN_CONSUMER (run_consumer.cmake); optionally CXX_FLAGS_RELEASE and
# CUDA_FLAGS_RELEASE (the build's own).
set(options GPUCMP_BUILD_TESTS GPUCMP_BUILD_EXAMPLES GPUCMP_BUILD_BENCHMARKS GPUCMP_BUILD_TOOLS GPUCMP_INSTALL)
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")
set(common -S "${GPUCMP_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}" "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}")
set(flags "")  # the optimization of the build that runs the test, when it says
foreach(language CXX CUDA)
  if(DEFINED ${language}_FLAGS_RELEASE)
    list(APPEND common "-DCMAKE_${language}_FLAGS_RELEASE=${${language}_FLAGS_RELEASE}")
    list(APPEND flags "-D${language}_FLAGS_RELEASE=${${language}_FLAGS_RELEASE}")
  endif()
endforeach()

function(configure_with values)
  set(args "")
  set(said "")
  foreach(option value IN ZIP_LISTS options values)
    list(APPEND args "-D${option}=${value}")
    string(APPEND said " ${option}=${value}")
  endforeach()
  execute_process(COMMAND "${CMAKE_COMMAND}" ${common} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configure failed with${said}:\n${err}\n${out}")
  endif()
endfunction()

foreach(combination RANGE 31)
  set(values "")
  foreach(bit RANGE 4)
    math(EXPR on "(${combination} >> ${bit}) & 1")
    if(on)
      list(APPEND values ON)
    else()
      list(APPEND values OFF)
    endif()
  endforeach()
  configure_with("${values}")
endforeach()
message("all 32 combinations of ${options} configure")

foreach(tools ON OFF)
  configure_with("OFF;OFF;OFF;${tools};ON")
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${build}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the packager's build (tools ${tools}) failed")
  endif()
  set(prefix "${WORK_DIR}/install-tools-${tools}")
  execute_process(COMMAND "${CMAKE_COMMAND}" --install "${build}" --prefix "${prefix}" RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the packager's install (tools ${tools}) failed")
  endif()
  file(GLOB_RECURSE config "${prefix}/*/gpucmpConfig.cmake")
  if(NOT EXISTS "${prefix}/include/gpucmp/bench.hpp" OR NOT config)
    message(FATAL_ERROR "the install (tools ${tools}) lacks the headers or the CMake package")
  endif()
  if(tools AND NOT EXISTS "${prefix}/bin/gpucmp-report")
    message(FATAL_ERROR "the install with the tools on has no bin/gpucmp-report")
  elseif(NOT tools AND EXISTS "${prefix}/bin/gpucmp-report")
    message(FATAL_ERROR "the install with the tools off has bin/gpucmp-report")
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" -DROUTE=find_package_install "-DGPUCMP_SOURCE_DIR=${GPUCMP_SOURCE_DIR}"
    "-DGPUCMP_INSTALL_PREFIX=${prefix}" "-DCONSUMER_SOURCE_DIR=${CONSUMER_SOURCE_DIR}"
    "-DCONSUMER_BINARY_DIR=${WORK_DIR}/consumer-tools-${tools}" "-DGENERATOR=${GENERATOR}"
    "-DCUDA_COMPILER=${CUDA_COMPILER}" "-DCUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" -DCONSUMER_OPS=OFF ${flags}
    -P "${RUN_CONSUMER}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "a find_package consumer of the packager's install (tools ${tools}) failed")
  endif()
  message("the packager's build with the tools ${tools} installs, and a find_package consumer runs against it")
endforeach()
