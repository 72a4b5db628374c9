# Fixes to the pinned CRT sources, applied right after they are unpacked (cmake/AwsCrtSource.cmake).
#
# Each fix is a CRT bug this project hit, with the test that shows it, or a measured slowness, with the
# measurement. Each one adds code after (or replaces) a passage that must occur exactly once in the pinned
# sources, so a new pin fails the build here until every fix has been looked at again (dropped once upstream
# has its own, or moved to the new text).
#
# Input: AWSCRT_CRT_DIR, the unpacked `crt/` folder.

# Inserts `addition` right after `anchor`, a passage that must occur exactly once in `relative_path` (under
# AWSCRT_CRT_DIR).
function(_crt_insert_after relative_path anchor addition)
  set(_path "${AWSCRT_CRT_DIR}/${relative_path}")
  file(READ "${_path}" _text)
  string(FIND "${_text}" "${anchor}" _first)
  string(FIND "${_text}" "${anchor}" _last REVERSE)
  if(_first EQUAL -1 OR NOT _first EQUAL _last)
    message(FATAL_ERROR
      "CRT fix not applicable: ${relative_path} does not hold the passage it follows exactly once. A new "
      "awscrt pin needs every fix in cmake/AwsCrtPatches.cmake checked again.")
  endif()
  string(REPLACE "${anchor}" "${anchor}${addition}" _text "${_text}")
  file(WRITE "${_path}" "${_text}")
endfunction()

# Replaces `passage`, which must occur exactly once in `relative_path`, with `replacement`.
function(_crt_replace relative_path passage replacement)
  _crt_insert_after("${relative_path}" "${passage}" "")  # only checks that the passage occurs exactly once
  set(_path "${AWSCRT_CRT_DIR}/${relative_path}")
  file(READ "${_path}" _text)
  string(REPLACE "${passage}" "${replacement}" _text "${_text}")
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
_crt_insert_after("aws-c-s3/source/s3_auto_ranged_get.c"
"        case AWS_S3_AUTO_RANGE_GET_REQUEST_TYPE_GET_OBJECT_WITH_PART_NUMBER_1:
            AWS_ASSERT(request->part_number == 1);
"
"            if (error_code != AWS_ERROR_SUCCESS &&
                error_code != AWS_ERROR_S3_INTERNAL_BUFFER_SIZE_MISMATCH_RETRYING_WITH_RANGE) {
                /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): the request failed; resurface its error. */
                aws_raise_error(error_code);
                break;
            }
")

# aws-c-s3: downloading an empty object into a file crashes the process.
#
# A GET given `recv_filepath` hands each part's body to a file-writing thread (out-of-order delivery) and counts
# it as sent; the meta request may finish only once every body sent is written. While it has no finish result,
# the CRT waits for "delivered < total parts" alone, and an empty object has no parts: its one (empty) body,
# from the partNumber=1 request, is still queued for writing when the meta request finishes and frees the
# file's descriptor slots, and the write then dereferences them (SIGSEGV, seen with S3Client.download_file of
# a 0-byte object). Waiting also for every body sent, as the branch with a finish result already does, fixes it.
# Test: tests/integration/test_file_transfer.py, test_a_file_goes_up_and_comes_back_byte_exact[0].
_crt_insert_after("aws-c-s3/source/s3_auto_ranged_get.c"
"            if (meta_request->synced_data.num_parts_delivery_completed < auto_ranged_get->synced_data.total_num_parts) {
                goto has_work_remaining;
            }
"
"
            /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): bodies handed to file writers are not written yet. */
            if (meta_request->synced_data.num_parts_delivery_completed <
                meta_request->synced_data.num_parts_delivery_sent) {
                goto has_work_remaining;
            }
")

# aws-c-s3: an upload fails when the server is slow to answer parts for a few seconds.
#
# The CRT times UploadPart answers and, once ten parts have succeeded, cuts off any part whose answer takes
# longer than about the 90th percentile seen (at least 1 s; it creeps up by 0.1-1 s as cut-offs pass 0.1% and
# 1% of parts), then sends the part again. That hedges against one slow server among many. But every cut-off
# is a retry, and retries draw on the client's one retry quota (aws-c-io's standard strategy: 500 tokens, 10
# per timeout), shared by every request of the process. When the server itself is slow for a while (a store
# flushing its disk; seen with the benchmark endpoint and a 4 GiB upload on this machine) the cut-offs alone
# empty it: 55 parts cut off at 1.0-2.2 s, then "bucket capacity is empty. Rejecting retry request.", and the
# upload failed after 12 s with AWS_ERROR_HTTP_RESPONSE_FIRST_BYTE_TIMEOUT while boto3 and s3fs, which wait,
# finished. Retrying only the first attempt does not help (tried): the first attempts are what drain the quota,
# leaving none for real failures of reads and writes alike. Here parts are never cut off early: a part waits for
# its answer within the stall detection every request has (S3Config.request_timeout_ms), as other clients do.
# Test: benchmarks' put-file workload at 4 GiB (docs/benchmarks.md, run 23): failed before, completes after.
_crt_replace("aws-c-s3/source/s3_meta_request.c"
"    if (request->request_type == AWS_S3_REQUEST_TYPE_UPLOAD_PART && !meta_request->is_express) {"
"    /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): UploadPart answers are never cut off early. */
    const bool cut_off_slow_parts = false;
    if (cut_off_slow_parts && request->request_type == AWS_S3_REQUEST_TYPE_UPLOAD_PART && !meta_request->is_express) {")

# aws-c-s3: a successful answer without a single header line crashes the process.
#
# The CRT keeps a response's status and headers from the HTTP layer's header callback, which is never called
# for a response with no header lines ("HTTP/1.1 206 Partial Content" and a blank line: never S3, but a broken
# proxy or gateway can send it). The status then stays 0 and the headers NULL, and code that trusts a 2xx
# answer to carry headers dereferences them: an empty object's partNumber=1 GET (SIGSEGV, seen), the parts
# of uploads, the ETag of the first part. Taking both at the end of the header block, where the HTTP layer
# always calls, gives every such answer an empty header set, so it fails on its missing headers instead.
# Test: tests/integration/test_bad_input.py, test_an_answer_without_headers_fails_typed.
_crt_insert_after("aws-c-s3/source/s3_meta_request.c"
"    (void)stream;

    if (header_block != AWS_HTTP_HEADER_BLOCK_MAIN) {
        return AWS_OP_SUCCESS;
    }

    struct aws_s3_connection *connection = user_data;
    AWS_PRECONDITION(connection);

    struct aws_s3_request *request = connection->request;
    AWS_PRECONDITION(request);
"
"
    /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): a main header block with no header lines never reached
     * s_s3_meta_request_incoming_headers; record what it would have. */
    if (request->send_data.response_status == 0) {
        aws_http_stream_get_incoming_response_status(stream, &request->send_data.response_status);
    }
    if (request->send_data.response_headers == NULL &&
        (request->record_response_headers ||
         s_s3_meta_request_error_code_from_response_status(request->send_data.response_status) !=
             AWS_ERROR_SUCCESS)) {
        request->send_data.response_headers = aws_http_headers_new(request->allocator);
    }
")

# aws-c-common: parsing an empty XML document hands memchr a NULL pointer (undefined behaviour).
#
# A success answer with an empty body (CreateMultipartUpload answered by a broken endpoint, see the fix above)
# reaches aws_xml_parse with a cursor of length 0 whose pointer is NULL; the parser then calls memchr on it.
# The outcome was already right (AWS_ERROR_INVALID_XML), but UBSan aborts on the call, and a compiler may
# assume the pointer is not NULL. This refuses the empty document before any memchr, with the same error.
# Test: the same one, under scripts/sanitize.sh ([multipart write]).
_crt_insert_after("aws-c-common/source/xml_parser.c"
"    AWS_PRECONDITION(options->on_root_encountered);
"
"
    /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): no memchr on an empty document's (NULL) pointer. */
    if (options->doc.len == 0) {
        AWS_LOGF_ERROR(AWS_LS_COMMON_XML_PARSER, \"XML document is empty.\");
        return aws_raise_error(AWS_ERROR_INVALID_XML);
    }
")

# aws-c-common: the XML parser spends most of a ListObjectsV2 page's parse on work S3's documents never need.
#
# Measured on a page of 1,000 keys (240 kB): the CRT thread that parses listing pages was the busiest thread of
# a parallel listing (about 4 CPU seconds per 10^6 keys), and three costs of every element stood out:
# * s_try_skip_non_element compares each '<' with three prefixes ("<!--", "<![CDATA[", "<?"), all of which
#   start with "<!" or "<?": one look at the second byte settles it for every element tag.
# * s_load_node_decl zeroes two scratch arrays (about 500 bytes) and splits the declaration on spaces even
#   when it holds none; then the whole declaration is the name, as the split would find.
# * s_advance_to_closing_tag zeroes two 259-byte name buffers that are then written before they are read.
# The results are unchanged (the parser's own tests cover the constructs skipped; tests/unit/test_list_parsing.py
# and the listing tests cover S3 documents with attributes, CDATA, comments and escapes).
_crt_insert_after("aws-c-common/source/xml_parser.c"
"    *out_skipped = false;

    if (input->len == 0 || input->ptr[0] != '<') {
        return AWS_OP_SUCCESS;
    }
"
"
    /* torchdata_s3 speed-up (cmake/AwsCrtPatches.cmake): every construct skipped here starts with <! or <?. */
    if (input->len < 2 || (input->ptr[1] != '!' && input->ptr[1] != '?')) {
        return AWS_OP_SUCCESS;
    }
")
_crt_insert_after("aws-c-common/source/xml_parser.c"
"    node->is_empty = decl_body->ptr[decl_body->len - 1] == '/';
"
"
    /* torchdata_s3 speed-up (cmake/AwsCrtPatches.cmake): with no space, the whole declaration is the name and
     * there are no attributes, as the split below would find, without zeroing its scratch arrays. */
    if (memchr(decl_body->ptr, ' ', decl_body->len) == NULL) {
        node->name = *decl_body;
        return AWS_OP_SUCCESS;
    }
")
_crt_replace("aws-c-common/source/xml_parser.c"
"    uint8_t name_close[MAX_NAME_LEN + NODE_CLOSE_OVERHEAD] = {0};
    uint8_t name_open[MAX_NAME_LEN + NODE_CLOSE_OVERHEAD] = {0};
"
"    /* torchdata_s3 speed-up (cmake/AwsCrtPatches.cmake): not zeroed; only the bytes appended below are read. */
    uint8_t name_close[MAX_NAME_LEN + NODE_CLOSE_OVERHEAD];
    uint8_t name_open[MAX_NAME_LEN + NODE_CLOSE_OVERHEAD];
")

# aws-c-s3: every successful answer but a GetObject's is searched for <Error><Code> through to its end.
#
# A 200 answer can carry an error document (S3's "200 InternalError"), so aws-c-s3 looks for the path
# Error/Code in the body of every such answer. When the document's root is another element (a ListObjectsV2
# page's ListBucketResult), the path cannot be in it, yet the parser still scanned to the root's closing tag:
# a memchr over every '<' of a 240 kB page, about 1.5% of a parallel listing's CPU, on the CRT thread that
# receives the answers. This stops the search at a root off the path, with the result the full scan gave
# (AWS_ERROR_STRING_MATCH_NOT_FOUND). Test: tests/integration/test_faults.py,
# test_one_fault_on_a_listing_is_retried[internal_error_in_200] (an error document answered with 200 is still
# found and retried), and every listing test (their pages are not errors).
_crt_insert_after("aws-c-s3/source/s3_util.c"
"    } else {
        /* this node is not on the path, continue parsing siblings */
"
"        if (traversal->path_name_i == 0) {
            /* torchdata_s3 speed-up (cmake/AwsCrtPatches.cmake): the root is off the path, so nothing below
             * it is on the path either: stop instead of scanning to its end. */
            return aws_raise_error(AWS_ERROR_STRING_MATCH_NOT_FOUND);
        }
"
)

# aws-c-io: every channel message is zeroed when it goes back to its pool.
#
# aws_message_pool_release clears the bytes a message held before the pool hands the memory out again. For a
# download that is one more write pass over every byte received, on the event-loop thread that also reads the
# socket: 3.5% of the CPU of a 64 MiB read() loop on the `fast` endpoint (perf, 2026-11-26). Nothing relies on
# the clearing: the pool's fallback allocations (messages larger than its segments) are never cleared, a message
# is always written before it is read (aws_socket_read, the TLS handler's output), and the same bytes are copied
# on, uncleared, into the S3 part buffers and the reader's results, so clearing this one copy hides nothing.
# Tests: every read test (each message's bytes are written before use; the digests would show stale bytes).
_crt_replace("aws-c-io/source/message_pool.c"
"    memset(message->message_data.buffer, 0, message->message_data.len);
    message->allocator = NULL;
"
"    /* torchdata_s3 speed-up (cmake/AwsCrtPatches.cmake): not cleared; every message is written before read. */
    message->allocator = NULL;
")

# aws-c-io: over TLS, every 16 KiB record travels through the HTTP and S3 layers on its own.
#
# s2n's s2n_recv returns after one TLS record unless multi-record receive is on, and aws-c-io never turns it
# on: its TLS handler then hands each record (at most 16 KiB) downstream as a message of its own, although the
# message it asked the pool for holds 256 KiB (csrc/crt_runtime.cpp), and each message costs a pass through
# the HTTP decoder and the S3 body callback. With it on, s2n_recv fills the message with every record already
# received (it returns what it has when the socket would block, never waits for more: aws-c-io's sockets are
# non-blocking). Records, their authentication and alerts are handled exactly as before.
# Tests: tests/integration/test_tls.py and test_tls_faults.py (every read over TLS, and TLS failures).
_crt_insert_after("aws-c-io/source/s2n/s2n_tls_channel_handler.c"
"        s_log_and_raise_s2n_errno(\"ctx: failed to set monotonic clock\");
        goto cleanup_s2n_config;
    }
"
"
    /* torchdata_s3 speed-up (cmake/AwsCrtPatches.cmake): many records per s2n_recv, one message downstream. */
    if (s2n_config_set_recv_multi_record(s2n_ctx->s2n_config, true) != S2N_SUCCESS) {
        s_log_and_raise_s2n_errno(\"ctx: failed to enable multi-record receive\");
        goto cleanup_s2n_config;
    }
")

# aws-c-io: a failed handshake waits out s2n's blinding delay (10-30 s) before the caller hears of it.
#
# When s2n rejects what the peer sent, it picks a random delay of 10-30 s (its "blinding") and aws-c-io holds
# the connection's close for that long: a peer timing how long the rejection took learns nothing, which defeats
# timing attacks on record decryption (Lucky 13 against CBC suites, which the CRT's default security policy
# still offers). On an established connection that close is all the delay holds back: aws-c-http fails the
# request at once and the S3 client retries on another connection. A failed handshake, though, reaches the S3
# client only when its connection has closed, so every bad certificate cost 10-30 s. Nothing secret is timed
# there: the client fails the handshake on what the server showed (certificate, host name, dates, protocol),
# which the server knows, and a tampered handshake record is keyed to that one handshake. So the delay now
# applies only to connections whose handshake had succeeded, and s2n's own default (10-30 s) stays in force
# for them (csrc/tls_failures.cpp, docs/configuration.md "TLS").
# Tests: tests/integration/test_tls.py (failed handshakes fail within seconds) and
# test_tls_blinding.py (a tampered record after the handshake: the request is retried at once and exact,
# the tampered connection closes only after 10 s or more).
_crt_replace("aws-c-io/source/s2n/s2n_tls_channel_handler.c"
"    uint64_t shutdown_delay = s2n_connection_get_delay(s2n_handler->connection);
"
"    /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): s2n's blinding only after a completed handshake. */
    uint64_t shutdown_delay =
        s2n_handler->state == NEGOTIATION_SUCCEEDED ? s2n_connection_get_delay(s2n_handler->connection) : 0;
")

# aws-c-auth: one failed credentials refresh fails every request, although the keys in hand are still valid.
#
# The cached provider (which the default chain puts in front of the container, web-identity and instance
# providers) asks its source again 5 minutes before the credentials expire. If that one refresh fails (the
# container credentials endpoint answering 500 for a few seconds, say), it throws the cached credentials away
# and hands "no credentials" to every request waiting for them: reads fail with
# AWS_AUTH_SIGNING_NO_CREDENTIALS with minutes of validity left, and each later request asks the source again
# at once. botocore keeps keys that are still valid through a failed refresh; so does this now: a failed
# refresh keeps credentials that stay valid for more than 10 s (a request signed with them still reaches
# S3 in time), hands them to the waiting requests and tries again after a backoff (1, 2, 4 ... 32 s, never
# past half the time they stay usable). Credentials that are no longer usable are dropped as before, and the
# error reaches the request. Second fix: credentials that live less than the 5-minute early-refresh window
# (short sessions, and the tests' rotation) were refreshed on every request, one HTTP round trip to the source
# per request signed; they are now refreshed at half their remaining life.
# Tests: tests/integration/test_credential_refresh.py.
_crt_insert_after("aws-c-auth/source/credentials_provider_cached.c"
"    aws_io_clock_fn *system_clock_fn;
    struct aws_linked_list pending_queries;
"
"    /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): refreshes failed in a row, for the backoff. */
    uint32_t failed_refreshes;
")
_crt_insert_after("aws-c-auth/source/credentials_provider_cached.c"
"    uint32_t failed_refreshes;
};
"
"
/* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): how much longer the cached credentials may sign requests
 * (0: no longer; UINT64_MAX: they do not expire), keeping a margin before their expiration. */
#define TORCHDATA_S3_EXPIRATION_MARGIN_SECONDS 10
static uint64_t s_torchdata_s3_usable_for_ns(struct aws_credentials_provider_cached *impl) {
    uint64_t expiration = aws_credentials_get_expiration_timepoint_seconds(impl->cached_credentials);
    if (expiration == UINT64_MAX) {
        return UINT64_MAX;
    }
    uint64_t system_now = 0;
    if (impl->system_clock_fn(&system_now)) {
        return 0;
    }
    uint64_t now_seconds = aws_timestamp_convert(system_now, AWS_TIMESTAMP_NANOS, AWS_TIMESTAMP_SECS, NULL);
    if (expiration <= now_seconds + TORCHDATA_S3_EXPIRATION_MARGIN_SECONDS) {
        return 0;
    }
    return aws_timestamp_convert(
        expiration - now_seconds - TORCHDATA_S3_EXPIRATION_MARGIN_SECONDS,
        AWS_TIMESTAMP_SECS,
        AWS_TIMESTAMP_NANOS,
        NULL);
}
")
_crt_replace("aws-c-auth/source/credentials_provider_cached.c"
"                } else {
                    next_refresh_time_in_ns = high_res_now;
                }
"
"                } else if (credentials_expiration_timepoint_seconds > system_now_seconds) {
                    /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): at half the remaining life. */
                    next_refresh_time_in_ns = high_res_now + aws_timestamp_convert(
                                                                 credentials_expiration_timepoint_seconds -
                                                                     system_now_seconds,
                                                                 AWS_TIMESTAMP_SECS,
                                                                 AWS_TIMESTAMP_NANOS,
                                                                 NULL) /
                                                                 2;
                } else {
                    next_refresh_time_in_ns = high_res_now;
                }
")
_crt_replace("aws-c-auth/source/credentials_provider_cached.c"
"    impl->next_refresh_time = next_refresh_time_in_ns;
"
"    /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): a failed refresh keeps credentials still usable. */
    if (credentials == NULL && impl->cached_credentials != NULL) {
        uint64_t usable_for_ns = s_torchdata_s3_usable_for_ns(impl);
        if (usable_for_ns > 0) {
            uint32_t doublings = impl->failed_refreshes < 5 ? impl->failed_refreshes : 5;
            impl->failed_refreshes += 1;
            uint64_t backoff_ns =
                aws_timestamp_convert((uint64_t)1 << doublings, AWS_TIMESTAMP_SECS, AWS_TIMESTAMP_NANOS, NULL);
            if (backoff_ns > usable_for_ns / 2) {
                backoff_ns = usable_for_ns / 2;
            }
            if (backoff_ns < 100 * 1000 * 1000) {
                backoff_ns = 100 * 1000 * 1000;
            }
            impl->next_refresh_time = aws_add_u64_saturating(high_res_now, backoff_ns);
            AWS_LOGF_WARN(
                AWS_LS_AUTH_CREDENTIALS_PROVIDER,
                \"(id=%p) Cached credentials provider could not refresh credentials (%s); the current ones are \"
                \"still valid and stay in use, next attempt in %\" PRIu64 \" ms\",
                (void *)provider,
                aws_error_name(error_code),
                aws_timestamp_convert(backoff_ns, AWS_TIMESTAMP_NANOS, AWS_TIMESTAMP_MILLIS, NULL));
            struct aws_credentials *kept = impl->cached_credentials;
            aws_credentials_acquire(kept);
            aws_mutex_unlock(&impl->lock);
            s_aws_credentials_query_list_notify_and_clean_up(
                &pending_queries, provider->allocator, kept, AWS_ERROR_SUCCESS);
            aws_credentials_release(kept);
            return;
        }
    }
    if (credentials != NULL) {
        impl->failed_refreshes = 0;
    }
    impl->next_refresh_time = next_refresh_time_in_ns;
")

# aws-c-s3: an object_size_hint sends `GET ?partNumber=1`, which S3-compatible stores may answer without the
# Content-Range the CRT then requires.
#
# With a hint no larger than a part (our loaders pass the listing's size), the CRT asks for the object's first
# upload part by number, reserving a buffer of the hint's size. nginx and other plain HTTP servers ignore the
# query and answer 200 with the whole object and no Content-Range, which fails the GET
# (AWS_ERROR_S3_MISSING_CONTENT_RANGE_HEADER): a listing's size made a readable object unreadable. This asks
# for the same bytes with a ranged GET, `Range: bytes=0-(hint-1)`, which every store answers: the buffer is
# still the hint's size, and a hint smaller than the object (it changed after the listing) costs no retry, the
# answer's Content-Range gives the real size and the rest comes in ranged parts as usual.
# Test: tests/integration/test_size_hint.py.
_crt_replace("aws-c-s3/source/s3_auto_ranged_get.c"
"    if (auto_ranged_get->object_size_hint_available && auto_ranged_get->object_size_hint > 0 &&
        auto_ranged_get->object_size_hint <= meta_request->part_size) {
        return AWS_S3_AUTO_RANGE_GET_REQUEST_TYPE_GET_OBJECT_WITH_PART_NUMBER_1;
    }
"
"    if (auto_ranged_get->object_size_hint_available && auto_ranged_get->object_size_hint > 0 &&
        auto_ranged_get->object_size_hint <= meta_request->part_size) {
        /* torchdata_s3 (cmake/AwsCrtPatches.cmake): a first ranged GET of the hint's size instead. */
        return AWS_S3_AUTO_RANGE_GET_REQUEST_TYPE_GET_OBJECT_WITH_RANGE;
    }
")
_crt_insert_after("aws-c-s3/source/s3_auto_ranged_get.c"
"                        uint64_t part_range_start = 0;
                        uint64_t first_part_size = meta_request->part_size;
"
"                        /* torchdata_s3 (cmake/AwsCrtPatches.cmake): the first part of a whole-object GET is the
                         * hint's size when that is smaller than a part (see above). */
                        if (!auto_ranged_get->initial_message_has_range_header &&
                            auto_ranged_get->object_size_hint_available && auto_ranged_get->object_size_hint > 0 &&
                            auto_ranged_get->object_size_hint < first_part_size) {
                            first_part_size = auto_ranged_get->object_size_hint;
                            auto_ranged_get->synced_data.first_part_size = first_part_size;
                        }
")

# aws-c-s3: a GET part can land where its reader wants it, instead of in a pool buffer copied out later.
#
# A whole-object read() of 64 MiB paid three copies per byte: socket to channel message (kernel), message to the
# part's pool buffer (here, on the connection's thread), pool buffer to the `bytes` that read() returns (the
# reader's thread): 18% of that read's CPU was the last one (docs/benchmarks.md, "Where the CPU of a 64 MiB
# read() goes"). The reader knows where every byte of the rest of the object will end, so a part that has not
# begun yet can be received straight into its slice of the result. This adds a meta request option asked,
# when a part's first body byte arrives, for that part's memory; an empty answer keeps the pool buffer. The
# memory is the caller's: the CRT neither frees nor grows it (a body longer than the slice fails the part),
# and the caller keeps it alive until the meta request finished. The ticket stays reserved, so the pool's
# memory limit still counts the part.
# Tests: tests/integration/test_landing.py.
_crt_replace("aws-c-s3/include/aws/s3/s3_client.h"
"struct aws_s3_meta_request_options {
"
"/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): memory for a GET part's body, bytes [range_start,
 * range_end] of the object (the part's range, or less when its answer's Content-Length says so), asked for
 * when its first byte arrives. Return a buffer with capacity 0 for the
 * client's own pool buffer, or a non-owning buffer (allocator NULL, len 0) that stays valid until the meta
 * request finishes. Called on the part's connection thread. */
typedef struct aws_byte_buf(aws_s3_meta_request_part_landing_fn)(
    struct aws_s3_meta_request *meta_request,
    uint64_t range_start,
    uint64_t range_end,
    void *user_data);

struct aws_s3_meta_request_options {
")
_crt_insert_after("aws-c-s3/include/aws/s3/s3_client.h"
"    aws_s3_meta_request_receive_body_callback_ex_fn *body_callback_ex;
"
"
    /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): see aws_s3_meta_request_part_landing_fn. */
    aws_s3_meta_request_part_landing_fn *part_landing_callback;
")
_crt_insert_after("aws-c-s3/include/aws/s3/private/s3_meta_request_impl.h"
"    aws_s3_meta_request_receive_body_callback_ex_fn *body_callback_ex;
"
"    aws_s3_meta_request_part_landing_fn *part_landing_callback; /* torchdata_s3 addition */
")
_crt_insert_after("aws-c-s3/source/s3_meta_request.c"
"    meta_request->body_callback_ex = options->body_callback_ex;
"
"    meta_request->part_landing_callback = options->part_landing_callback; /* torchdata_s3 addition */
")
_crt_replace("aws-c-s3/source/s3_meta_request.c"
"static int s_response_body_append(struct aws_byte_buf *buf, const struct aws_byte_cursor *data) {
"
"/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): whether a request's answer goes into a GET part's buffer
 * of fixed size (a successful GET with a ticket; puts can have tickets too, for their request bodies). */
static bool s_s3_request_fills_part_buffer(struct aws_s3_request *request) {
    return request->request_type == AWS_S3_REQUEST_TYPE_GET_OBJECT && request->ticket != NULL &&
           s_s3_meta_request_error_code_from_response_status(request->send_data.response_status) == AWS_ERROR_SUCCESS;
}

/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): a GET part's buffer, the caller's memory if it has some
 * for this part, else the part's pool buffer. */
static struct aws_byte_buf s_s3_part_body_buffer(struct aws_s3_meta_request *meta_request, struct aws_s3_request *request) {
    struct aws_byte_buf landing;
    AWS_ZERO_STRUCT(landing);
    if (meta_request->part_landing_callback != NULL) {
        /* The part's range, narrowed to what its answer announced when its headers were kept (a first part asked
         * for before the object's size was known may end far past the object). */
        uint64_t range_end = request->part_range_end;
        uint64_t content_length = 0;
        if (request->send_data.response_headers != NULL &&
            aws_s3_parse_content_length_response_header(
                request->allocator, request->send_data.response_headers, &content_length) == AWS_OP_SUCCESS &&
            content_length != 0 && request->part_range_start + content_length - 1 < range_end) {
            range_end = request->part_range_start + content_length - 1;
        }
        landing = meta_request->part_landing_callback(
            meta_request, request->part_range_start, range_end, meta_request->user_data);
    }
    if (landing.capacity != 0) {
        AWS_FATAL_ASSERT(landing.allocator == NULL && landing.len == 0 && landing.buffer != NULL);
        return landing;
    }
    return aws_s3_buffer_ticket_claim(request->ticket);
}

static int s_response_body_append(struct aws_byte_buf *buf, const struct aws_byte_cursor *data) {
")
_crt_replace("aws-c-s3/source/s3_meta_request.c"
"        if (successful_response && request->request_type == AWS_S3_REQUEST_TYPE_GET_OBJECT && request->ticket != NULL) {
"
"        if (s_s3_request_fills_part_buffer(request)) { /* torchdata_s3: the same test as the in-place target's */
")
_crt_replace("aws-c-s3/source/s3_meta_request.c"
"            request->send_data.response_body = aws_s3_buffer_ticket_claim(request->ticket);
        } else {"
"            request->send_data.response_body = s_s3_part_body_buffer(meta_request, request); /* torchdata_s3 */
        } else {")

# aws-c-auth: the STS web identity provider (EKS IRSA) cannot reach an STS endpoint given as a URL.
#
# Its endpoint comes from AWS_ENDPOINT_URL_STS, then AWS_ENDPOINT_URL, then a profile's services section, else
# sts.<region>.amazonaws.com. The overrides are URLs ("https://sts.example:8443", as the AWS CLI and SDKs read
# them), but the provider used the whole string as a host name, always on port 443 over TLS: a job that sets
# AWS_ENDPOINT_URL for its S3-compatible store (MinIO, Ceph) and gets its credentials from web identity asked
# DNS for "http://minio:9000" and got no credentials. This parses a URL: its host, its port (else the scheme's),
# TLS only for https, and a Host header of host[:port]. A bare host name works as before.
# Test: tests/integration/test_credential_refresh.py (web identity, the token file rotated on disk).
_crt_replace("aws-c-auth/source/credentials_provider_sts_web_identity.c"
"    struct aws_tls_connection_options tls_connection_options;
    AWS_ZERO_STRUCT(tls_connection_options);

    struct aws_credentials_provider *provider = NULL;
    struct aws_credentials_provider_sts_web_identity_impl *impl = NULL;
"
"    struct aws_tls_connection_options tls_connection_options;
    AWS_ZERO_STRUCT(tls_connection_options);
    /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): the endpoint may be a URL. */
    struct aws_uri endpoint_uri;
    AWS_ZERO_STRUCT(endpoint_uri);
    bool endpoint_is_url = false;
    bool endpoint_uses_tls = true;
    uint32_t endpoint_port = 443;
    struct aws_byte_buf host_header_value;
    AWS_ZERO_STRUCT(host_header_value);

    struct aws_credentials_provider *provider = NULL;
    struct aws_credentials_provider_sts_web_identity_impl *impl = NULL;
")
_crt_replace("aws-c-auth/source/credentials_provider_sts_web_identity.c"
"    aws_tls_connection_options_init_from_ctx(&tls_connection_options, options->tls_ctx);
    struct aws_byte_cursor host = aws_byte_cursor_from_string(parameters->endpoint);
    if (aws_tls_connection_options_set_server_name(&tls_connection_options, allocator, &host)) {"
"    struct aws_byte_cursor host = aws_byte_cursor_from_string(parameters->endpoint);
    /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): an override is a URL; a bare host keeps the old meaning. */
    struct aws_byte_cursor scheme_separator = aws_byte_cursor_from_c_str(\"://\");
    struct aws_byte_cursor found_separator;
    if (aws_byte_cursor_find_exact(&host, &scheme_separator, &found_separator) == AWS_OP_SUCCESS) {
        if (aws_uri_init_parse(&endpoint_uri, allocator, &host)) {
            AWS_LOGF_ERROR(
                AWS_LS_AUTH_CREDENTIALS_PROVIDER,
                \"(id=%p): the STS endpoint override \\\"%s\\\" is not a URL\",
                (void *)provider,
                aws_string_c_str(parameters->endpoint));
            goto on_error;
        }
        endpoint_is_url = true;
        host = *aws_uri_host_name(&endpoint_uri);
        endpoint_uses_tls = !aws_byte_cursor_eq_c_str_ignore_case(aws_uri_scheme(&endpoint_uri), \"http\");
        endpoint_port = aws_uri_port(&endpoint_uri) != 0 ? aws_uri_port(&endpoint_uri) : (endpoint_uses_tls ? 443 : 80);
    }
    aws_byte_buf_init_copy_from_cursor(&host_header_value, allocator, host);
    if (endpoint_port != (endpoint_uses_tls ? 443u : 80u)) {
        char port_text[16];
        snprintf(port_text, sizeof(port_text), \":%\" PRIu32, endpoint_port);
        struct aws_byte_cursor port_cursor = aws_byte_cursor_from_c_str(port_text);
        aws_byte_buf_append_dynamic(&host_header_value, &port_cursor);
    }
    if (endpoint_uses_tls) {
        aws_tls_connection_options_init_from_ctx(&tls_connection_options, options->tls_ctx);
    }
    if (endpoint_uses_tls && aws_tls_connection_options_set_server_name(&tls_connection_options, allocator, &host)) {")
_crt_replace("aws-c-auth/source/credentials_provider_sts_web_identity.c"
"    manager_options.port = 443;"
"    manager_options.port = endpoint_port; /* torchdata_s3 fix */")
_crt_replace("aws-c-auth/source/credentials_provider_sts_web_identity.c"
"    manager_options.tls_connection_options = &tls_connection_options;"
"    manager_options.tls_connection_options = endpoint_uses_tls ? &tls_connection_options : NULL; /* torchdata_s3 fix */")
_crt_replace("aws-c-auth/source/credentials_provider_sts_web_identity.c"
"    impl->endpoint = aws_string_new_from_string(allocator, parameters->endpoint);"
"    impl->endpoint = aws_string_new_from_buf(allocator, &host_header_value); /* torchdata_s3 fix: the Host header */")
_crt_replace("aws-c-auth/source/credentials_provider_sts_web_identity.c"
"    s_parameters_destroy(parameters);
    aws_tls_connection_options_clean_up(&tls_connection_options);
    return provider;"
"    s_parameters_destroy(parameters);
    aws_tls_connection_options_clean_up(&tls_connection_options);
    aws_byte_buf_clean_up(&host_header_value); /* torchdata_s3 fix */
    if (endpoint_is_url) {
        aws_uri_clean_up(&endpoint_uri);
    }
    return provider;")
_crt_replace("aws-c-auth/source/credentials_provider_sts_web_identity.c"
"    aws_credentials_provider_destroy(provider);
    s_parameters_destroy(parameters);
    aws_tls_connection_options_clean_up(&tls_connection_options);
    return NULL;"
"    aws_credentials_provider_destroy(provider);
    s_parameters_destroy(parameters);
    aws_tls_connection_options_clean_up(&tls_connection_options);
    aws_byte_buf_clean_up(&host_header_value); /* torchdata_s3 fix */
    if (endpoint_is_url) {
        aws_uri_clean_up(&endpoint_uri);
    }
    return NULL;")

# aws-c-io, aws-c-http, aws-c-s3: a GET part's body bytes are read from the socket straight into its buffer.
#
# Over plain HTTP every body byte was copied twice in the process before a reader saw it: the kernel copies it
# into a channel message (every client pays that one), then aws-c-s3 copies the message into the part's buffer
# on the connection's thread: 19% of a 64 MiB read() loop's CPU on the `fast` endpoint (docs/benchmarks.md,
# "Where the CPU of a 64 MiB read() goes"). Once a response is in its body, of known length, and nothing
# received before is still waiting to be decoded, the place of its next bytes is known: the part buffer, right
# after the bytes it already holds. This lets the socket handler ask the handler above it for that place
# (a new, optional channel handler function; the HTTP/1.1 connection answers it through a new, optional
# stream callback, which aws-c-s3 answers with its part buffer) and read the socket there. The bytes then
# travel up as usual, in a message whose data is that memory: the decoder, windows, checksums and length
# checks see what they always saw, and aws-c-s3 keeps them where they are instead of copying them onto
# themselves. The read is capped at what the body still owes and at the windows, so a message never holds
# bytes past the body. TLS (its handler sits between), chunked bodies, queued messages and growing buffers
# (error answers) keep the copying path. While a GET waits for its head, the socket is read at most 2 KiB at a
# time, so that a small object's body, read next, takes the same path. aws_s3_bytes_received_in_place()
# counts the bytes that skipped the copy; aws_s3_set_receive_in_place(false) turns it all off (measurements).
# Measured (docs/benchmarks.md, run 25, same run): read(1 MiB) of 64 MiB objects 0.64 -> 0.56 CPU s/GB, one
# read() per object 0.73 -> 0.61. Decrypting TLS records the same way was tried: no measurable change.
# Tests: tests/integration/test_received_in_place.py, and every read test (digests of every byte).
_crt_insert_after("aws-c-io/include/aws/io/channel.h"
"    void (*trigger_read)(struct aws_channel_handler *handler);
"
"
    /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): optional. Where the next at most `max_bytes` bytes
     * read by the handler below may be placed directly, sparing a copy out of a channel message: a buffer with
     * len 0, no allocator, and the room there as capacity (0: nowhere, use a message of the pool). Bytes read
     * there come up through process_read_message at once, in a message whose data is that buffer. */
    struct aws_byte_buf (*direct_read_target)(struct aws_channel_handler *handler, size_t max_bytes);

    /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): optional. The most bytes the handler wants in the next
     * message read for it when direct_read_target has no place (0: no limit): a response's head read alone lets
     * its body, read next, go straight to its place. */
    size_t (*read_size_limit)(struct aws_channel_handler *handler);
")
_crt_replace("aws-c-io/source/message_pool.c"
"            if (message->message_data.capacity > msg_pool->small_block_pool.segment_size - MSG_OVERHEAD) {
                aws_memory_pool_release(&msg_pool->application_data_pool, wrapper);"
"            /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): a message lent other memory (see
             * direct_read_target) came from the small block pool (its lender asks for 0 bytes), whatever its
             * capacity says. Releasing one must never write its data: it is a part buffer, or the result of a
             * read(), maybe already given back when a failed message is released late. That holds because
             * messages are no longer cleared on release (the fix above). */
            if (message->message_data.buffer == wrapper->buffer_start &&
                message->message_data.capacity > msg_pool->small_block_pool.segment_size - MSG_OVERHEAD) {
                aws_memory_pool_release(&msg_pool->application_data_pool, wrapper);")
_crt_replace("aws-c-io/source/socket_channel_handler.c"
"        struct aws_io_message *message = aws_channel_acquire_message_from_pool(
            socket_handler->slot->channel, AWS_IO_MESSAGE_APPLICATION_DATA, iter_max_read);
"
"        /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): read where the handler above wants the bytes. */
        struct aws_io_message *message = NULL;
        struct aws_channel_slot *reader_slot = socket_handler->slot->adj_right;
        struct aws_channel_handler *reader = reader_slot != NULL ? reader_slot->handler : NULL;
        if (reader != NULL && reader->vtable->direct_read_target != NULL) {
            struct aws_byte_buf target = reader->vtable->direct_read_target(reader, iter_max_read);
            if (target.capacity != 0) {
                AWS_FATAL_ASSERT(
                    target.buffer != NULL && target.len == 0 && target.allocator == NULL &&
                    target.capacity <= iter_max_read);
                message = aws_channel_acquire_message_from_pool(
                    socket_handler->slot->channel, AWS_IO_MESSAGE_APPLICATION_DATA, 0);
                message->message_data = target;
            }
        }
        if (message == NULL && reader != NULL && reader->vtable->read_size_limit != NULL) {
            size_t limit = reader->vtable->read_size_limit(reader);
            if (limit != 0 && limit < iter_max_read) {
                iter_max_read = limit;
            }
        }
        if (message == NULL) {
            message = aws_channel_acquire_message_from_pool(
                socket_handler->slot->channel, AWS_IO_MESSAGE_APPLICATION_DATA, iter_max_read);
        }
")
_crt_insert_after("aws-c-http/include/aws/http/private/h1_decoder.h"
"AWS_HTTP_API uint64_t aws_h1_decoder_get_content_length(const struct aws_h1_decoder *decoder);
"
"/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): bytes the body of Content-Length still owes, 0 when the
 * decoder is not inside such a body. */
AWS_HTTP_API uint64_t aws_h1_decoder_unchunked_body_remaining(const struct aws_h1_decoder *decoder);
")
_crt_insert_after("aws-c-http/source/h1_decoder.c"
"uint64_t aws_h1_decoder_get_content_length(const struct aws_h1_decoder *decoder) {
    return decoder->content_length;
}
"
"
/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake). */
uint64_t aws_h1_decoder_unchunked_body_remaining(const struct aws_h1_decoder *decoder) {
    if (decoder->is_done || decoder->run_state != s_state_unchunked_body) {
        return 0;
    }
    return decoder->content_length - decoder->content_processed;
}
")
_crt_replace("aws-c-http/include/aws/http/request_response.h"
"struct aws_http_make_request_options {
"
"/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): where the response's next body bytes may be received
 * directly: a buffer with len 0, no allocator, and the room there as capacity (0: nowhere). Called on the
 * connection's thread after the main header block's done callback, between body callbacks; bytes received
 * there come to on_response_body at once, with data->ptr equal to the buffer's. HTTP/1.1 without TLS only. */
typedef struct aws_byte_buf(aws_http_on_incoming_body_target_fn)(struct aws_http_stream *stream, void *user_data);

struct aws_http_make_request_options {
")
_crt_insert_after("aws-c-http/include/aws/http/request_response.h"
"    aws_http2_on_remote_end_stream_fn *on_h2_remote_end_stream;
"
"
    /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): optional, see aws_http_on_incoming_body_target_fn. */
    aws_http_on_incoming_body_target_fn *on_response_body_target;
")
_crt_insert_after("aws-c-http/include/aws/http/private/request_response_impl.h"
"    aws_http_on_incoming_body_fn *on_incoming_body;
"
"    aws_http_on_incoming_body_target_fn *on_incoming_body_target; /* torchdata_s3 addition */
")
_crt_insert_after("aws-c-http/source/h1_stream.c"
"        options->on_response_body,
        options->on_complete,
        options->on_destroy);
    if (!stream) {
        return NULL;
    }
"
"    stream->base.on_incoming_body_target = options->on_response_body_target; /* torchdata_s3 addition */
")
_crt_insert_after("aws-c-http/source/h1_connection.c"
"static void s_gather_statistics(struct aws_channel_handler *handler, struct aws_array_list *stats);
"
"static struct aws_byte_buf s_handler_direct_read_target(struct aws_channel_handler *handler, size_t max_bytes);
static size_t s_handler_read_size_limit(struct aws_channel_handler *handler);
")
_crt_insert_after("aws-c-http/source/h1_connection.c"
"            .gather_statistics = s_gather_statistics,
"
"            .direct_read_target = s_handler_direct_read_target, /* torchdata_s3 addition */
            .read_size_limit = s_handler_read_size_limit,       /* torchdata_s3 addition */
")
_crt_replace("aws-c-http/source/h1_connection.c"
"void aws_h1_connection_try_process_read_messages(struct aws_h1_connection *connection) {
"
"/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): the incoming stream's place for the next body bytes, when
 * they would be decoded at once (nothing queued, windows open) and are all body (capped at what it owes). */
static struct aws_byte_buf s_handler_direct_read_target(struct aws_channel_handler *handler, size_t max_bytes) {
    struct aws_h1_connection *connection = handler->impl;
    struct aws_h1_stream *stream = connection->thread_data.incoming_stream;
    struct aws_byte_buf none;
    AWS_ZERO_STRUCT(none);
    if (connection->thread_data.read_state != AWS_CONNECTION_READ_OPEN ||
        connection->thread_data.has_switched_protocols || connection->thread_data.is_processing_read_messages ||
        !aws_linked_list_empty(&connection->thread_data.read_buffer.messages) || stream == NULL ||
        stream->base.on_incoming_body_target == NULL) {
        return none;
    }
    uint64_t limit = aws_h1_decoder_unchunked_body_remaining(connection->thread_data.incoming_stream_decoder);
    limit = aws_min_u64(limit, stream->thread_data.stream_window);
    limit = aws_min_u64(limit, connection->thread_data.connection_window);
    limit = aws_min_u64(limit, max_bytes);
    if (limit == 0) {
        return none;
    }
    if (!stream->thread_data.is_incoming_head_done) {
        /* The decoder is in the body, so the head is complete: tell the stream now, as its first body byte
         * would, so that the stream sees its head before it is asked where its body goes. */
        if (s_mark_head_done(stream)) {
            s_shutdown_due_to_error(connection, aws_last_error());
            return none;
        }
    }
    struct aws_byte_buf target = stream->base.on_incoming_body_target(&stream->base, stream->base.user_data);
    if (target.capacity == 0 || target.buffer == NULL || target.len != 0 || target.allocator != NULL) {
        return none;
    }
    if (target.capacity > limit) {
        target.capacity = (size_t)limit;
    }
    return target;
}

/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): while a stream that can receive its body in place waits for
 * its response's head, read little (S3's heads are well under 2 KiB), so that the body's bytes, which on a fast
 * link are already in the socket, are read next straight into their place instead of into this message. */
static size_t s_handler_read_size_limit(struct aws_channel_handler *handler) {
    struct aws_h1_connection *connection = handler->impl;
    struct aws_h1_stream *stream = connection->thread_data.incoming_stream;
    if (stream == NULL || stream->base.on_incoming_body_target == NULL || stream->thread_data.is_incoming_head_done ||
        aws_h1_decoder_unchunked_body_remaining(connection->thread_data.incoming_stream_decoder) != 0) {
        return 0;
    }
    return 2048;
}

void aws_h1_connection_try_process_read_messages(struct aws_h1_connection *connection) {
")
_crt_insert_after("aws-c-s3/include/aws/s3/s3_client.h"
"AWS_EXTERN_C_BEGIN
"
"
/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): body bytes of GET parts the socket handler read straight
 * into their part buffers, over the life of the process. */
AWS_S3_API
uint64_t aws_s3_bytes_received_in_place(void);

/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): turns receiving in place on (the default) or off, for the
 * whole process; off, every body byte is copied out of channel messages as upstream does (for measurements). */
AWS_S3_API
void aws_s3_set_receive_in_place(bool enabled);
")
_crt_insert_after("aws-c-s3/source/s3_meta_request.c"
"static int s_s3_meta_request_incoming_body(
    struct aws_http_stream *stream,
    const struct aws_byte_cursor *data,
    void *user_data);
"
"
/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): see aws_http_on_incoming_body_target_fn. */
static struct aws_byte_buf s_s3_meta_request_incoming_body_target(struct aws_http_stream *stream, void *user_data);
static struct aws_atomic_var s_bytes_received_in_place;
static struct aws_atomic_var s_receive_in_place_off;
uint64_t aws_s3_bytes_received_in_place(void) {
    return (uint64_t)aws_atomic_load_int(&s_bytes_received_in_place);
}
void aws_s3_set_receive_in_place(bool enabled) {
    aws_atomic_store_int(&s_receive_in_place_off, enabled ? 0 : 1);
}
")
_crt_insert_after("aws-c-s3/source/s3_meta_request.c"
"    options.on_response_body = s_s3_meta_request_incoming_body;
"
"    /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): GET parts may be received in place. */
    if (request->request_type == AWS_S3_REQUEST_TYPE_GET_OBJECT && aws_atomic_load_int(&s_receive_in_place_off) == 0) {
        options.on_response_body_target = s_s3_meta_request_incoming_body_target;
    }
")
_crt_replace("aws-c-s3/source/s3_meta_request.c"
"static int s_response_body_append(struct aws_byte_buf *buf, const struct aws_byte_cursor *data) {
"
"/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): only a successful GET part's buffer of fixed size (a pool
 * buffer or a landing slice, claimed here at the body's first byte as s_s3_meta_request_incoming_body would);
 * a growing buffer (error answers, answers to other requests) may move. */
static struct aws_byte_buf s_s3_meta_request_incoming_body_target(struct aws_http_stream *stream, void *user_data) {
    (void)stream;
    struct aws_s3_connection *connection = user_data;
    struct aws_s3_request *request = connection->request;
    struct aws_s3_meta_request *meta_request = request->meta_request;
    struct aws_byte_buf *body = &request->send_data.response_body;
    struct aws_byte_buf target;
    AWS_ZERO_STRUCT(target);
    if (!s_s3_request_fills_part_buffer(request)) {
        return target;
    }
    if (body->capacity == 0) {
        *body = s_s3_part_body_buffer(meta_request, request);
    }
    if (body->allocator == NULL && body->buffer != NULL && body->len < body->capacity) {
        target.buffer = body->buffer + body->len;
        target.capacity = body->capacity - body->len;
    }
    return target;
}

static int s_response_body_append(struct aws_byte_buf *buf, const struct aws_byte_cursor *data) {
    /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): bytes received in place are already there. */
    if (buf->allocator == NULL && data->len != 0 && data->ptr == buf->buffer + buf->len &&
        data->len <= buf->capacity - buf->len) {
        buf->len += data->len;
        aws_atomic_fetch_add_explicit(&s_bytes_received_in_place, data->len, aws_memory_order_relaxed);
        return AWS_OP_SUCCESS;
    }
")

# aws-c-io: a client socket's read size per event-loop tick is the channel fragment size; give it its own.
#
# The socket handler of every client connection is created with g_aws_channel_max_fragment_size (upstream 16 KiB)
# as its most bytes read per tick, and a tick that reads that much schedules another task to read on. This
# project's runtime already raises the fragment size to 256 KiB (csrc/crt_runtime.cpp, kChannelMessageBytes),
# which also sizes channel messages; this gives client sockets a read size of their own
# (aws_io_set_client_socket_read_size, 256 KiB by default: the same as before by default), so that the
# benchmark can measure upstream's 16 KiB reads beside ours in one process (variant torchdata_s3-16k_reads: a
# GiB in 16 KiB pieces took 70,000 read() calls and 13,800 epoll_wait calls, against 8,100 and 915).
# Measured: docs/benchmarks.md, run 27.
# Tests: every read test (digests of every byte), tests/integration/test_received_in_place.py.
_crt_insert_after("aws-c-io/include/aws/io/channel.h"
"extern AWS_IO_API size_t g_aws_channel_max_fragment_size;
"
"
/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): the most bytes a client connection's socket handler reads
 * per event-loop tick (connections made from then on). Returns the previous value; 0 leaves it unchanged. */
AWS_IO_API size_t aws_io_set_client_socket_read_size(size_t bytes);
")
_crt_replace("aws-c-io/source/channel_bootstrap.c"
"            connection_args->channel_data.socket,
            socket_slot,
            g_aws_channel_max_fragment_size);"
"            connection_args->channel_data.socket,
            socket_slot,
            (size_t)aws_atomic_load_int(&s_client_socket_read_size)); /* torchdata_s3 addition */")
_crt_insert_after("aws-c-io/source/channel_bootstrap.c"
"#include <aws/io/socket_channel_handler.h>
"
"
/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): see aws_io_set_client_socket_read_size. */
#include <aws/common/atomics.h>
static struct aws_atomic_var s_client_socket_read_size = AWS_ATOMIC_INIT_INT(256 * 1024);
size_t aws_io_set_client_socket_read_size(size_t bytes) {
    if (bytes == 0) {
        return (size_t)aws_atomic_load_int(&s_client_socket_read_size);
    }
    return (size_t)aws_atomic_exchange_int(&s_client_socket_read_size, bytes);
}
")

# aws-c-s3: a GET part's body can be scattered over several places of the caller's, each read() result its own.
#
# A reader that reads a large object in pieces (`read(1 MiB)`: the loader's loop, torch.load's zip reader)
# paid for every byte a copy out of the part's pool buffer into the `bytes` its read() returned, on its own
# thread: 27% of that loop's CPU once the socket was read straight into the part buffers (perf, fast, 64 MiB
# objects). A part holds 8 such results, so "land where the reader wants it" above, which gives a part one
# place, cannot serve it. This lets the landing callback answer "scattered" (no memory, the part's length as
# capacity): each place for the part's next bytes is then asked of a second callback, once per socket read
# where the bytes are received in place and as often as needed where they are copied out of a message. The
# part's pool buffer stays reserved and counts the bytes (its len), but is never written; the body delivered
# for a scattered part points at it, and its caller takes the bytes from where it placed them. The places
# are the caller's until the meta request finishes, as for a landing. Response checksums are never validated
# on such a part (the delivery would read the pool buffer): asking for both is a caller's bug, fatal.
# Measured: docs/benchmarks.md, run 27.
# Tests: tests/integration/test_scattered_reads.py (in the sanitizer run).
_crt_replace("aws-c-s3/include/aws/s3/s3_client.h"
"struct aws_s3_meta_request_options {
"
"/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): where the body bytes of a scattered GET part go from
 * object offset `offset` on: a non-owning buffer (allocator NULL, len 0) with the room there as capacity, at
 * most `max_bytes`, valid until the meta request finishes; capacity 0 fails the part. A part is scattered when
 * aws_s3_meta_request_part_landing_fn answered it with buffer NULL and a nonzero capacity. Called on the
 * part's connection thread. */
typedef struct aws_byte_buf(aws_s3_meta_request_part_scatter_fn)(
    struct aws_s3_meta_request *meta_request,
    uint64_t offset,
    size_t max_bytes,
    void *user_data);

struct aws_s3_meta_request_options {
")
_crt_insert_after("aws-c-s3/include/aws/s3/s3_client.h"
"    aws_s3_meta_request_part_landing_fn *part_landing_callback;
"
"
    /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): see aws_s3_meta_request_part_scatter_fn. */
    aws_s3_meta_request_part_scatter_fn *part_scatter_callback;
")
_crt_insert_after("aws-c-s3/include/aws/s3/private/s3_meta_request_impl.h"
"    aws_s3_meta_request_part_landing_fn *part_landing_callback; /* torchdata_s3 addition */
"
"    aws_s3_meta_request_part_scatter_fn *part_scatter_callback; /* torchdata_s3 addition */
")
_crt_insert_after("aws-c-s3/source/s3_meta_request.c"
"    meta_request->part_landing_callback = options->part_landing_callback; /* torchdata_s3 addition */
"
"    meta_request->part_scatter_callback = options->part_scatter_callback; /* torchdata_s3 addition */
")
_crt_insert_after("aws-c-s3/include/aws/s3/private/s3_request.h"
"        struct aws_byte_buf response_body;
"
"
        /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): this attempt's body is scattered (see
         * aws_s3_meta_request_part_scatter_fn); scatter_next is the place last handed out for bytes read in
         * place, NULL once they came. */
        bool scattered;
        uint8_t *scatter_next;
")
_crt_replace("aws-c-s3/source/s3_meta_request.c"
"    if (landing.capacity != 0) {
        AWS_FATAL_ASSERT(landing.allocator == NULL && landing.len == 0 && landing.buffer != NULL);
        return landing;
    }"
"    if (landing.capacity != 0 && landing.buffer == NULL) {
        /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): scattered. The pool buffer counts the bytes. */
        AWS_FATAL_ASSERT(
            meta_request->part_scatter_callback != NULL && landing.allocator == NULL && landing.len == 0 &&
            !meta_request->checksum_config.validate_response_checksum);
        request->send_data.scattered = true;
        return aws_s3_buffer_ticket_claim(request->ticket);
    }
    if (landing.capacity != 0) {
        AWS_FATAL_ASSERT(landing.allocator == NULL && landing.len == 0 && landing.buffer != NULL);
        return landing;
    }")
_crt_replace("aws-c-s3/source/s3_meta_request.c"
"    if (body->capacity == 0) {
        *body = s_s3_part_body_buffer(meta_request, request);
    }
    if (body->allocator == NULL"
"    if (body->capacity == 0) {
        *body = s_s3_part_body_buffer(meta_request, request);
    }
    if (request->send_data.scattered) { /* torchdata_s3 addition: the caller's place for the next bytes */
        request->send_data.scatter_next = NULL;
        if (body->len < body->capacity) {
            size_t room = body->capacity - body->len;
            target = meta_request->part_scatter_callback(
                meta_request, request->part_range_start + body->len, room, meta_request->user_data);
            if (target.capacity == 0 || target.buffer == NULL || target.len != 0 || target.allocator != NULL) {
                AWS_ZERO_STRUCT(target); /* read into a message; the append below asks again */
                return target;
            }
            if (target.capacity > room) {
                target.capacity = room;
            }
            request->send_data.scatter_next = target.buffer;
        }
        return target;
    }
    if (body->allocator == NULL")
_crt_replace("aws-c-s3/source/s3_meta_request.c"
"static int s_s3_meta_request_incoming_body(
    struct aws_http_stream *stream,
    const struct aws_byte_cursor *data,
    void *user_data) {
"
"/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): a scattered part's body bytes. Those read straight into
 * the place last handed out are there already; others are copied to the places the caller gives for them. */
static int s_scattered_body_append(
    struct aws_s3_meta_request *meta_request,
    struct aws_s3_request *request,
    const struct aws_byte_cursor *data) {
    struct aws_byte_buf *body = &request->send_data.response_body;
    if (data->len > body->capacity - body->len) {
        return aws_raise_error(AWS_ERROR_DEST_COPY_TOO_SMALL);
    }
    if (data->len != 0 && data->ptr == request->send_data.scatter_next) {
        body->len += data->len;
        request->send_data.scatter_next = NULL;
        aws_atomic_fetch_add_explicit(&s_bytes_received_in_place, data->len, aws_memory_order_relaxed);
        return AWS_OP_SUCCESS;
    }
    struct aws_byte_cursor rest = *data;
    while (rest.len != 0) {
        struct aws_byte_buf place = meta_request->part_scatter_callback(
            meta_request, request->part_range_start + body->len, rest.len, meta_request->user_data);
        if (place.capacity == 0 || place.buffer == NULL) {
            return aws_raise_error(AWS_ERROR_DEST_COPY_TOO_SMALL);
        }
        size_t n = place.capacity < rest.len ? place.capacity : rest.len;
        memcpy(place.buffer, rest.ptr, n);
        aws_byte_cursor_advance(&rest, n);
        body->len += n;
    }
    return AWS_OP_SUCCESS;
}

static int s_s3_meta_request_incoming_body(
    struct aws_http_stream *stream,
    const struct aws_byte_cursor *data,
    void *user_data) {
")
_crt_replace("aws-c-s3/source/s3_meta_request.c"
"    if (s_response_body_append(&request->send_data.response_body, data)) {
"
"    if (request->send_data.scattered ? s_scattered_body_append(meta_request, request, data) /* torchdata_s3 */
                                     : s_response_body_append(&request->send_data.response_body, data)) {
")

# aws-c-io: choosing an event loop reads /dev/urandom, once per meta request and per connection.
#
# aws_event_loop_group_get_next_loop picks the less loaded of two loops drawn at random, and draws them with
# aws_device_random_u32: a read() system call each time (upstream's own comment: "it's not cheap"). A
# loader of small objects starts one meta request per object on the Python thread, so it paid that call per
# object: 0.8% of all CPU samples of a 110 kB read loop on `fast` (perf with frame pointers, 2026-11-27), about
# 2 us per object. The draw needs no entropy, only spread: a per-thread xorshift generator, seeded once from the
# device, gives the same best-of-two choice without the system call. (Forked children copy the state and draw
# the same sequence as their parent: harmless for a load-balancing choice.)
# Tests: every test spreads its connections and requests over the loops this way; no behaviour changes.
_crt_replace("aws-c-io/source/event_loop.c"
"    uint32_t random_32_bit_num = 0;
    aws_device_random_u32(&random_32_bit_num);
"
"    /* torchdata_s3 speed-up (cmake/AwsCrtPatches.cmake): no system call per choice. */
    static AWS_THREAD_LOCAL uint64_t s_loop_choice_state = 0;
    if (s_loop_choice_state == 0) {
        uint64_t seed = 0;
        aws_device_random_u64(&seed);
        s_loop_choice_state = seed | 1; /* xorshift never leaves a non-zero state */
    }
    s_loop_choice_state ^= s_loop_choice_state << 13;
    s_loop_choice_state ^= s_loop_choice_state >> 7;
    s_loop_choice_state ^= s_loop_choice_state << 17;
    uint32_t random_32_bit_num = (uint32_t)(s_loop_choice_state >> 32);
")

# aws-c-s3: the client's scheduler asks the host resolver about every waiting meta request on every pass.
#
# s_s3_client_should_update_meta_request looks up how many addresses the meta request's host has (two mutexes
# and a hash of the host name) and uses the answer only when at least g_min_num_connections (10) requests are
# being prepared or queued. The scheduler asks for every meta request in its list, twice per pass, and runs a
# pass for every request that starts or ends: with 128 small objects requested ahead that was 1.6% of all CPU
# samples of a 110 kB read loop on `fast` (perf with frame pointers, 2026-11-27), about 5 us of event-loop time
# per object. Testing the cheap condition first gives the same answer; the resolver is asked only when it can
# change it.
# Tests: every read test (the scheduler's decisions are the same).
_crt_replace("aws-c-s3/source/s3_client.c"
"    size_t num_known_vips = client->vtable->get_host_address_count(
        client->client_bootstrap->host_resolver, endpoint->host_name, AWS_GET_HOST_ADDRESS_COUNT_RECORD_TYPE_A);
    if (num_known_vips == 0 && (client->threaded_data.num_requests_being_prepared +
                                client->threaded_data.request_queue_size) >= g_min_num_connections) {
        return false;
    }
"
"    /* torchdata_s3 speed-up (cmake/AwsCrtPatches.cmake): the resolver is asked only when its answer counts. */
    if ((client->threaded_data.num_requests_being_prepared + client->threaded_data.request_queue_size) >=
            g_min_num_connections &&
        client->vtable->get_host_address_count(
            client->client_bootstrap->host_resolver, endpoint->host_name, AWS_GET_HOST_ADDRESS_COUNT_RECORD_TYPE_A) ==
            0) {
        return false;
    }
")

# aws-c-s3: every step of a small GET hops between three event-loop threads.
#
# A meta request delivers its events (headers, body, finish) and prepares its requests (signing) on a loop of
# the client's own body-streaming group, apart from the scheduler's loop and the connections' loops. A small
# GET thus went scheduler -> its loop (prepare) -> scheduler (queue) -> connection -> its loop (delivery), each
# hop an eventfd write and a wake-up of another thread. This adds a meta request option to use the scheduler's
# loop instead: preparing and queueing then run without a hop. This project sets it for GETs of at most a part
# (whose events are its own callbacks, which only queue what arrived and wake the reader). Not for larger ones:
# their deliveries would wait behind the scheduler loop's socket reads, and parts that begin before read()
# asks for them arrive in pool buffers instead of the result (a whole 64 MiB read() went from 0.83 to 1.13
# CPU s/GB with every GET on that loop).
# Measured: 2,000 x 110 kB on `fast`, 5 interleaved pairs, process CPU per object 140 -> 114 us (medians).
# Tests: every read test; tests/integration/test_guessed_length_landing.py and test_known_length_landing.py
# read such GETs.
_crt_insert_after("aws-c-s3/include/aws/s3/s3_client.h"
"    aws_s3_meta_request_part_landing_fn *part_landing_callback;
"
"
    /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): deliver this meta request's events and prepare its
     * requests on the client's scheduling loop rather than on a loop of its body-streaming group. */
    bool events_on_scheduler_loop;
")
_crt_replace("aws-c-s3/source/s3_meta_request.c"
"        meta_request->io_event_loop = aws_event_loop_group_get_next_loop(client->body_streaming_elg);
"
"        /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): see events_on_scheduler_loop. */
        meta_request->io_event_loop = options->events_on_scheduler_loop
                                          ? client->process_work_event_loop
                                          : aws_event_loop_group_get_next_loop(client->body_streaming_elg);
")

# aws-c-auth: every SigV4 signature derives its signing key again: four HMAC-SHA256s per request.
#
# The key depends only on the secret access key, the date (a day), the region and the service, so it is the same
# for every request of a day. Each thread now remembers the last key it derived with what it was derived from
# (copied, compared byte for byte: a different secret, day, region or service derives a new one; the replaced
# secret is wiped) and reuses it. Inputs larger than the memo hold are never remembered. The derivation itself is
# left as upstream wrote it (renamed only), so it formats the day once more on a miss: once a day per thread.
# Measured: one HMAC through OpenSSL 3 (context made, keyed, fed, finished, freed) 1.8-2.2 us on the 2-core AMD VM,
# so 7-9 us of event-loop CPU per request: per 110 kB object about 2-3% of a small GET's process CPU. In
# 6 alternating pairs of fresh processes (2,000 x 110 kB through the loader, `fast`), the event-loop threads'
# CPU per object went 150 -> 143 us (medians; single rounds vary 108-189). Counted by callgrind (all threads of
# a process reading 110 kB objects one after another through the native stream, 100 against 500 objects, twice):
# 372,000 -> 296,000 instructions per object, 20% fewer.
# Tests: tests/integration/test_credential_refresh.py, whose keys rotate every few seconds under load on the same
# client's threads while moto checks every signature (with the secret left out of the comparison, the first
# request after a rotation failed with SignatureDoesNotMatch: checked), and test_credentials.py.
_crt_replace("aws-c-auth/source/aws_signing.c"
"static int s_compute_sigv4_signing_key(struct aws_signing_state_aws *state, struct aws_byte_buf *dest) {
    /* dest should be empty */
"
"/* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): the last SigV4 signing key this thread derived, with the
 * secret, day, region and service it was derived from. */
struct s_sigv4_key_memo {
    uint8_t secret[128];
    size_t secret_len;
    uint8_t date[32];
    size_t date_len;
    uint8_t region[64];
    size_t region_len;
    uint8_t service[64];
    size_t service_len;
    uint8_t key[AWS_SHA256_LEN];
    bool valid;
};
static AWS_THREAD_LOCAL struct s_sigv4_key_memo s_sigv4_key_memo;

static bool s_memo_field_equals(const uint8_t *field, size_t field_len, struct aws_byte_cursor value) {
    struct aws_byte_cursor kept = aws_byte_cursor_from_array(field, field_len);
    return aws_byte_cursor_eq(&kept, &value);
}

/* The caller has checked that value fits. */
static void s_memo_field_set(uint8_t *field, size_t field_capacity, size_t *field_len, struct aws_byte_cursor value) {
    struct aws_byte_buf kept = aws_byte_buf_from_empty_array(field, field_capacity);
    aws_byte_buf_write_from_whole_cursor(&kept, value);
    *field_len = kept.len;
}

static int s_derive_sigv4_signing_key(struct aws_signing_state_aws *state, struct aws_byte_buf *dest);

static int s_compute_sigv4_signing_key(struct aws_signing_state_aws *state, struct aws_byte_buf *dest) {
    const struct aws_signing_config_aws *config = &state->config;
    struct s_sigv4_key_memo *memo = &s_sigv4_key_memo;
    uint8_t date_storage[32];
    struct aws_byte_buf date_buf = aws_byte_buf_from_empty_array(date_storage, sizeof(date_storage));
    struct aws_byte_cursor secret = aws_credentials_get_secret_access_key(config->credentials);
    bool memorable = secret.len <= sizeof(memo->secret) && config->region.len <= sizeof(memo->region) &&
                     config->service.len <= sizeof(memo->service) &&
                     aws_date_time_to_utc_time_short_str(&config->date, AWS_DATE_FORMAT_ISO_8601_BASIC, &date_buf) ==
                         AWS_OP_SUCCESS;
    struct aws_byte_cursor date = aws_byte_cursor_from_buf(&date_buf);
    if (memorable && memo->valid && s_memo_field_equals(memo->secret, memo->secret_len, secret) &&
        s_memo_field_equals(memo->date, memo->date_len, date) &&
        s_memo_field_equals(memo->region, memo->region_len, config->region) &&
        s_memo_field_equals(memo->service, memo->service_len, config->service)) {
        struct aws_byte_cursor key = aws_byte_cursor_from_array(memo->key, sizeof(memo->key));
        return aws_byte_buf_append(dest, &key);
    }
    if (s_derive_sigv4_signing_key(state, dest)) {
        return AWS_OP_ERR;
    }
    if (memorable && dest->len == sizeof(memo->key)) {
        aws_secure_zero(memo, sizeof(*memo));
        s_memo_field_set(memo->secret, sizeof(memo->secret), &memo->secret_len, secret);
        s_memo_field_set(memo->date, sizeof(memo->date), &memo->date_len, date);
        s_memo_field_set(memo->region, sizeof(memo->region), &memo->region_len, config->region);
        s_memo_field_set(memo->service, sizeof(memo->service), &memo->service_len, config->service);
        memcpy(memo->key, dest->buffer, sizeof(memo->key));
        memo->valid = true;
    }
    return AWS_OP_SUCCESS;
}

static int s_derive_sigv4_signing_key(struct aws_signing_state_aws *state, struct aws_byte_buf *dest) {
    /* dest should be empty */
")

# aws-c-s3: the number of connections a client uses at once can be lowered (and raised again) while it runs.
#
# The CRT fixes it when the client is made (from the throughput target, or `max_active_connections_override`).
# The right number depends on where the bytes come from, which the client learns only by reading: on a near
# endpoint that is bound by CPU, two connections read large objects 14% faster at 10% less CPU per GB than the
# default pool (docs/benchmarks.md, run 33), while an endpoint that limits each connection's rate reads at 0.45x
# with two. So torchdata_s3 can measure the rate as it reads and move the limit (csrc/connection_tuner.cpp,
# with S3Config(tune_connections=True)).
# The limit only ever lowers the client's own number: the endpoint's connection pool is still sized from the
# number without it, when the endpoint is first used, so raising the limit back never waits on a pool too small.
# Raising it asks the client's work loop to run, so waiting requests start without waiting for another event.
# The tuner also reads how many requests hold connections (the CRT's own count), so that a limit far above what
# the reader keeps busy comes down in one step.
# Tests: tests/integration/test_connection_tuner.py (a tuned client moves the limit while every byte arrives; also
# under the sanitizers). Measured: the limit at 2, on a pool sized for 125, reads like a client configured with 2
# (docs/benchmarks.md, run 34). Not tested: that a lowered limit bounds the connections in use (no test hook
# sets it; the CRT applies it where it applies its own configured number).
_crt_insert_after("aws-c-s3/include/aws/s3/private/s3_client_impl.h"
"    const uint32_t max_active_connections_override;
"
"
    /* torchdata_s3 patch (cmake/AwsCrtPatches.cmake): 0, or a lower limit on the connections in use at once that
     * aws_s3_client_limit_active_connections may change at any time. */
    struct aws_atomic_var active_connections_limit;
")
_crt_replace("aws-c-s3/include/aws/s3/s3_client.h"
"AWS_EXTERN_C_END
AWS_POP_SANE_WARNING_LEVEL

#endif /* AWS_S3_CLIENT_H */"
"/* torchdata_s3 patch (cmake/AwsCrtPatches.cmake): limits the connections the client uses at once to `limit`
 * (0: no limit beyond the client's configuration), from any thread, at any time. It never raises the number the
 * client was configured with, which it returns. Requests on connections beyond a lowered limit finish; no new
 * ones start there. */
AWS_S3_API
uint32_t aws_s3_client_limit_active_connections(struct aws_s3_client *client, uint32_t limit);

/* torchdata_s3 patch (cmake/AwsCrtPatches.cmake): how many of the client's requests hold (or are being given) a
 * connection now. */
AWS_S3_API
uint32_t aws_s3_client_requests_on_connections(struct aws_s3_client *client);

AWS_EXTERN_C_END
AWS_POP_SANE_WARNING_LEVEL

#endif /* AWS_S3_CLIENT_H */")
_crt_replace("aws-c-s3/source/s3_client.c"
"uint32_t aws_s3_client_get_max_active_connections(
    struct aws_s3_client *client,
    struct aws_s3_meta_request *meta_request) {
    AWS_PRECONDITION(client);
"
"/* torchdata_s3 patch (cmake/AwsCrtPatches.cmake): upstream's aws_s3_client_get_max_active_connections, renamed;
 * the endpoint's connection pool is sized from it, the run-time limit is applied on top (below). */
static uint32_t s_get_configured_max_active_connections(
    struct aws_s3_client *client,
    struct aws_s3_meta_request *meta_request) {
    AWS_PRECONDITION(client);
")
_crt_insert_after("aws-c-s3/source/s3_client.c"
"    return max_active_connections;
}
"
"
uint32_t aws_s3_client_get_max_active_connections(
    struct aws_s3_client *client,
    struct aws_s3_meta_request *meta_request) {
    uint32_t max_active_connections = s_get_configured_max_active_connections(client, meta_request);
    uint32_t limit = (uint32_t)aws_atomic_load_int(&client->active_connections_limit);
    return limit > 0 ? aws_min_u32(limit, max_active_connections) : max_active_connections;
}

uint32_t aws_s3_client_limit_active_connections(struct aws_s3_client *client, uint32_t limit) {
    AWS_PRECONDITION(client);
    size_t previous = aws_atomic_exchange_int(&client->active_connections_limit, limit);
    if (previous != 0 && (limit == 0 || limit > previous)) {
        aws_s3_client_schedule_process_work(client);
    }
    return s_get_configured_max_active_connections(client, NULL);
}
")
_crt_insert_after("aws-c-s3/source/s3_client.c"
"    return num_requests_network_io;
}
"
"
uint32_t aws_s3_client_requests_on_connections(struct aws_s3_client *client) {
    return s_s3_client_get_num_requests_network_io(client, AWS_S3_META_REQUEST_TYPE_MAX);
}
")
_crt_insert_after("aws-c-s3/source/s3_client.c"
"    aws_atomic_init_int(&client->stats.num_requests_in_flight, 0);
"
"    aws_atomic_init_int(&client->active_connections_limit, 0); /* torchdata_s3 patch: no run-time limit yet */
")
_crt_replace("aws-c-s3/source/s3_client.c"
"                .max_connections = aws_s3_client_get_max_active_connections(client, NULL),"
"                .max_connections = s_get_configured_max_active_connections(client, NULL),")

# aws-c-http, aws-c-s3: a store that completes an upload silently has its CompleteMultipartUpload cut and sent
# again, and a write that succeeded can then be reported as failed.
#
# The connection monitor (monitoring_options: at least 1 B/s over S3Config.request_timeout_ms / 3, 4 s by
# default) also times the wait for an answer's first byte. CompleteMultipartUpload, UploadPartCopy and
# CopyObject make the store work on the whole object before it answers; S3 sends whitespace meanwhile, but
# moto (and any store that does not) stays silent: a 256 MiB upload's Complete to moto took over 4 s under
# load, was cut and sent again while moto was still completing, and the second Complete failed (moto's 500
# for an upload id it had just completed; NoSuchUpload on other stores), so the writer raised although the
# object was there (tests/integration/test_write.py, test_one_huge_write_stays_within_the_write_window, in
# sanitizer runs). These requests now wait for their first byte under a first-byte timeout of their own
# (aws_s3_client_config.completion_timeout_ms, S3Config.completion_timeout_ms), and aws-c-http leaves a stream
# that waits under such a timeout to that timeout instead of also timing it by throughput. The monitor times
# the request again from its first answer byte on (S3's whitespace), and while the request is still sent.
# Tests: tests/integration/test_write_faults.py, test_a_silent_completion_is_waited_for_not_sent_again and
# test_an_endpoint_that_stops_answering_fails_the_writer_in_bounded_time[CompleteMultipartUpload].
_crt_replace("aws-c-http/source/h1_connection.c"
"    if (connection->thread_data.incoming_stream) {
        s_add_time_measurement_to_stats(
            connection->thread_data.incoming_stream_timestamp_ns,
            now_ns,
            &connection->thread_data.stats.pending_incoming_stream_ms);

        connection->thread_data.incoming_stream_timestamp_ns = now_ns;
"
"    struct aws_h1_stream *incoming = connection->thread_data.incoming_stream;
    if (incoming != NULL && incoming->base.client_data != NULL &&
        incoming->base.client_data->response_first_byte_timeout_task.fn != NULL) {
        /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): the stream waits for its answer's first byte under a
         * timeout of its own; the throughput monitor does not time that wait as well. */
        connection->thread_data.incoming_stream_timestamp_ns = now_ns;
    } else if (incoming != NULL) {
        s_add_time_measurement_to_stats(
            connection->thread_data.incoming_stream_timestamp_ns,
            now_ns,
            &connection->thread_data.stats.pending_incoming_stream_ms);

        connection->thread_data.incoming_stream_timestamp_ns = now_ns;
")
_crt_insert_after("aws-c-s3/include/aws/s3/s3_client.h"
"    const struct aws_http_connection_monitoring_options *monitoring_options;
"
"
    /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): the longest wait for the first byte of the answer to a
     * request that makes the server work on a whole object (CompleteMultipartUpload, UploadPartCopy,
     * CopyObject); monitoring_options does not time that wait. 0: monitoring_options times it too. */
    uint32_t completion_timeout_ms;
")
_crt_insert_after("aws-c-s3/include/aws/s3/private/s3_client_impl.h"
"    struct aws_atomic_var upload_timeout_ms;
"
"
    uint32_t completion_timeout_ms; /* torchdata_s3 addition: see aws_s3_client_config */
")
_crt_replace("aws-c-s3/source/s3_client.c"
"    if (client_config->monitoring_options) {
"
"    client->completion_timeout_ms = client_config->completion_timeout_ms; /* torchdata_s3 addition */

    if (client_config->monitoring_options) {
")
_crt_insert_after("aws-c-s3/source/s3_meta_request.c"
"        request->upload_timeout_ms = (size_t)options.response_first_byte_timeout_ms;
    }
"
"    /* torchdata_s3 addition (cmake/AwsCrtPatches.cmake): the server works on the whole object, silently on
     * some stores, before it answers these. */
    if (client->completion_timeout_ms != 0 &&
        (request->request_type == AWS_S3_REQUEST_TYPE_COMPLETE_MULTIPART_UPLOAD ||
         request->request_type == AWS_S3_REQUEST_TYPE_UPLOAD_PART_COPY ||
         request->request_type == AWS_S3_REQUEST_TYPE_COPY_OBJECT)) {
        options.response_first_byte_timeout_ms = client->completion_timeout_ms;
    }
")

# aws-c-s3: a CopyObject that gets no answer at all crashes the process.
#
# A copy below the multipart threshold is sent as one CopyObject ("bypass"); when it finishes, the CRT hands
# its response headers to the meta request's headers callback whatever the outcome. A request that failed
# without any answer (every attempt's connection dropped, the meta request cancelled) has none, and the
# callback got NULL (SIGSEGV in ours, seen). Every other path calls it only with headers (a failure's come
# with the finish, when it has some); this one now does too.
# Test: tests/integration/test_copy.py, test_a_copy_without_any_answer_raises_naming_the_destination.
_crt_replace("aws-c-s3/source/s3_copy_object.c"
"        case AWS_S3_COPY_OBJECT_REQUEST_TAG_BYPASS: {

            /* Invoke headers callback if it was requested for this meta request */
            if (meta_request->headers_callback != NULL) {"
"        case AWS_S3_COPY_OBJECT_REQUEST_TAG_BYPASS: {

            /* Invoke headers callback if it was requested for this meta request */
            /* torchdata_s3 fix (cmake/AwsCrtPatches.cmake): and only with the headers of an answer. */
            if (meta_request->headers_callback != NULL && request->send_data.response_headers != NULL) {")
