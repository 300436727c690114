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
endfunction()
