# SPDX-License-Identifier: Apache-2.0
# colod_warnings(<target>): the house warning set (style rule 11), -Werror under COLOD_WERROR.
function(colod_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wold-style-cast -Wnon-virtual-dtor)
  if(COLOD_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# colod_add_gtest(<name> LABELS <labels...> SOURCES <srcs...> LIBS <libs...>)
# One gtest binary per module; tests discovered into CTest with the given labels.
function(colod_add_gtest name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABELS;SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  colod_warnings(${name})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} colod::testing GTest::gmock GTest::gtest_main)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  # Tests that load BPF, measure latency or drive real cgroups must not share the 2 CPUs with
  # other tests: they run one at a time, after the parallel unit tests.
  set(serial FALSE)
  foreach(label IN LISTS ARG_LABELS)
    if(label MATCHES "^(privileged|interop|e2e|vm)$")
      set(serial TRUE)
    endif()
  endforeach()
  gtest_discover_tests(${name}
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT} RUN_SERIAL ${serial}
    DISCOVERY_TIMEOUT 60)
endfunction()
