# FindCudnnFrontend: NVIDIA's cudnn-frontend, the header-only C++ graph API over cuDNN's backend
# (the one PyTorch uses). PyPI's nvidia-cudnn-frontend ships its headers; scripts/install-deps.sh
# installs them. Looked for, in order: CUDNN_FRONTEND_ROOT (a CMake or environment variable:
# the folder holding include/cudnn_frontend.h), the Python packages' include folder (where
# `pip install nvidia-cudnn-frontend` puts them), ~/.local and the system's include folders.
#   CudnnFrontend_FOUND, CudnnFrontend_VERSION, CudnnFrontend_INCLUDE_DIR
# Never downloads anything.
set(_fe_hints "")
if(CUDNN_FRONTEND_ROOT)
  list(APPEND _fe_hints "${CUDNN_FRONTEND_ROOT}")
endif()
if(DEFINED ENV{CUDNN_FRONTEND_ROOT})
  list(APPEND _fe_hints "$ENV{CUDNN_FRONTEND_ROOT}")
endif()
find_program(_fe_python NAMES python3 python)
if(_fe_python)
  # purelib and platlib, the user's site too: the wheel puts include/ at the top of site-packages.
  execute_process(
    COMMAND "${_fe_python}" -c
      "import site, sysconfig; print(';'.join({sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib'], site.getusersitepackages()}))"
    OUTPUT_VARIABLE _fe_site OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _fe_site_result)
  if(_fe_site_result EQUAL 0)
    list(APPEND _fe_hints ${_fe_site})
  endif()
endif()
if(DEFINED ENV{HOME})
  list(APPEND _fe_hints "$ENV{HOME}/.local")
endif()
find_path(CudnnFrontend_INCLUDE_DIR cudnn_frontend.h HINTS ${_fe_hints} PATH_SUFFIXES include)

if(CudnnFrontend_INCLUDE_DIR AND EXISTS "${CudnnFrontend_INCLUDE_DIR}/cudnn_frontend_version.h")
  file(STRINGS "${CudnnFrontend_INCLUDE_DIR}/cudnn_frontend_version.h" _fe_defines
       REGEX "#define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "CUDNN_FRONTEND_${_part}_VERSION ([0-9]+)" _match "${_fe_defines}")
    set(_fe_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(CudnnFrontend_VERSION "${_fe_MAJOR}.${_fe_MINOR}.${_fe_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CudnnFrontend
  REQUIRED_VARS CudnnFrontend_INCLUDE_DIR
  VERSION_VAR CudnnFrontend_VERSION)
mark_as_advanced(CudnnFrontend_INCLUDE_DIR)

# Its include folder is a system one (imported targets' are), so its headers' warnings are not
# gpucmp's.
if(CudnnFrontend_FOUND AND NOT TARGET CudnnFrontend::CudnnFrontend)
  add_library(CudnnFrontend::CudnnFrontend INTERFACE IMPORTED)
  set_target_properties(CudnnFrontend::CudnnFrontend PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${CudnnFrontend_INCLUDE_DIR}")
endif()
