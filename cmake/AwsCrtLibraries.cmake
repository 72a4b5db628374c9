# Builds the AWS CRT C libraries that S3 needs, static and position-independent, as part of this build.
#
# Only the S3 stack is built (no MQTT, no event-stream). The libraries join our own build graph through
# add_subdirectory, so ninja rebuilds nothing of theirs after an edit of ours. s2n (and aws-lc, when chosen)
# is built at configure time because s2n probes libcrypto while it configures.
#
# Input: AWSCRT_CRT_DIR. Output: the target `aws-c-s3`, which carries every other library transitively.

option(TORCHDATA_S3_USE_AWS_LC
  "Build aws-lc from the pinned sources for libcrypto instead of using the system's OpenSSL (self-contained wheels)"
  OFF)

# The CRT's own CMake helpers: aws_use_package() resolves sibling libraries by target name when
# IN_SOURCE_BUILD is on, and aws_prebuild_dependency() builds a project during configuration.
set(IN_SOURCE_BUILD ON CACHE BOOL "" FORCE)
list(APPEND CMAKE_MODULE_PATH "${AWSCRT_CRT_DIR}/aws-c-common/cmake")
include(AwsFindPackage)
include(AwsPrebuildDependency)

set(BUILD_SHARED_LIBS OFF)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(BUILD_TESTING OFF CACHE BOOL "" FORCE)

if(TORCHDATA_S3_USE_AWS_LC)
  set(USE_OPENSSL OFF CACHE BOOL "" FORCE)
  aws_prebuild_dependency(
    DEPENDENCY_NAME AWSLC
    SOURCE_DIR "${AWSCRT_CRT_DIR}/aws-lc"
    CMAKE_ARGUMENTS -DDISABLE_GO=ON -DDISABLE_PERL=ON -DBUILD_LIBSSL=OFF -DBUILD_TESTING=OFF)
else()
  find_package(OpenSSL REQUIRED COMPONENTS Crypto)
  set(USE_OPENSSL ON CACHE BOOL "" FORCE)
endif()

aws_prebuild_dependency(
  DEPENDENCY_NAME S2N
  SOURCE_DIR "${AWSCRT_CRT_DIR}/s2n"
  CMAKE_ARGUMENTS -DUNSAFE_TREAT_WARNINGS_AS_ERRORS=OFF -DBUILD_TESTING=OFF -DCMAKE_NO_SYSTEM_FROM_IMPORTED=ON)

# Order matters: each library finds the ones before it by target name.
foreach(_crt_library IN ITEMS
    aws-c-common aws-c-sdkutils aws-c-cal aws-c-io aws-checksums aws-c-compression aws-c-http aws-c-auth aws-c-s3)
  add_subdirectory("${AWSCRT_CRT_DIR}/${_crt_library}" "${CMAKE_BINARY_DIR}/crt/${_crt_library}" EXCLUDE_FROM_ALL)
endforeach()
