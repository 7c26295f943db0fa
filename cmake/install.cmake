# Install rules and the CMake package (find_package(flashjit)), included by the top CMakeLists.txt.
#
#   flashjit::flashjit         the C++ API (include/flashjit/*.hpp), static library, C++20
#   flashjit::flashjit_shared  the C ABI (include/flashjit/flashjit.h), libflashjit.so.<ABI version>
#
# and lib/pkgconfig/flashjit.pc for the C ABI. Consumers need no CUDA toolkit at build time: the public
# headers include only standard headers, and NVRTC and the driver are loaded at run time.
include(CMakePackageConfigHelpers)

set(FLASHJIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/flashjit)

install(TARGETS flashjit_core flashjit_shared EXPORT flashjitTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/flashjit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h*")
if(FLASHJIT_BUILD_TOOLS)
  install(TARGETS flashjit RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

install(EXPORT flashjitTargets NAMESPACE flashjit:: DESTINATION ${FLASHJIT_CMAKE_DIR})
configure_package_config_file(cmake/flashjitConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/flashjitConfig.cmake
                              INSTALL_DESTINATION ${FLASHJIT_CMAKE_DIR})
# 0.x: a new minor version may break the C++ API (the C ABI has its own version, the SONAME).
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/flashjitConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/flashjitConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/flashjitConfigVersion.cmake
        DESTINATION ${FLASHJIT_CMAKE_DIR})

# The .pc file finds its prefix from where it lies, so that `cmake --install --prefix` anywhere is right.
file(RELATIVE_PATH FLASHJIT_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" FLASHJIT_PC_TO_PREFIX "${FLASHJIT_PC_TO_PREFIX}")
configure_file(cmake/flashjit.pc.in ${CMAKE_CURRENT_BINARY_DIR}/flashjit.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/flashjit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
