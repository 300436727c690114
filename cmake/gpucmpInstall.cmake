# Install and export rules: headers, one export set per component, a package config that
# knows the components, and a version file. A build-tree export lets find_package use an
# uninstalled build too.
include(CMakePackageConfigHelpers)

set(GPUCMP_CONFIG_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/gpucmp")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/gpucmp" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS gpucmp EXPORT gpucmpTargets)
install(EXPORT gpucmpTargets NAMESPACE gpucmp:: DESTINATION "${GPUCMP_CONFIG_DIR}")
export(EXPORT gpucmpTargets NAMESPACE gpucmp:: FILE "${PROJECT_BINARY_DIR}/gpucmpTargets.cmake")

if(TARGET gpucmp_gbench)
  install(TARGETS gpucmp_gbench EXPORT gpucmpGbenchTargets)
  install(EXPORT gpucmpGbenchTargets NAMESPACE gpucmp:: DESTINATION "${GPUCMP_CONFIG_DIR}")
  export(EXPORT gpucmpGbenchTargets NAMESPACE gpucmp:: FILE "${PROJECT_BINARY_DIR}/gpucmpGbenchTargets.cmake")
endif()

if(TARGET gpucmp_cupti)
  install(TARGETS gpucmp_cupti EXPORT gpucmpCuptiTargets)
  install(EXPORT gpucmpCuptiTargets NAMESPACE gpucmp:: DESTINATION "${GPUCMP_CONFIG_DIR}")
  export(EXPORT gpucmpCuptiTargets NAMESPACE gpucmp:: FILE "${PROJECT_BINARY_DIR}/gpucmpCuptiTargets.cmake")
endif()

if(TARGET gpucmp_cublas)
  install(TARGETS gpucmp_cublas EXPORT gpucmpCublasTargets)
  install(EXPORT gpucmpCublasTargets NAMESPACE gpucmp:: DESTINATION "${GPUCMP_CONFIG_DIR}")
  export(EXPORT gpucmpCublasTargets NAMESPACE gpucmp:: FILE "${PROJECT_BINARY_DIR}/gpucmpCublasTargets.cmake")
endif()

if(TARGET gpucmp_cudnn)
  install(TARGETS gpucmp_cudnn EXPORT gpucmpCudnnTargets)
  install(EXPORT gpucmpCudnnTargets NAMESPACE gpucmp:: DESTINATION "${GPUCMP_CONFIG_DIR}")
  export(EXPORT gpucmpCudnnTargets NAMESPACE gpucmp:: FILE "${PROJECT_BINARY_DIR}/gpucmpCudnnTargets.cmake")
  # The package finds cuDNN and cudnn-frontend again with the same modules.
  foreach(module FindCUDNN.cmake FindCudnnFrontend.cmake)
    install(FILES "${PROJECT_SOURCE_DIR}/cmake/${module}" DESTINATION "${GPUCMP_CONFIG_DIR}")
    configure_file("${PROJECT_SOURCE_DIR}/cmake/${module}" "${PROJECT_BINARY_DIR}/${module}" COPYONLY)
  endforeach()
endif()

if(TARGET gpucmp_cusparselt)
  install(TARGETS gpucmp_cusparselt EXPORT gpucmpCusparseltTargets)
  install(EXPORT gpucmpCusparseltTargets NAMESPACE gpucmp:: DESTINATION "${GPUCMP_CONFIG_DIR}")
  export(EXPORT gpucmpCusparseltTargets NAMESPACE gpucmp:: FILE "${PROJECT_BINARY_DIR}/gpucmpCusparseltTargets.cmake")
  # The package finds cuSPARSELt again with the same module.
  install(FILES "${PROJECT_SOURCE_DIR}/cmake/FindCUSPARSELT.cmake" DESTINATION "${GPUCMP_CONFIG_DIR}")
  configure_file("${PROJECT_SOURCE_DIR}/cmake/FindCUSPARSELT.cmake" "${PROJECT_BINARY_DIR}/FindCUSPARSELT.cmake" COPYONLY)
endif()

if(TARGET gpucmp_nccl)
  install(TARGETS gpucmp_nccl EXPORT gpucmpNcclTargets)
  install(EXPORT gpucmpNcclTargets NAMESPACE gpucmp:: DESTINATION "${GPUCMP_CONFIG_DIR}")
  export(EXPORT gpucmpNcclTargets NAMESPACE gpucmp:: FILE "${PROJECT_BINARY_DIR}/gpucmpNcclTargets.cmake")
  # The package finds NCCL again with the same module.
  install(FILES "${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake" DESTINATION "${GPUCMP_CONFIG_DIR}")
  configure_file("${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake" "${PROJECT_BINARY_DIR}/FindNCCL.cmake" COPYONLY)
endif()

if(TARGET gpucmp_mpi)
  install(TARGETS gpucmp_mpi EXPORT gpucmpMpiTargets)
  install(EXPORT gpucmpMpiTargets NAMESPACE gpucmp:: DESTINATION "${GPUCMP_CONFIG_DIR}")
  export(EXPORT gpucmpMpiTargets NAMESPACE gpucmp:: FILE "${PROJECT_BINARY_DIR}/gpucmpMpiTargets.cmake")
endif()

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/gpucmpConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/gpucmpConfig.cmake"
  INSTALL_DESTINATION "${GPUCMP_CONFIG_DIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/gpucmpConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMinorVersion
  ARCH_INDEPENDENT)
install(FILES
  "${PROJECT_BINARY_DIR}/gpucmpConfig.cmake"
  "${PROJECT_BINARY_DIR}/gpucmpConfigVersion.cmake"
  DESTINATION "${GPUCMP_CONFIG_DIR}")
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/gpucmp")
