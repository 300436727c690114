# Warnings for gpucmp's own targets (tests, examples, benchmarks); never imposed on embedders.
# CI builds with GPUCMP_WERROR=ON; it stays off by default so a newer compiler's new
# warnings do not break a user's build.
option(GPUCMP_WERROR "Treat warnings in gpucmp's own targets as errors" OFF)

function(gpucmp_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(GPUCMP_WERROR)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Werror>
      $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
  gpucmp_target_sanitizers(${target})
endfunction()

# Sanitizers for gpucmp's own C++ targets (scripts/run-sanitized-host-tests.sh), for example
# GPUCMP_SANITIZE=address,undefined. CUDA sources are left alone: nvcc's device code does
# not take them, and compute-sanitizer (scripts/sanitize.sh) checks the GPU side.
set(GPUCMP_SANITIZE "" CACHE STRING "Sanitizers for gpucmp's own C++ targets (e.g. address,undefined)")
function(gpucmp_target_sanitizers target)
  if(GPUCMP_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${GPUCMP_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer>)
    target_link_options(${target} PRIVATE -fsanitize=${GPUCMP_SANITIZE})
  endif()
endfunction()
