// One PutObject in flight: either a whole body known up front (one PUT, or parallel parts if it is above the
// client's multipart threshold), or a body streamed with write() of unknown total length (always a multipart
// upload with parallel parts: the CRT's async writes).
//
// Nothing half-written becomes visible: the object appears when complete() succeeds. A failure, abort() or a
// destroyed upload makes the CRT abort its multipart upload.
//
// Memory: a streamed write() copies into the CRT's part buffers (one copy) and returns once the bytes are
// taken; it blocks while more than `in_flight_limit_bytes` were handed over but not yet acknowledged by the
// server, so a fast producer never holds more than that (plus one part being filled) in memory. With a node
// budget, that limit shrinks to what the budget grants, never below one part in flight and one being filled.
//
// Threads: one caller at a time (the binding serialises); CRT callbacks touch only the shared state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meta_request.h"
#include "node_budget.h"
#include "s3_client.h"

namespace torchdata_s3 {

struct PutObjectRequest {
    std::string bucket;
    std::string key;
    bool if_none_match = false;          // send If-None-Match: * (S3 answers 412 if the object exists)
    std::string checksum_algorithm;      // "", "crc32c" or "crc64nvme": computed by the CRT, verified by S3
    bool whole_body = false;             // true: `body` is the whole object; false: it is streamed with write()
    std::string body;                    // for whole_body
    uint64_t in_flight_limit_bytes = 0;  // streamed: write() waits above this many unacknowledged bytes
    // Longest wait in abort() for the CRT to abort the multipart upload; 0: no limit. Other waits have no
    // limit of their own: an upload that stops moving is failed by the client's stall detection and retries.
    uint32_t abort_timeout_ms = 0;
};

class ObjectUpload {
public:
    // Starts the upload; returns without waiting for the network.
    static std::shared_ptr<ObjectUpload> start(std::shared_ptr<S3Client> client, PutObjectRequest request);
    ~ObjectUpload();  // an upload neither completed nor aborted is aborted
    ObjectUpload(const ObjectUpload&) = delete;
    ObjectUpload& operator=(const ObjectUpload&) = delete;

    // Streamed uploads only: hands `size` bytes to the upload (copied before it returns). Blocks while the
    // CRT's part buffer is full or the in-flight limit is reached. Throws the upload's failure.
    void write(const uint8_t* data, size_t size);
    // Ends the body and waits until the object is committed; returns its ETag. Throws the upload's failure.
    std::string complete();
    // Abandons the upload (the CRT aborts the multipart upload it started); later calls raise. Idempotent.
    void abort();

    uint64_t bytes_written() const { return bytes_written_; }
    // Bytes the server has acknowledged (parts completed).
    uint64_t bytes_acknowledged();
    // Every part the server acknowledged, (part number, its ETag as answered), in part order; empty for a
    // single PutObject.
    std::vector<std::pair<uint32_t, std::string>> part_etags();
    // Whether an attempt of CompleteMultipartUpload ended without any answer (cut off, or no first byte within
    // completion_timeout_ms): the server may have completed the upload although complete() then failed.
    bool completion_unanswered();
    bool usable_here() const { return meta_.usable_here(); }

    struct Shared;  // public only so that the CRT callbacks in object_upload.cpp can name it

private:
    ObjectUpload(std::shared_ptr<S3Client> client, PutObjectRequest request);
    // Feeds `data` (possibly empty) and, with `eof`, the end of the body, through the CRT's poll_write.
    void feed(const uint8_t* data, size_t size, bool eof);
    // Waits for the whole meta request to finish, then throws its failure if it failed.
    void wait_finished();

    std::shared_ptr<S3Client> client_;
    PutObjectRequest request_;
    std::shared_ptr<Shared> shared_;
    MetaRequest meta_;
    uint64_t bytes_written_ = 0;
    bool ended_ = false;  // complete() or abort() was called
    // Of the client's node budget: what the CRT may hold of a streamed body (unacknowledged bytes and the
    // part being filled). Given back when the upload ends.
    BudgetShare budget_;
};

}  // namespace torchdata_s3
