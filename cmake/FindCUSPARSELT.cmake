# FindCUSPARSELT: NVIDIA cuSPARSELt (2:4 structured-sparse matrix multiplication), header and
# library. Looked for, in order: CUSPARSELT_ROOT (a CMake or environment variable: the folder
# holding include/cusparseLt.h), the Python packages (`pip install nvidia-cusparselt-cu13` puts
# them under nvidia/cu13/, older wheels under nvidia/cusparselt/), ~/.local (where
# scripts/install-deps.sh puts them without root), the CUDA Toolkit's and the system's folders
# (NVIDIA's libcusparselt-dev packages).
#   CUSPARSELT_FOUND, CUSPARSELT_VERSION, CUSPARSELT_INCLUDE_DIR, CUSPARSELT_LIBRARY,
#   imported target CUSPARSELT::cusparselt
# Never downloads anything.
set(_cusparselt_hints "")
if(CUSPARSELT_ROOT)
  list(APPEND _cusparselt_hints "${CUSPARSELT_ROOT}")
endif()
if(DEFINED ENV{CUSPARSELT_ROOT})
  list(APPEND _cusparselt_hints "$ENV{CUSPARSELT_ROOT}")
endif()
find_program(_cusparselt_python NAMES python3 python)
if(_cusparselt_python)
  execute_process(
    COMMAND "${_cusparselt_python}" -c
      "import site, sysconfig; print(';'.join({sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib'], site.getusersitepackages()}))"
    OUTPUT_VARIABLE _cusparselt_site OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _cusparselt_site_result)
  if(_cusparselt_site_result EQUAL 0)
    foreach(_site IN LISTS _cusparselt_site)
      list(APPEND _cusparselt_hints "${_site}/nvidia/cu13" "${_site}/nvidia/cusparselt")
    endforeach()
  endif()
endif()
if(DEFINED ENV{HOME})
  list(APPEND _cusparselt_hints "$ENV{HOME}/.local")
endif()
if(CUDAToolkit_LIBRARY_DIR)
  get_filename_component(_cusparselt_toolkit "${CUDAToolkit_LIBRARY_DIR}" DIRECTORY)
  list(APPEND _cusparselt_hints "${_cusparselt_toolkit}")
endif()
find_path(CUSPARSELT_INCLUDE_DIR cusparseLt.h
  HINTS ${_cusparselt_hints}
  PATH_SUFFIXES include include/x86_64-linux-gnu include/aarch64-linux-gnu include/libcusparseLt/13)
# The wheels hold only the versioned name, libcusparseLt.so.0.
find_library(CUSPARSELT_LIBRARY NAMES cusparseLt libcusparseLt.so.0
  HINTS ${_cusparselt_hints}
  PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu lib/x86_64-linux-gnu/libcusparseLt/13)

if(CUSPARSELT_INCLUDE_DIR AND EXISTS "${CUSPARSELT_INCLUDE_DIR}/cusparseLt.h")
  file(STRINGS "${CUSPARSELT_INCLUDE_DIR}/cusparseLt.h" _cusparselt_defines REGEX "#define CUSPARSELT_VER_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "CUSPARSELT_VER_${_part} ([0-9]+)" _match "${_cusparselt_defines}")
    set(_cusparselt_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(CUSPARSELT_VERSION "${_cusparselt_MAJOR}.${_cusparselt_MINOR}.${_cusparselt_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUSPARSELT
  REQUIRED_VARS CUSPARSELT_LIBRARY CUSPARSELT_INCLUDE_DIR
  VERSION_VAR CUSPARSELT_VERSION)

# Its include folder is a system one (imported targets' are), so its header's warnings are not
# gpucmp's.
if(CUSPARSELT_FOUND AND NOT TARGET CUSPARSELT::cusparselt)
  add_library(CUSPARSELT::cusparselt UNKNOWN IMPORTED)
  set_target_properties(CUSPARSELT::cusparselt PROPERTIES
    IMPORTED_LOCATION "${CUSPARSELT_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CUSPARSELT_INCLUDE_DIR}")
endif()
mark_as_advanced(CUSPARSELT_INCLUDE_DIR CUSPARSELT_LIBRARY)
