// Parsing an unsigned decimal the way HTTP headers and S3 documents write it, with no exception and no
// silent overflow (std::stoull throws; callers run inside CRT callbacks, where C++ exceptions must not go).
#pragma once

#include <cstdint>
#include <string>

namespace torchdata_s3 {

inline bool parse_decimal_u64(const std::string& text, uint64_t* out) {
    if (text.empty()) return false;
    uint64_t value = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') return false;
        const uint64_t digit = static_cast<uint64_t>(c - '0');
        if (value > (UINT64_MAX - digit) / 10) return false;
        value = value * 10 + digit;
    }
    *out = value;
    return true;
}

}  // namespace torchdata_s3
