# Locates the pinned awscrt source distribution, verifies it, unpacks it and applies our fixes to it
# (cmake/AwsCrtPatches.cmake).
#
# The AWS Common Runtime C libraries ship inside the awscrt sdist (folder `crt/`). Where it comes from, first
# found wins:
#   -DTORCHDATA_S3_AWSCRT_ARCHIVE=/path/awscrt-0.38.0.tar.gz   (or the environment variable of the same name)
#   third_party/awscrt-0.38.0.tar.gz   (our sdist carries it there, so that it builds offline: scripts/wheels.sh)
#   otherwise pip downloads it by package name, so the build needs no host name of its own and no git.
#
# Output: AWSCRT_CRT_DIR, the unpacked `crt/` folder.

set(AWSCRT_VERSION "0.38.0")
set(AWSCRT_SHA256 "4a8423c4a76390c6e5c4f386e3e367dccdcf67d6d1a0bc1c59776bb14cdc2ad9")

set(TORCHDATA_S3_AWSCRT_ARCHIVE "$ENV{TORCHDATA_S3_AWSCRT_ARCHIVE}"
    CACHE FILEPATH "Pre-downloaded awscrt-${AWSCRT_VERSION}.tar.gz (empty: fetch it with pip)")

set(_awscrt_work_dir "${CMAKE_BINARY_DIR}/awscrt")
set(_awscrt_archive "${TORCHDATA_S3_AWSCRT_ARCHIVE}")
set(_awscrt_bundled "${CMAKE_SOURCE_DIR}/third_party/awscrt-${AWSCRT_VERSION}.tar.gz")
if(NOT _awscrt_archive AND EXISTS "${_awscrt_bundled}")
  set(_awscrt_archive "${_awscrt_bundled}")
endif()

if(NOT _awscrt_archive)
  set(_awscrt_archive "${_awscrt_work_dir}/awscrt-${AWSCRT_VERSION}.tar.gz")
  if(NOT EXISTS "${_awscrt_archive}")
    message(STATUS "Fetching the awscrt ${AWSCRT_VERSION} source distribution with pip")
    execute_process(
      COMMAND "${Python_EXECUTABLE}" -m pip download --no-deps --no-binary :all:
              "awscrt==${AWSCRT_VERSION}" -d "${_awscrt_work_dir}"
      RESULT_VARIABLE _pip_result)
    if(NOT _pip_result EQUAL 0 OR NOT EXISTS "${_awscrt_archive}")
      message(FATAL_ERROR
        "Could not fetch awscrt==${AWSCRT_VERSION} with pip (exit ${_pip_result}). Download it on a machine "
        "with access to the package index (pip download --no-deps --no-binary :all: awscrt==${AWSCRT_VERSION}) "
        "and pass it with -DTORCHDATA_S3_AWSCRT_ARCHIVE=/path/to/awscrt-${AWSCRT_VERSION}.tar.gz")
    endif()
  endif()
endif()

if(NOT EXISTS "${_awscrt_archive}")
  message(FATAL_ERROR "TORCHDATA_S3_AWSCRT_ARCHIVE=${_awscrt_archive} does not exist")
endif()

file(SHA256 "${_awscrt_archive}" _actual_sha256)
if(NOT _actual_sha256 STREQUAL AWSCRT_SHA256)
  message(FATAL_ERROR
    "${_awscrt_archive} has sha256 ${_actual_sha256}, expected ${AWSCRT_SHA256} (awscrt ${AWSCRT_VERSION}). "
    "Delete it and build again, or pass the genuine archive.")
endif()

# Unpack and fix once per archive hash and version of our fixes; the stamp keeps re-configures from touching
# the sources (and so from rebuilding the CRT) after a C++ edit of our own.
set(_awscrt_source_root "${_awscrt_work_dir}/src")
set(AWSCRT_CRT_DIR "${_awscrt_source_root}/awscrt-${AWSCRT_VERSION}/crt")
set(_awscrt_patches "${CMAKE_CURRENT_LIST_DIR}/AwsCrtPatches.cmake")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_awscrt_patches}")
file(SHA256 "${_awscrt_patches}" _patches_sha256)
set(_awscrt_stamp "${_awscrt_source_root}/.unpacked-${AWSCRT_SHA256}-fixed-${_patches_sha256}")
if(NOT EXISTS "${_awscrt_stamp}")
  file(REMOVE_RECURSE "${_awscrt_source_root}")
  file(ARCHIVE_EXTRACT INPUT "${_awscrt_archive}" DESTINATION "${_awscrt_source_root}")
  # Extraction keeps the archive's (old) times, so a file that a dropped fix no longer changes would look older
  # than its object from the previous build and never be compiled again: give every file the extraction's time.
  file(GLOB_RECURSE _awscrt_extracted LIST_DIRECTORIES false "${_awscrt_source_root}/*")
  file(TOUCH_NOCREATE ${_awscrt_extracted})
  if(NOT EXISTS "${AWSCRT_CRT_DIR}/aws-c-s3/CMakeLists.txt")
    message(FATAL_ERROR "${AWSCRT_CRT_DIR} does not hold the CRT sources: is ${_awscrt_archive} an awscrt sdist?")
  endif()
  include("${_awscrt_patches}")
  file(TOUCH "${_awscrt_stamp}")
endif()
