# Per-layer include directories, so that the compiler refuses an upward include
# (docs/architecture.md, "Include directories per layer").
#
# The layer table of docs/architecture.md is the one source of truth: at configure time
# `scripts/check_layers.py --stage-map` prints which folders each layer owns and which it may
# see, and this file stages, per layer, a directory of symlinks into the source tree:
#   <build>/layers/<layer>/          everything the layer may see, e.g. for formats
#                                    numprobe/base -> include/numprobe/base,
#                                    numprobe/formats -> include/numprobe/formats,
#                                    src/formats -> src/formats
#   <build>/layers-public/<layer>/   only its public part (what lives under include/)
# Nothing moves and no spelling changes. A target's layer is the layer of its sources, by the
# table's folders; a target whose sources are in no layer (tests, bench, fuzz drivers) is not
# a layer and sees include/ and the repository root, as before.
#
# Without python3 or symlinks (or with NUMPROBE_LAYER_INCLUDES=OFF) every target sees
# include/ and the root again, with a warning: only the include-graph check then enforces the
# rules.
option(NUMPROBE_LAYER_INCLUDES "Give each layer its own include directory (symlinks)" ON)
set(NUMPROBE_LAYERS_DIR ${PROJECT_BINARY_DIR}/layers)
set(NUMPROBE_LAYERS_PUBLIC_DIR ${PROJECT_BINARY_DIR}/layers-public)
set(NUMPROBE_LAYERS_STAGED OFF)
set(NUMPROBE_LAYER_OWNERS "")  # prefix|layer, one per folder or file of the table

function(_numprobe_stage_layers)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(NOT Python3_Interpreter_FOUND)
    message(WARNING "numprobe: no python3, so no per-layer include directories: every target "
      "sees include/ and the repository root (the compiler cannot refuse an upward include)")
    return()
  endif()
  set(table ${PROJECT_SOURCE_DIR}/docs/architecture.md)
  set(script ${PROJECT_SOURCE_DIR}/scripts/check_layers.py)
  execute_process(COMMAND ${Python3_EXECUTABLE} ${script} --root ${PROJECT_SOURCE_DIR} --stage-map
    OUTPUT_VARIABLE map ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "numprobe: check_layers.py --stage-map failed (${rc}): ${err}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${table} ${script})

  string(REPLACE "\n" ";" lines "${map}")
  set(owners "")
  set(links "")  # dir|link|path
  foreach(line IN LISTS lines)
    string(REPLACE "\t" ";" f "${line}")
    list(GET f 0 kind)
    if(kind STREQUAL "owner")
      list(GET f 1 layer)
      list(GET f 2 prefix)
      list(APPEND owners "${prefix}|${layer}")
    elseif(kind STREQUAL "stage")
      list(GET f 1 layer)
      list(GET f 2 link)
      list(GET f 3 path)
      list(APPEND links "${NUMPROBE_LAYERS_DIR}/${layer}|${link}|${path}")
      if(path MATCHES "^include/")
        list(APPEND links "${NUMPROBE_LAYERS_PUBLIC_DIR}/${layer}|${link}|${path}")
      endif()
    elseif(kind STREQUAL "watch")
      # Staged file by file: a new file there needs a new link, so a new configure.
      list(GET f 1 dir)
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir})
    endif()
  endforeach()

  # Restage only when the map changed (or a link went missing), so that a reconfigure leaves
  # the staged tree, and with it every compile command, as it was.
  set(stamp ${NUMPROBE_LAYERS_DIR}/.stage-map)
  set(fresh OFF)
  if(EXISTS ${stamp})
    file(READ ${stamp} old)
    if(old STREQUAL map)
      set(fresh ON)
      foreach(entry IN LISTS links)
        string(REPLACE "|" ";" e "${entry}")
        list(GET e 0 dir)
        list(GET e 1 link)
        if(NOT IS_SYMLINK ${dir}/${link})
          set(fresh OFF)
        endif()
      endforeach()
    endif()
  endif()
  if(NOT fresh)
    # REMOVE_RECURSE removes symlinks, never what they point to.
    file(REMOVE_RECURSE ${NUMPROBE_LAYERS_DIR} ${NUMPROBE_LAYERS_PUBLIC_DIR})
    foreach(entry IN LISTS links)
      string(REPLACE "|" ";" e "${entry}")
      list(GET e 0 dir)
      list(GET e 1 link)
      list(GET e 2 path)
      get_filename_component(parent ${dir}/${link} DIRECTORY)
      file(MAKE_DIRECTORY ${parent})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${path} ${dir}/${link} RESULT res SYMBOLIC)
      if(NOT res EQUAL 0)
        message(WARNING "numprobe: cannot create the symlink ${dir}/${link} (${res}), so no "
          "per-layer include directories: every target sees include/ and the repository root "
          "(the compiler cannot refuse an upward include)")
        file(REMOVE_RECURSE ${NUMPROBE_LAYERS_DIR} ${NUMPROBE_LAYERS_PUBLIC_DIR})
        return()
      endif()
    endforeach()
    file(WRITE ${stamp} "${map}")
  endif()
  set(NUMPROBE_LAYER_OWNERS "${owners}" PARENT_SCOPE)
  set(NUMPROBE_LAYERS_STAGED ON PARENT_SCOPE)
endfunction()

if(NUMPROBE_LAYER_INCLUDES)
  _numprobe_stage_layers()
else()
  message(WARNING "numprobe: NUMPROBE_LAYER_INCLUDES=OFF: every target sees include/ and the "
    "repository root (the compiler cannot refuse an upward include)")
endif()
message(STATUS "numprobe: per-layer include directories ${NUMPROBE_LAYERS_STAGED}")

# numprobe_layer_of(out file): the layer whose folder (or file) holds `file` (absolute, or
# relative to the current source directory), the longest folder winning; "" for none.
function(numprobe_layer_of out file)
  get_filename_component(abs ${file} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${abs})
  set(best "")
  set(best_len 0)
  foreach(owner IN LISTS NUMPROBE_LAYER_OWNERS)
    string(REPLACE "|" ";" o "${owner}")
    list(GET o 0 prefix)
    list(GET o 1 layer)
    string(LENGTH "${prefix}" len)
    set(head "${rel}")
    if(prefix MATCHES "/$")  # a folder holds what starts with it; a file is only itself
      string(SUBSTRING "${rel}" 0 ${len} head)
    endif()
    if(head STREQUAL prefix AND len GREATER best_len)
      set(best ${layer})
      set(best_len ${len})
    endif()
  endforeach()
  set(${out} "${best}" PARENT_SCOPE)
endfunction()

# numprobe_layer_of_sources(out sources...): the one layer of these sources, "" when none is
# in a layer; sources in two layers are a configure error (a target is one layer).
function(numprobe_layer_of_sources out)
  set(found "")
  foreach(src IN LISTS ARGN)
    if(src MATCHES "^\\$<")  # a generator expression: not a file of the tree
      continue()
    endif()
    numprobe_layer_of(layer ${src})
    if(layer)
      list(APPEND found ${layer})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES found)
  list(LENGTH found n)
  if(n GREATER 1)
    message(FATAL_ERROR "numprobe: one target with sources in the layers ${found} "
      "(docs/architecture.md): a target is one layer")
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# numprobe_layer_include_dirs(private_out public_out sources...): the include directories of
# the layer these sources belong to: what it may see (private_out) and what it offers to its
# dependents (public_out). Not a layer, or nothing staged: include/ and the repository root,
# and include/.
function(numprobe_layer_include_dirs private_out public_out)
  set(layer "")
  if(NUMPROBE_LAYERS_STAGED)
    numprobe_layer_of_sources(layer ${ARGN})
  endif()
  if(layer)
    set(${private_out} ${NUMPROBE_LAYERS_DIR}/${layer} PARENT_SCOPE)
    set(public ${NUMPROBE_LAYERS_PUBLIC_DIR}/${layer})
    if(NOT IS_DIRECTORY ${public})  # a layer without public headers
      set(public "")
    endif()
    set(${public_out} "${public}" PARENT_SCOPE)
  else()
    set(${private_out} ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR} PARENT_SCOPE)
    set(${public_out} ${PROJECT_SOURCE_DIR}/include PARENT_SCOPE)
  endif()
endfunction()

# The sources a numprobe_*_headers call decides the layer by: SOURCES given, or the target's.
macro(_numprobe_header_sources target)
  cmake_parse_arguments(H "" "" "SOURCES" ${ARGN})
  if(NOT H_SOURCES)
    get_target_property(H_SOURCES ${target} SOURCES)
    get_target_property(dir ${target} SOURCE_DIR)
    list(TRANSFORM H_SOURCES PREPEND ${dir}/ REGEX "^[^/$]")
  endif()
endmacro()

# numprobe_public_headers(target [SOURCES...]): what the target's dependents see, in the build
# tree (its layer's public headers and those below) and installed (include/).
function(numprobe_public_headers target)
  _numprobe_header_sources(${target} ${ARGN})
  numprobe_layer_include_dirs(private public ${H_SOURCES})
  # INTERFACE: the target's own compile line has its private directory only.
  target_include_directories(${target} INTERFACE
    $<BUILD_INTERFACE:${public}> $<INSTALL_INTERFACE:include>)
endfunction()
