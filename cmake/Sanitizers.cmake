# AddressSanitizer + UndefinedBehaviorSanitizer for the extension and the CRT libraries built with it.
#
# On with -DTORCHDATA_S3_SANITIZE=ON (or the environment variable of the same name, through pyproject.toml).
# scripts/sanitize.sh builds such a wheel in its own build folder and runs tests under it; a sanitized
# extension only loads into a Python that has the compiler's ASan runtime preloaded (LD_PRELOAD).
#
# Undefined behaviour is not recoverable (-fno-sanitize-recover): the first report aborts the process, so a
# test run cannot pass with UB in it. The flags are directory-wide: our module and every CRT library that
# joins the build through add_subdirectory (aws-c-common, -cal, -io, -http, -compression, -auth, -sdkutils,
# -s3, aws-checksums). Not instrumented: the configure-time prebuilds s2n (TLS) and aws-lc, separate CMake
# projects; the subset's TLS tests run them as they are, around instrumented code (ours, and aws-c-io's s2n
# channel handler). Instrumenting s2n would cost 30% of the sanitizer build (measured: 156 of 515 compiler
# CPU-seconds). Their heap use still goes through ASan's allocator.

option(TORCHDATA_S3_SANITIZE "Build the extension and the CRT with AddressSanitizer and UBSan" OFF)

if(TORCHDATA_S3_SANITIZE)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "GNU|Clang" OR NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "TORCHDATA_S3_SANITIZE needs GCC or Clang, not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  add_compile_options(
    -fsanitize=address,undefined
    -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer
    # Debug info for the reports' stack traces, whatever the build type.
    -g)
  add_link_options(-fsanitize=address,undefined)
  message(STATUS "torchdata_s3: built with AddressSanitizer and UndefinedBehaviorSanitizer")
endif()
