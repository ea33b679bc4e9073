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
    if(label MATCHES "^(privileged|interop|e2e|faults|vm)$")
      set(serial TRUE)
    endif()
  endforeach()
  # A GTEST_SKIP() is reported by CTest as skipped, never counted as passed.
  gtest_discover_tests(${name}
    PROPERTIES TIMEOUT ${ARG_TIMEOUT} RUN_SERIAL ${serial} SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
    DISCOVERY_TIMEOUT 60)
  # Labels are set by a second include file: a list such as "unit;policy" passed through
  # gtest_discover_tests(PROPERTIES) is split into separate words (CMake 3.25), which garbles
  # every property after it. gtest_discover_tests leaves the test names in ${name}_TESTS.
  set(labels_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake")
  file(WRITE "${labels_file}"
    "if(DEFINED ${name}_TESTS)\n"
    "  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${ARG_LABELS}\")\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${labels_file}")
endfunction()
