#include "single_attempt_retry.h"

#include <aws/common/atomics.h>
#include <aws/io/io.h>
#include <aws/io/retry_strategy.h>

namespace torchdata_s3 {
namespace {

void destroy_strategy(aws_retry_strategy* strategy) { aws_mem_release(strategy->allocator, strategy); }

// Every attempt gets a token at once: there is no budget to share when nothing is ever retried.
int acquire_token(aws_retry_strategy* strategy, const aws_byte_cursor*,
                  aws_retry_strategy_on_retry_token_acquired_fn* on_acquired, void* user_data, uint64_t) {
    auto* token = static_cast<aws_retry_token*>(aws_mem_calloc(strategy->allocator, 1, sizeof(aws_retry_token)));
    if (token == nullptr) return AWS_OP_ERR;
    token->allocator = strategy->allocator;
    token->retry_strategy = strategy;
    token->impl = token;
    aws_atomic_init_int(&token->ref_count, 1);
    aws_retry_strategy_acquire(strategy);  // released with the token
    // Handing the token over before returning is fine for the S3 client: it does the same on its retry path.
    on_acquired(strategy, AWS_ERROR_SUCCESS, token, user_data);
    return AWS_OP_SUCCESS;
}

int refuse_retry(aws_retry_token*, aws_retry_error_type, aws_retry_strategy_on_retry_ready_fn*, void*) {
    return aws_raise_error(AWS_IO_MAX_RETRIES_EXCEEDED);
}

int record_success(aws_retry_token*) { return AWS_OP_SUCCESS; }

void release_token(aws_retry_token* token) {
    aws_retry_strategy* strategy = token->retry_strategy;
    aws_mem_release(token->allocator, token);
    aws_retry_strategy_release(strategy);
}

aws_retry_strategy_vtable single_attempt_vtable = {
    destroy_strategy, acquire_token, refuse_retry, record_success, release_token,
};

}  // namespace

aws_retry_strategy* new_single_attempt_retry_strategy(aws_allocator* allocator) {
    auto* strategy = static_cast<aws_retry_strategy*>(aws_mem_calloc(allocator, 1, sizeof(aws_retry_strategy)));
    if (strategy == nullptr) return nullptr;
    strategy->allocator = allocator;
    strategy->vtable = &single_attempt_vtable;
    strategy->impl = strategy;
    aws_atomic_init_int(&strategy->ref_count, 1);
    return strategy;
}

}  // namespace torchdata_s3
