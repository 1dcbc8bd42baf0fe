# The onnxruntime C API header. The build compiles against the copy vendored in third_party/onnxruntime/include
# (onnxruntime_c_api.h alone: it includes only C standard headers; version, license and how to refresh it in
# third_party/onnxruntime/VERSION), so a build needs no network, no apt and no system onnxruntime install.
# ORTQUANT_ORT_INCLUDE_DIR (CMake or environment variable, a directory holding onnxruntime_c_api.h) overrides it,
# e.g. to try a newer API version; the shipped wheel always uses the vendored header.
# Sets ORT_INCLUDE_DIR.
set(ORTQUANT_ORT_INCLUDE_DIR "$ENV{ORTQUANT_ORT_INCLUDE_DIR}" CACHE PATH
    "Directory with onnxruntime_c_api.h (default: the vendored third_party/onnxruntime/include)")

if(ORTQUANT_ORT_INCLUDE_DIR)
  if(NOT EXISTS "${ORTQUANT_ORT_INCLUDE_DIR}/onnxruntime_c_api.h")
    message(FATAL_ERROR "ORTQUANT_ORT_INCLUDE_DIR=${ORTQUANT_ORT_INCLUDE_DIR} has no onnxruntime_c_api.h")
  endif()
  set(ORT_INCLUDE_DIR "${ORTQUANT_ORT_INCLUDE_DIR}")
else()
  set(ORT_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../third_party/onnxruntime/include")
  get_filename_component(ORT_INCLUDE_DIR "${ORT_INCLUDE_DIR}" ABSOLUTE)
  if(NOT EXISTS "${ORT_INCLUDE_DIR}/onnxruntime_c_api.h")
    message(FATAL_ERROR "The vendored ${ORT_INCLUDE_DIR}/onnxruntime_c_api.h is missing (an incomplete sdist?)")
  endif()
endif()
file(STRINGS "${ORT_INCLUDE_DIR}/onnxruntime_c_api.h" _ver REGEX "^#define ORT_API_VERSION")
message(STATUS "ortquant: onnxruntime headers in ${ORT_INCLUDE_DIR} (${_ver})")
