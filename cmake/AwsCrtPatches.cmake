# Fixes to the pinned CRT sources, applied right after they are unpacked (cmake/AwsCrtSource.cmake).
#
# Each fix is a CRT bug this project hit, with the test that shows it. Each one replaces a passage that must
# occur exactly once in the pinned sources, so a new pin fails the build here until every fix has been looked
# at again (dropped once upstream has its own, or moved to the new text).
#
# Input: AWSCRT_CRT_DIR, the unpacked `crt/` folder.

# Replaces the one occurrence of `before` in `relative_path` (under AWSCRT_CRT_DIR) with `after`.
function(_crt_replace_once relative_path before after)
  set(_path "${AWSCRT_CRT_DIR}/${relative_path}")
  file(READ "${_path}" _text)
  string(FIND "${_text}" "${before}" _first)
  string(FIND "${_text}" "${before}" _last REVERSE)
  if(_first EQUAL -1 OR NOT _first EQUAL _last)
    message(FATAL_ERROR
      "CRT fix not applicable: ${relative_path} does not hold the passage it replaces exactly once. A new "
      "awscrt pin needs every fix in cmake/AwsCrtPatches.cmake checked again.")
  endif()
  string(REPLACE "${before}" "${after}" _text "${_text}")
  file(WRITE "${_path}" "${_text}")
endfunction()

# aws-c-s3: a GET of an empty object crashes the process when the CRT's second request fails.
#
# An empty object answers the CRT's first ranged GET with 416; the CRT then asks again with `partNumber=1`.
# If that request fails without a response (connection dropped through every retry, the meta request
# cancelled while it waited in the queue), size discovery reads the response headers it never got: an
# assertion in debug builds, a NULL dereference (SIGSEGV) in release builds. The other discovery requests
# (HeadObject, the ranged GET) already hand their failure on; this makes the partNumber request do the same.
# A buffer-size mismatch is not a failure here: it carries the headers and is handled further on.
# Test: tests/integration/test_faults.py, test_a_failed_second_request_for_an_empty_object_fails_typed.
_crt_replace_once("aws-c-s3/source/s3_auto_ranged_get.c"
"        case AWS_S3_AUTO_RANGE_GET_REQUEST_TYPE_GET_OBJECT_WITH_PART_NUMBER_1:
            AWS_ASSERT(request->part_number == 1);
            AWS_ASSERT(request->send_data.response_headers != NULL);
"
"        case AWS_S3_AUTO_RANGE_GET_REQUEST_TYPE_GET_OBJECT_WITH_PART_NUMBER_1:
            AWS_ASSERT(request->part_number == 1);
            if (error_code != AWS_ERROR_SUCCESS &&
                error_code != AWS_ERROR_S3_INTERNAL_BUFFER_SIZE_MISMATCH_RETRYING_WITH_RANGE) {
                /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): the request failed; resurface its error. */
                aws_raise_error(error_code);
                break;
            }
            AWS_ASSERT(request->send_data.response_headers != NULL);
")
