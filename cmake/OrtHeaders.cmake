# Locate the onnxruntime C API headers. Order:
#   1. ORTQUANT_ORT_INCLUDE_DIR (CMake variable or environment variable), a directory holding onnxruntime_c_api.h
#   2. a system install (e.g. Debian's libonnxruntime-dev: /usr/include/onnxruntime)
#   3. a cached download of Debian trixie's libonnxruntime-dev (tools/fetch_ort_headers.sh), kept in
#      ORTQUANT_CACHE_DIR (default: $XDG_CACHE_HOME/ortquant or ~/.cache/ortquant) so rebuilds are offline.
# Sets ORT_INCLUDE_DIR.
set(ORTQUANT_ORT_INCLUDE_DIR "$ENV{ORTQUANT_ORT_INCLUDE_DIR}" CACHE PATH "Directory with onnxruntime_c_api.h")

if(ORTQUANT_ORT_INCLUDE_DIR)
  if(NOT EXISTS "${ORTQUANT_ORT_INCLUDE_DIR}/onnxruntime_c_api.h")
    message(FATAL_ERROR "ORTQUANT_ORT_INCLUDE_DIR=${ORTQUANT_ORT_INCLUDE_DIR} has no onnxruntime_c_api.h")
  endif()
  set(ORT_INCLUDE_DIR "${ORTQUANT_ORT_INCLUDE_DIR}")
else()
  find_path(ORT_SYSTEM_INCLUDE_DIR onnxruntime_c_api.h
            PATH_SUFFIXES onnxruntime onnxruntime/core/session
            PATHS /usr/include /usr/local/include)
  if(ORT_SYSTEM_INCLUDE_DIR)
    set(ORT_INCLUDE_DIR "${ORT_SYSTEM_INCLUDE_DIR}")
  else()
    if(DEFINED ENV{ORTQUANT_CACHE_DIR})
      set(_cache "$ENV{ORTQUANT_CACHE_DIR}")
    elseif(DEFINED ENV{XDG_CACHE_HOME})
      set(_cache "$ENV{XDG_CACHE_HOME}/ortquant")
    else()
      set(_cache "$ENV{HOME}/.cache/ortquant")
    endif()
    set(_dest "${_cache}/ort-headers-trixie")
    if(NOT EXISTS "${_dest}/include/onnxruntime/onnxruntime_c_api.h")
      message(STATUS "ortquant: fetching onnxruntime headers (Debian trixie libonnxruntime-dev) into ${_dest}")
      execute_process(COMMAND bash "${CMAKE_CURRENT_LIST_DIR}/../tools/fetch_ort_headers.sh" "${_dest}"
                      RESULT_VARIABLE _rc)
      if(NOT _rc EQUAL 0)
        message(FATAL_ERROR "Could not fetch the onnxruntime headers. Install Debian's libonnxruntime-dev or set "
                            "ORTQUANT_ORT_INCLUDE_DIR to a directory holding onnxruntime_c_api.h.")
      endif()
    endif()
    set(ORT_INCLUDE_DIR "${_dest}/include/onnxruntime")
  endif()
endif()
file(STRINGS "${ORT_INCLUDE_DIR}/onnxruntime_c_api.h" _ver REGEX "^#define ORT_API_VERSION")
message(STATUS "ortquant: onnxruntime headers in ${ORT_INCLUDE_DIR} (${_ver})")
