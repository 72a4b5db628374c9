// Small helpers over the CRT's XML parser: parsing a document from its root, the unescaped text of a node.
#pragma once

#include <aws/common/byte_buf.h>
#include <aws/common/encoding.h>
#include <aws/common/xml_parser.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace torchdata_s3 {

// S3 documents are UTF-8. Text that is not (raw bytes, or a reference such as &#xD800; to a surrogate)
// fails here, as a malformed document, instead of as a UnicodeDecodeError when it is handed to Python.
// The CRT's decoder rejects surrogates but lets four-byte sequences run past U+10FFFF (lead bytes F5-F7, or
// F4 followed by 90-BF), which RFC 3629 and Python both refuse: checked on the bytes, because a hook called
// per code point made this check cost as much as the rest of a listing page's parse.
inline bool beyond_unicode(aws_byte_cursor text) {
    for (size_t i = 0; i < text.len; ++i) {
        const uint8_t byte = text.ptr[i];
        if (byte < 0xF4) continue;  // continuation bytes are 80-BF: any byte from F4 leads a sequence
        if (byte > 0xF4 || (i + 1 < text.len && text.ptr[i + 1] >= 0x90)) return true;
    }
    return false;
}

inline bool is_ascii(aws_byte_cursor text) {
    uint8_t any = 0;
    for (size_t i = 0; i < text.len; ++i) any |= text.ptr[i];
    return any < 0x80;
}

// AWS_OP_SUCCESS if `text` is UTF-8 within Unicode, else raises AWS_ERROR_INVALID_UTF8.
inline int check_utf8(aws_byte_cursor text) {
    if (is_ascii(text)) return AWS_OP_SUCCESS;  // most keys: no decoding needed
    if (aws_decode_utf8(text, nullptr) != AWS_OP_SUCCESS) return AWS_OP_ERR;
    return beyond_unicode(text) ? aws_raise_error(AWS_ERROR_INVALID_UTF8) : AWS_OP_SUCCESS;
}

// Whether `node` is the element `name`.
inline bool xml_name_is(aws_xml_node* node, const char* name) {
    const aws_byte_cursor node_name = aws_xml_node_get_name(node);
    return aws_byte_cursor_eq_c_str(&node_name, name);
}

// The unescaped text of `node` into `out`. Never call this and aws_xml_node_traverse on the same node: the
// CRT parser asserts against it. Text with no '&' has nothing to unescape and is copied straight from the
// document: the CRT's unescaping allocates two buffers per call, which was a third of a listing page's parse.
inline int xml_node_text(aws_xml_node* node, std::string* out) {
    aws_byte_cursor body;
    if (aws_xml_node_as_body(node, &body) != AWS_OP_SUCCESS) return AWS_OP_ERR;
    if (body.len == 0) {
        out->clear();
        return AWS_OP_SUCCESS;
    }
    if (std::memchr(body.ptr, '&', body.len) == nullptr) {
        if (check_utf8(body) != AWS_OP_SUCCESS) return AWS_OP_ERR;
        out->assign(reinterpret_cast<const char*>(body.ptr), body.len);
        return AWS_OP_SUCCESS;
    }
    aws_byte_buf text;
    aws_byte_buf_init(&text, aws_default_allocator(), body.len);
    int result = aws_byte_buf_append_unescaped_xml(aws_default_allocator(), body, &text);
    if (result == AWS_OP_SUCCESS) result = check_utf8(aws_byte_cursor_from_buf(&text));
    if (result == AWS_OP_SUCCESS) out->assign(reinterpret_cast<const char*>(text.buffer), text.len);
    aws_byte_buf_clean_up(&text);
    return result;
}

// Parses the XML `document` with the CRT's parser, `on_root` called for its root element with `user_data`.
// False (with the CRT's error raised) for a malformed document or one `on_root` refused.
inline bool parse_xml(aws_byte_cursor document, size_t max_depth, aws_xml_parser_on_node_encountered_fn* on_root,
                      void* user_data) {
    aws_xml_parser_options options = {};
    options.doc = document;
    options.max_depth = max_depth;
    options.on_root_encountered = on_root;
    options.user_data = user_data;
    return aws_xml_parse(aws_default_allocator(), &options) == AWS_OP_SUCCESS;
}

}  // namespace torchdata_s3
