# CTest's package_test: installs the build tree into a temporary prefix, then configures, builds and runs
# tests/package/downstream (a C++ and a C program using find_package(flashjit)), and checks flashjit.pc.
#   cmake -DBUILD_DIR=<flashjit build> -DSOURCE_DIR=<flashjit source> -DWORK_DIR=<scratch> -P package_test.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "package_test: ${var} is not set")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(JOIN ARGV " " command)
    message(FATAL_ERROR "package_test: `${command}` failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# What a consumer gets: headers, the versioned library with its links, the CLI, the package files.
foreach(file include/flashjit/flashjit.h include/flashjit/runtime.hpp bin/flashjit
        lib/cmake/flashjit/flashjitConfig.cmake lib/cmake/flashjit/flashjitConfigVersion.cmake
        lib/pkgconfig/flashjit.pc)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "package_test: ${file} was not installed")
  endif()
endforeach()
file(GLOB libs ${prefix}/lib/libflashjit.so*)
if(NOT libs MATCHES "libflashjit\\.so\\.[0-9]+;" AND NOT libs MATCHES "libflashjit\\.so\\.[0-9]+$")
  message(FATAL_ERROR "package_test: no versioned libflashjit.so.<abi> installed (found: ${libs})")
endif()
run(readelf -d ${prefix}/lib/libflashjit.so)
if(NOT last_output MATCHES "SONAME\\) +Library soname: \\[libflashjit\\.so\\.[0-9]+\\]")
  message(FATAL_ERROR "package_test: libflashjit.so has no versioned SONAME:\n${last_output}")
endif()
if(last_output MATCHES "libnvrtc|libcuda")
  message(FATAL_ERROR "package_test: libflashjit.so links NVRTC or the driver (both must be dlopen'ed):\n${last_output}")
endif()

set(build ${WORK_DIR}/downstream)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package/downstream -B ${build} -G Ninja
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${build})
run(${build}/downstream_cpp)
message(STATUS "${last_output}")
run(${build}/downstream_c)
message(STATUS "${last_output}")

# pkg-config, where there is one: the C program again, from its flags.
find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  run(${PKG_CONFIG} --cflags --libs flashjit)
  string(STRIP "${last_output}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run(cc -o ${WORK_DIR}/downstream_pc ${SOURCE_DIR}/tests/package/downstream/main.c ${flags}
      -Wl,-rpath,${prefix}/lib)
  run(${WORK_DIR}/downstream_pc)
endif()
file(REMOVE_RECURSE ${WORK_DIR})
