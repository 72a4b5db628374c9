#include "tls_handshake_hook.h"

#include <aws/io/channel.h>
#include <aws/io/tls_channel_handler.h>
#include <s2n.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "fork_safe_mutex.h"
#include "tls_failures.h"

// The originals, which the linker makes available under these names (--wrap, CMakeLists.txt).
extern "C" {
aws_channel_handler* __real_aws_tls_client_handler_new(aws_allocator* allocator, aws_tls_connection_options* options,
                                                       aws_channel_slot* slot);
int __real_aws_channel_setup_client_tls(aws_channel_slot* right_of_slot, aws_tls_connection_options* tls_options);
}

namespace torchdata_s3 {
namespace {

ForkSafeMutex g_watches_mutex;
std::unordered_map<const aws_tls_ctx*, TlsHandshakeWatch*> g_watches;  // guarded by g_watches_mutex

TlsHandshakeWatch* watch_of(const aws_tls_ctx* ctx) {
    std::lock_guard<ForkSafeMutex> lock(g_watches_mutex);
    auto found = g_watches.find(ctx);
    return found == g_watches.end() ? nullptr : found->second;
}

// One handshake in progress. While it lasts, the TLS handler's vtable pointer points at `vtable` (a copy of
// aws-c-io's with two entries replaced), which is how the replaced entries find this record.
struct WatchedHandshake {
    aws_channel_handler_vtable vtable;  // first member: handler->vtable == &record->vtable
    const aws_channel_handler_vtable* original_vtable = nullptr;
    TlsHandshakeWatch* watch = nullptr;
    aws_tls_on_negotiation_result_fn* chained = nullptr;  // the callback the creator asked for, or null
    void* chained_user_data = nullptr;
    bool installed = false;     // the handler's vtable points here (so the handler's destruction frees this)
    bool outcome_seen = false;  // the outcome came before installation (the creator's frame frees this)
    bool inspected_reply = false;
};

WatchedHandshake* record_of(aws_channel_handler* handler) {
    return reinterpret_cast<WatchedHandshake*>(handler->vtable);
}

void on_outcome(aws_channel_handler* handler, aws_channel_slot* slot, int error_code, void* user_data) {
    // First, while s2n_errno still holds why the handshake failed (same thread, nothing in between).
    const int s2n_error = *s2n_errno_location();
    auto* record = static_cast<WatchedHandshake*>(user_data);
    record->watch->record_outcome(error_code, s2n_error);
    aws_tls_on_negotiation_result_fn* chained = record->chained;
    void* chained_user_data = record->chained_user_data;
    if (record->installed) {
        // From here on the handler is aws-c-io's own again, and this record is no longer needed.
        handler->vtable = const_cast<aws_channel_handler_vtable*>(record->original_vtable);
        delete record;
    } else {
        record->outcome_seen = true;
    }
    if (chained != nullptr) chained(handler, slot, error_code, chained_user_data);
}

// A TLS record starts with its content type: change_cipher_spec, alert, handshake or application_data.
bool starts_like_tls(uint8_t first_byte) { return first_byte >= 20 && first_byte <= 23; }

int process_read_message(aws_channel_handler* handler, aws_channel_slot* slot, aws_io_message* message) {
    WatchedHandshake* record = record_of(handler);
    const aws_channel_handler_vtable* original = record->original_vtable;
    if (message != nullptr && !record->inspected_reply && message->message_data.len > 0) {
        record->inspected_reply = true;
        if (!starts_like_tls(message->message_data.buffer[0])) {
            const size_t shown = message->message_data.len < 64 ? message->message_data.len : 64;
            record->watch->record_not_tls(
                std::string(reinterpret_cast<const char*>(message->message_data.buffer), shown));
            aws_mem_release(message->allocator, message);
            aws_channel_shutdown(slot->channel, AWS_IO_TLS_ERROR_NEGOTIATION_FAILURE);
            return AWS_OP_SUCCESS;
        }
    }
    // The original may report the outcome, which frees the record: nothing of it is used after this call.
    return original->process_read_message(handler, slot, message);
}

void destroy(aws_channel_handler* handler) {
    // The handshake never finished (the connection closed first): the record goes with the handler.
    WatchedHandshake* record = record_of(handler);
    const aws_channel_handler_vtable* original = record->original_vtable;
    delete record;
    original->destroy(handler);
}

// A record for a connection made with `options`, and the options to make it with instead; null if the
// connection's context is not watched.
WatchedHandshake* new_record(const aws_tls_connection_options* options, aws_tls_connection_options* replaced) {
    TlsHandshakeWatch* watch = options->ctx != nullptr ? watch_of(options->ctx) : nullptr;
    if (watch == nullptr) return nullptr;
    auto* record = new WatchedHandshake();
    record->watch = watch;
    record->chained = options->on_negotiation_result;
    record->chained_user_data = options->user_data;
    // A shallow copy is enough: the handler copies what it keeps (server name, ALPN list) as it is made.
    *replaced = *options;
    replaced->on_negotiation_result = &on_outcome;
    replaced->user_data = record;
    return record;
}

void install(WatchedHandshake* record, aws_channel_handler* handler) {
    record->original_vtable = handler->vtable;
    record->vtable = *handler->vtable;
    record->vtable.process_read_message = &process_read_message;
    record->vtable.destroy = &destroy;
    handler->vtable = &record->vtable;
    record->installed = true;
}

}  // namespace

void watch_tls_context(aws_tls_ctx* ctx, TlsHandshakeWatch* watch) {
    std::lock_guard<ForkSafeMutex> lock(g_watches_mutex);
    g_watches[ctx] = watch;
}

void forget_tls_context(aws_tls_ctx* ctx) {
    std::lock_guard<ForkSafeMutex> lock(g_watches_mutex);
    g_watches.erase(ctx);
}

}  // namespace torchdata_s3

using torchdata_s3::WatchedHandshake;

// Direct connections: the channel bootstrap makes the handler, and starts the handshake after this returns.
extern "C" aws_channel_handler* __wrap_aws_tls_client_handler_new(aws_allocator* allocator,
                                                                  aws_tls_connection_options* options,
                                                                  aws_channel_slot* slot) {
    aws_tls_connection_options replaced;
    WatchedHandshake* record = torchdata_s3::new_record(options, &replaced);
    if (record == nullptr) return __real_aws_tls_client_handler_new(allocator, options, slot);
    aws_channel_handler* handler = __real_aws_tls_client_handler_new(allocator, &replaced, slot);
    if (handler == nullptr) {
        delete record;
        return nullptr;
    }
    torchdata_s3::install(record, handler);
    return handler;
}

// Through a proxy tunnel: the handler is made and its handshake started inside the call (on the channel's
// thread, so no reply can be processed before the vtable is installed below).
extern "C" int __wrap_aws_channel_setup_client_tls(aws_channel_slot* right_of_slot,
                                                   aws_tls_connection_options* tls_options) {
    aws_tls_connection_options replaced;
    WatchedHandshake* record = torchdata_s3::new_record(tls_options, &replaced);
    if (record == nullptr) return __real_aws_channel_setup_client_tls(right_of_slot, tls_options);
    const int result = __real_aws_channel_setup_client_tls(right_of_slot, &replaced);
    aws_channel_slot* tls_slot = right_of_slot->adj_right;
    if (record->outcome_seen) {
        delete record;  // the handshake already ended (it failed at once); nothing left to watch
    } else if (result == AWS_OP_SUCCESS && tls_slot != nullptr && tls_slot->handler != nullptr) {
        torchdata_s3::install(record, tls_slot->handler);
    }
    // Else the handler may still report an outcome to the record: it is left allocated (a rare failure path).
    return result;
}
