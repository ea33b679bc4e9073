# SPDX-License-Identifier: Apache-2.0
# BPF skeleton generation (style rules 27-28), following libbpf-bootstrap's recipe:
#   clang -target bpf -> bpftool gen object (strip) -> bpftool gen skeleton -> INTERFACE target.
#
# bpf_vmlinux_h()            generates (or selects) vmlinux.h; sets COLOD_VMLINUX_DIR.
# add_bpf_skeleton(<prog>)   builds <prog>.bpf.c into <prog>.skel.h and target bpf::<prog>.

find_program(BPFTOOL_EXE NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)
find_program(BPF_CLANG_EXE NAMES clang clang-14 clang-15 clang-16 REQUIRED)

set(VMLINUX_BTF "/sys/kernel/btf/vmlinux" CACHE FILEPATH "Kernel BTF that vmlinux.h is generated from")
set(VMLINUX_H "" CACHE FILEPATH "Pinned vmlinux.h to use instead of generating one from VMLINUX_BTF")

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|amd64")
  set(COLOD_BPF_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(COLOD_BPF_ARCH arm64)
else()
  set(COLOD_BPF_ARCH ${CMAKE_SYSTEM_PROCESSOR})
endif()

# clang -target bpf does not search the host's multiarch include dirs; pass them (as
# -idirafter, so the BPF headers win) the way libbpf-bootstrap does.
function(_colod_bpf_system_includes out)
  execute_process(COMMAND ${BPF_CLANG_EXE} -v -E -
    INPUT_FILE /dev/null OUTPUT_VARIABLE _o ERROR_VARIABLE _e)
  string(REGEX MATCH "#include <...> search starts here:\n(.*)End of search list" _m "${_e}")
  string(REGEX REPLACE "#include <...> search starts here:\n" "" _m "${_m}")
  string(REGEX REPLACE "End of search list" "" _m "${_m}")
  string(REGEX REPLACE "\n" ";" _dirs "${_m}")
  set(_flags "")
  foreach(d IN LISTS _dirs)
    string(STRIP "${d}" d)
    if(d)
      list(APPEND _flags "-idirafter${d}")
    endif()
  endforeach()
  set(${out} "${_flags}" PARENT_SCOPE)
endfunction()

function(bpf_vmlinux_h)
  set(dir ${CMAKE_BINARY_DIR}/bpf/vmlinux)
  file(MAKE_DIRECTORY ${dir})
  if(VMLINUX_H)
    if(NOT EXISTS "${VMLINUX_H}")
      message(FATAL_ERROR "VMLINUX_H=${VMLINUX_H} does not exist")
    endif()
    configure_file("${VMLINUX_H}" ${dir}/vmlinux.h COPYONLY)
    add_custom_target(colod_vmlinux_h)
  else()
    if(NOT EXISTS "${VMLINUX_BTF}")
      message(FATAL_ERROR
        "No kernel BTF at ${VMLINUX_BTF} and no pinned header: the BPF programs need vmlinux.h. "
        "Use a kernel with CONFIG_DEBUG_INFO_BTF=y, or pass -DVMLINUX_H=<path/to/vmlinux.h> "
        "(or -DVMLINUX_BTF=<btf file>).")
    endif()
    # Written to a temp file and renamed, so an interrupted build never leaves half a header.
    add_custom_command(OUTPUT ${dir}/vmlinux.h
      COMMAND ${BPFTOOL_EXE} btf dump file ${VMLINUX_BTF} format c > ${dir}/vmlinux.h.tmp
      COMMAND ${CMAKE_COMMAND} -E rename ${dir}/vmlinux.h.tmp ${dir}/vmlinux.h
      COMMENT "Generating vmlinux.h from ${VMLINUX_BTF}"
      VERBATIM)
    add_custom_target(colod_vmlinux_h DEPENDS ${dir}/vmlinux.h)
  endif()
  set(COLOD_VMLINUX_DIR ${dir} PARENT_SCOPE)
  set(COLOD_VMLINUX_DIR ${dir} CACHE INTERNAL "")
endfunction()

# add_bpf_skeleton(<prog> [DEPENDS <headers...>]): ${CMAKE_CURRENT_SOURCE_DIR}/<prog>.bpf.c ->
# <build>/bpf/skel/<prog>.skel.h, exposed as INTERFACE target bpf::<prog> (SYSTEM include, so
# the generated code is not held to our warning set).
function(add_bpf_skeleton prog)
  cmake_parse_arguments(ARG "" "" "DEPENDS" ${ARGN})
  if(NOT COLOD_VMLINUX_DIR)
    message(FATAL_ERROR "call bpf_vmlinux_h() before add_bpf_skeleton(${prog})")
  endif()
  _colod_bpf_system_includes(sys_includes)
  set(src ${CMAKE_CURRENT_SOURCE_DIR}/${prog}.bpf.c)
  set(out ${CMAKE_BINARY_DIR}/bpf/skel)
  file(MAKE_DIRECTORY ${out})
  set(obj ${out}/${prog}.bpf.o)
  set(stripped ${out}/${prog}.stripped.bpf.o)
  set(skel ${out}/${prog}.skel.h)
  get_filename_component(libbpf_inc "${LIBBPF_INCLUDEDIR}" ABSOLUTE)
  add_custom_command(OUTPUT ${skel}
    COMMAND ${BPF_CLANG_EXE} -g -O2 -Wall -Werror -target bpf -D__TARGET_ARCH_${COLOD_BPF_ARCH}
            -I${COLOD_VMLINUX_DIR} -I${CMAKE_CURRENT_SOURCE_DIR} ${sys_includes}
            -c ${src} -o ${obj}
    COMMAND ${BPFTOOL_EXE} gen object ${stripped} ${obj}
    COMMAND ${BPFTOOL_EXE} gen skeleton ${stripped} name ${prog} > ${skel}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${skel}.tmp ${skel}
    DEPENDS ${src} ${ARG_DEPENDS} colod_vmlinux_h ${COLOD_VMLINUX_DIR}/vmlinux.h
    COMMENT "BPF skeleton ${prog}"
    VERBATIM)
  add_custom_target(bpf_${prog}_skel DEPENDS ${skel})
  add_library(bpf_${prog} INTERFACE)
  add_library(bpf::${prog} ALIAS bpf_${prog})
  add_dependencies(bpf_${prog} bpf_${prog}_skel)
  target_include_directories(bpf_${prog} SYSTEM INTERFACE ${out} ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(bpf_${prog} INTERFACE PkgConfig::LIBBPF)
endfunction()
