# FindNCCL: NCCL 2 headers and library, from the CUDA Toolkit's directories or the system's
# (Debian/Ubuntu's libnccl-dev puts them under include and lib/<multiarch>).
#   NCCL_FOUND, NCCL_VERSION, NCCL_INCLUDE_DIR, NCCL_LIBRARY, imported target NCCL::nccl
# Never downloads anything.
set(_nccl_hints "")
if(CUDAToolkit_INCLUDE_DIRS)
  list(APPEND _nccl_hints ${CUDAToolkit_INCLUDE_DIRS})
endif()
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${_nccl_hints} ENV NCCL_ROOT ENV NCCL_HOME
  PATH_SUFFIXES include include/x86_64-linux-gnu include/aarch64-linux-gnu)
find_library(NCCL_LIBRARY nccl
  HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_ROOT ENV NCCL_HOME
  PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_defines REGEX "#define NCCL_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_part} ([0-9]+)" _match "${_nccl_defines}")
    set(_nccl_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
