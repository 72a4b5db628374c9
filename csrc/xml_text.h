// Small helper over the CRT's XML parser: the unescaped text of a node as a std::string.
#pragma once

#include <aws/common/byte_buf.h>
#include <aws/common/encoding.h>
#include <aws/common/xml_parser.h>

#include <cstdint>
#include <string>

namespace torchdata_s3 {

// Never call this and aws_xml_node_traverse on the same node: the CRT parser asserts against it.
// S3 documents are UTF-8. Text that is not (raw bytes, or a reference such as &#xD800; to a surrogate)
// fails here, as a malformed document, instead of as a UnicodeDecodeError when it is handed to Python.
// The CRT's decoder rejects surrogates but lets four-byte sequences run past U+10FFFF (lead bytes F5-F7, or
// F4 followed by 90-BF), which RFC 3629 and Python both refuse: checked on the bytes, because a hook called
// per code point made this check cost as much as the rest of a listing page's parse.
inline bool beyond_unicode(const aws_byte_buf& text) {
    for (size_t i = 0; i < text.len; ++i) {
        const uint8_t byte = text.buffer[i];
        if (byte < 0xF4) continue;  // continuation bytes are 80-BF: any byte from F4 leads a sequence
        if (byte > 0xF4 || (i + 1 < text.len && text.buffer[i + 1] >= 0x90)) return true;
    }
    return false;
}

inline int xml_node_text(aws_xml_node* node, std::string* out) {
    aws_byte_buf text;
    aws_byte_buf_init(&text, aws_default_allocator(), 64);
    int result = aws_xml_node_as_body_unescaped(aws_default_allocator(), node, &text);
    if (result == AWS_OP_SUCCESS) result = aws_decode_utf8(aws_byte_cursor_from_buf(&text), nullptr);
    if (result == AWS_OP_SUCCESS && beyond_unicode(text)) result = aws_raise_error(AWS_ERROR_INVALID_UTF8);
    if (result == AWS_OP_SUCCESS) out->assign(reinterpret_cast<const char*>(text.buffer), text.len);
    aws_byte_buf_clean_up(&text);
    return result;
}

}  // namespace torchdata_s3
