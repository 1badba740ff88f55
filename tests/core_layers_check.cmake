# Fails when a file of core/ includes a core/ header from a layer above its
# own. The layers, bottom up (core/CMakeLists.txt): a folder may include its
# own headers and those of the folders before it in LAYERS, so no two layers
# include each other.
set(LAYERS base math adapters io positional rope temporal relative)
file(GLOB_RECURSE sources RELATIVE "${CORE_DIR}" "${CORE_DIR}/*.h" "${CORE_DIR}/*.cc")
set(checked 0)
foreach(f IN LISTS sources)
  string(REGEX MATCH "^[^/]+" layer "${f}")
  list(FIND LAYERS "${layer}" rank)
  if(rank LESS 0)
    message(FATAL_ERROR "core/${f} is in no layer (expected one of ${LAYERS})")
  endif()
  file(STRINGS "${CORE_DIR}/${f}" includes REGEX "^#include \"core/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"core/([^/\"]+)/.*" "\\1" target "${line}")
    list(FIND LAYERS "${target}" target_rank)
    if(target_rank LESS 0 OR target_rank GREATER rank)
      message(FATAL_ERROR "core/${f} (layer ${layer}) includes ${line}: "
                          "not a layer at or below ${layer} (${LAYERS})")
    endif()
    math(EXPR checked "${checked} + 1")
  endforeach()
endforeach()
message(STATUS "core/: ${checked} includes, each within its layer or below (${LAYERS})")
