# numprobe as a library (DESIGN.md, "Bring your own kernel", 3): `cmake --install` puts the
# public headers and numprobe::formats, numprobe::core, numprobe::reference, numprobe::metrics
# under the prefix with a CMake package config, so a kernel author writes
#   find_package(numprobe REQUIRED)
#   target_link_libraries(my_test PRIVATE numprobe::reference numprobe::metrics)
# tests/package is that consumer, built by scripts/package_test.sh.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The plugin C ABI (numprobe/kernel_abi.h) as a header-only target, for plugins.
add_library(numprobe_kernel_abi INTERFACE)
add_library(numprobe::kernel_abi ALIAS numprobe_kernel_abi)
# In the build tree, the abi layer's staged directory: numprobe/kernel_abi.h and nothing else.
numprobe_public_headers(numprobe_kernel_abi SOURCES ${PROJECT_SOURCE_DIR}/include/numprobe/kernel_abi.h)

if(NUMPROBE_TOP_LEVEL)
  set(NUMPROBE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/numprobe)
  # numprobe_options is a link-only dependency of the static libraries (OpenMP); it travels
  # with them in the export set.
  set(NUMPROBE_INSTALLED_TARGETS numprobe_formats numprobe_core numprobe_reference
    numprobe_metrics numprobe_options numprobe_kernel_abi)
  foreach(t IN LISTS NUMPROBE_INSTALLED_TARGETS)
    string(REPLACE "numprobe_" "" short ${t})
    set_target_properties(${t} PROPERTIES EXPORT_NAME ${short})
  endforeach()
  install(TARGETS ${NUMPROBE_INSTALLED_TARGETS} EXPORT numprobe_targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/numprobe DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
  install(EXPORT numprobe_targets NAMESPACE numprobe:: DESTINATION ${NUMPROBE_INSTALL_CMAKEDIR}
    FILE numprobe_targets.cmake)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/numprobeConfig.cmake.in
    ${PROJECT_BINARY_DIR}/numprobeConfig.cmake INSTALL_DESTINATION ${NUMPROBE_INSTALL_CMAKEDIR})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/numprobeConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/numprobeConfig.cmake
    ${PROJECT_BINARY_DIR}/numprobeConfigVersion.cmake DESTINATION ${NUMPROBE_INSTALL_CMAKEDIR})
endif()
