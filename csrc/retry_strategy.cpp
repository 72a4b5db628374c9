#include "retry_strategy.h"

#include <aws/common/atomics.h>
#include <aws/common/task_scheduler.h>
#include <aws/io/event_loop.h>
#include <aws/io/io.h>
#include <aws/io/retry_strategy.h>

#include "proxy_tunnel.h"
#include "send_pacer.h"
#include "tls_failures.h"

namespace torchdata_s3 {
namespace {

struct ClientStrategy {
    aws_retry_strategy base;
    aws_retry_strategy* inner;
    RetryPolicies policies;
};

// Our token wraps one of the inner strategy's.
struct ClientToken {
    aws_retry_token base;
    aws_retry_token* inner;
    uint32_t throttled_retries;  // with a pacer: retries scheduled so far for throttling (the inner strategy
                                 // counts the others)
};

ClientStrategy* strategy_of(aws_retry_strategy* strategy) { return static_cast<ClientStrategy*>(strategy->impl); }
ClientToken* token_of(aws_retry_token* token) { return static_cast<ClientToken*>(token->impl); }

// ---- a paced attempt waits on an event loop until its slot ------------------------------------------------

struct PacedCall {
    aws_task task;
    ClientToken* token;
    bool first_attempt;  // the token's acquisition (else a retry)
    aws_retry_strategy_on_retry_token_acquired_fn* on_acquired;
    aws_retry_strategy_on_retry_ready_fn* retry_ready;
    void* user_data;
};

void finish(PacedCall* call, int error_code) {
    ClientToken* token = call->token;
    aws_retry_strategy* strategy = token->base.retry_strategy;
    if (call->first_attempt) {
        if (error_code == AWS_ERROR_SUCCESS) {
            call->on_acquired(strategy, AWS_ERROR_SUCCESS, &token->base, call->user_data);
        } else {
            call->on_acquired(strategy, error_code, nullptr, call->user_data);
            aws_retry_token_release(&token->base);
        }
    } else {
        call->retry_ready(&token->base, error_code, call->user_data);
    }
}

void run_paced(aws_task*, void* arg, aws_task_status status) {
    auto* call = static_cast<PacedCall*>(arg);
    aws_allocator* allocator = call->token->base.allocator;
    // Cancelled: the event loops are shutting down with the client.
    finish(call, status == AWS_TASK_STATUS_RUN_READY ? static_cast<int>(AWS_ERROR_SUCCESS)
                                                     : static_cast<int>(AWS_IO_EVENT_LOOP_SHUTDOWN));
    aws_mem_release(allocator, call);
}

// Lets the attempt go now, or once the pacer's slot for it comes.
void let_go(PacedCall call) {
    ClientToken* token = call.token;
    const RetryPolicies& policies = strategy_of(token->base.retry_strategy)->policies;
    const uint64_t now = SendPacer::now_ns();
    const uint64_t delay = policies.pacer != nullptr ? policies.pacer->reserve(now) : 0;
    // A retry always comes back through a task, as the CRT's strategies do it: the S3 client does not expect
    // its retry to start inside its own call to schedule it.
    if (delay == 0 && call.first_attempt) {
        finish(&call, AWS_ERROR_SUCCESS);
        return;
    }
    auto* waiting = static_cast<PacedCall*>(aws_mem_calloc(token->base.allocator, 1, sizeof(PacedCall)));
    if (waiting == nullptr) {
        finish(&call, AWS_ERROR_OOM);
        return;
    }
    *waiting = call;
    aws_task_init(&waiting->task, run_paced, waiting, "torchdata_s3_paced_attempt");
    aws_event_loop* loop = aws_event_loop_group_get_next_loop(policies.event_loop_group);
    uint64_t loop_now = 0;
    aws_event_loop_current_clock_time(loop, &loop_now);
    aws_event_loop_schedule_task_future(loop, &waiting->task, loop_now + delay);
}

// ---- the vtable ---------------------------------------------------------------------------------------------

struct PendingAcquire {
    aws_retry_strategy* outer;
    aws_retry_strategy_on_retry_token_acquired_fn* on_acquired;
    void* user_data;
};

struct PendingRetry {
    ClientToken* token;
    aws_retry_strategy_on_retry_ready_fn* retry_ready;
    void* user_data;
};

void destroy_strategy(aws_retry_strategy* strategy) {
    ClientStrategy* self = strategy_of(strategy);
    aws_retry_strategy_release(self->inner);
    aws_mem_release(strategy->allocator, self);
}

void on_inner_token(aws_retry_strategy*, int error_code, aws_retry_token* inner_token, void* user_data) {
    auto* pending = static_cast<PendingAcquire*>(user_data);
    aws_retry_strategy* outer = pending->outer;
    auto* on_acquired = pending->on_acquired;
    void* caller_data = pending->user_data;
    aws_mem_release(outer->allocator, pending);
    if (error_code != AWS_ERROR_SUCCESS) {
        on_acquired(outer, error_code, nullptr, caller_data);
        return;
    }
    auto* token = static_cast<ClientToken*>(aws_mem_calloc(outer->allocator, 1, sizeof(ClientToken)));
    if (token == nullptr) {
        aws_retry_token_release(inner_token);
        on_acquired(outer, aws_last_error(), nullptr, caller_data);
        return;
    }
    token->base.allocator = outer->allocator;
    token->base.retry_strategy = outer;
    token->base.impl = token;
    token->inner = inner_token;
    aws_atomic_init_int(&token->base.ref_count, 1);
    aws_retry_strategy_acquire(outer);  // released with the token
    let_go(PacedCall{{}, token, true, on_acquired, nullptr, caller_data});
}

int acquire_token(aws_retry_strategy* strategy, const aws_byte_cursor* partition_id,
                  aws_retry_strategy_on_retry_token_acquired_fn* on_acquired, void* user_data, uint64_t timeout_ms) {
    auto* pending = static_cast<PendingAcquire*>(aws_mem_calloc(strategy->allocator, 1, sizeof(PendingAcquire)));
    if (pending == nullptr) return AWS_OP_ERR;
    *pending = PendingAcquire{strategy, on_acquired, user_data};
    if (aws_retry_strategy_acquire_retry_token(strategy_of(strategy)->inner, partition_id, on_inner_token, pending,
                                               timeout_ms) != AWS_OP_SUCCESS) {
        aws_mem_release(strategy->allocator, pending);
        return AWS_OP_ERR;
    }
    return AWS_OP_SUCCESS;
}

void on_inner_retry_ready(aws_retry_token*, int error_code, void* user_data) {
    auto* pending = static_cast<PendingRetry*>(user_data);
    const PacedCall call{{}, pending->token, false, nullptr, pending->retry_ready, pending->user_data};
    aws_mem_release(pending->token->base.allocator, pending);
    if (error_code != AWS_ERROR_SUCCESS) {
        PacedCall failed = call;
        finish(&failed, error_code);
        return;
    }
    let_go(call);
}

int schedule_retry(aws_retry_token* token, aws_retry_error_type error_type,
                   aws_retry_strategy_on_retry_ready_fn* retry_ready, void* user_data) {
    ClientToken* self = token_of(token);
    const RetryPolicies& policies = strategy_of(token->retry_strategy)->policies;
    // The S3 client then fails the request with the error that asked for the retry (the TLS error, or the
    // refused CONNECT).
    if ((policies.tls_watch != nullptr && policies.tls_watch->failing_for_good()) ||
        (policies.proxy_watch != nullptr && policies.proxy_watch->refusing_for_good())) {
        return aws_raise_error(AWS_IO_MAX_RETRIES_EXCEEDED);
    }
    if (error_type == AWS_RETRY_ERROR_TYPE_THROTTLING && policies.pacer != nullptr) {
        if (self->throttled_retries >= policies.max_throttle_retries) {
            return aws_raise_error(AWS_IO_MAX_RETRIES_EXCEEDED);
        }
        self->throttled_retries += 1;
        // Paced instead of backed off: the pacer's slot is the wait, and a request that waited out a random
        // backoff would hold up the in-order reader behind it while other requests could use the slots.
        // Nor is the inner strategy's retry quota spent: under throttling it would run dry for the whole
        // client.
        policies.pacer->on_throttled(SendPacer::now_ns());
        let_go(PacedCall{{}, self, false, nullptr, retry_ready, user_data});
        return AWS_OP_SUCCESS;
    }
    auto* pending = static_cast<PendingRetry*>(aws_mem_calloc(token->allocator, 1, sizeof(PendingRetry)));
    if (pending == nullptr) return AWS_OP_ERR;
    *pending = PendingRetry{self, retry_ready, user_data};
    if (aws_retry_strategy_schedule_retry(self->inner, error_type, on_inner_retry_ready, pending) != AWS_OP_SUCCESS) {
        aws_mem_release(token->allocator, pending);
        return AWS_OP_ERR;
    }
    return AWS_OP_SUCCESS;
}

int record_success(aws_retry_token* token) {
    SendPacer* pacer = strategy_of(token->retry_strategy)->policies.pacer;
    if (pacer != nullptr) pacer->on_success(SendPacer::now_ns());
    return aws_retry_token_record_success(token_of(token)->inner);
}

void release_token(aws_retry_token* token) {
    aws_retry_strategy* strategy = token->retry_strategy;
    aws_retry_token_release(token_of(token)->inner);
    aws_mem_release(token->allocator, token_of(token));
    aws_retry_strategy_release(strategy);
}

aws_retry_strategy_vtable client_vtable = {
    destroy_strategy, acquire_token, schedule_retry, record_success, release_token,
};

}  // namespace

aws_retry_strategy* new_client_retry_strategy(aws_allocator* allocator, aws_retry_strategy* inner,
                                              const RetryPolicies& policies) {
    if (policies.pacer != nullptr && policies.event_loop_group == nullptr) {
        aws_raise_error(AWS_ERROR_INVALID_ARGUMENT);
        return nullptr;
    }
    auto* self = static_cast<ClientStrategy*>(aws_mem_calloc(allocator, 1, sizeof(ClientStrategy)));
    if (self == nullptr) return nullptr;
    self->base.allocator = allocator;
    self->base.vtable = &client_vtable;
    self->base.impl = self;
    aws_atomic_init_int(&self->base.ref_count, 1);
    self->inner = inner;
    aws_retry_strategy_acquire(inner);
    self->policies = policies;
    return &self->base;
}

}  // namespace torchdata_s3
