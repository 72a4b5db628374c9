"""The native ListObjectsV2 parser (the CRT's XML parser underneath), fed documents directly."""

import pytest

from torchdata_s3 import _core

PAGE = b"""<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bkt</Name><Prefix>dir/</Prefix><KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <NextContinuationToken>token/+=</NextContinuationToken>
  <Contents><Key>dir/a &amp; b &lt;c&gt;.txt</Key><Size>12</Size><ETag>&quot;abc&quot;</ETag></Contents>
  <Contents><Key>dir/\xc3\xbcnic\xc3\xb8de</Key><Size>0</Size><ETag>"d41d8"</ETag><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>dir/big</Key><Size>5497558138880</Size><ETag>"e-2"</ETag></Contents>
  <CommonPrefixes><Prefix>dir/sub/</Prefix></CommonPrefixes>
</ListBucketResult>"""


def test_parses_keys_sizes_etags_prefixes_and_token() -> None:
    objects, prefixes, token = _core.parse_list_objects_v2(PAGE)
    assert objects == [
        ("dir/a & b <c>.txt", 12, '"abc"'),
        ("dir/ünicøde", 0, '"d41d8"'),
        ("dir/big", 5 * 1024**4, '"e-2"'),
    ]
    assert prefixes == ["dir/sub/"]
    assert token == "token/+="


def test_last_page_has_no_token() -> None:
    document = PAGE.replace(b"<IsTruncated>true</IsTruncated>", b"<IsTruncated>false</IsTruncated>")
    assert _core.parse_list_objects_v2(document)[2] is None


def test_empty_result() -> None:
    document = b"<ListBucketResult><Name>b</Name><IsTruncated>false</IsTruncated></ListBucketResult>"
    assert _core.parse_list_objects_v2(document) == ([], [], None)


@pytest.mark.parametrize(
    "document",
    [
        b"",
        b"not xml",
        b"<Error><Code>NoSuchBucket</Code></Error>",
        b"<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>",
        b"<ListBucketResult><Contents><Key>k</Key><Size>12x</Size></Contents></ListBucketResult>",
        b"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
        b"<ListBucketResult><Contents><Key>k</Key>",
        b"<ListBucketResult><Contents><Key>k</Key><Size>99999999999999999999</Size></Contents></ListBucketResult>",
    ],
)
def test_malformed_documents_raise(document: bytes) -> None:
    with pytest.raises(ValueError, match="malformed ListObjectsV2 response"):
        _core.parse_list_objects_v2(document)


def test_path_encoding_keeps_slashes_and_escapes_the_rest() -> None:
    assert _core.encode_path("dir/a b+c%&<ü") == "dir/a%20b%2Bc%25%26%3C%C3%BC"


def _page_of(contents: bytes) -> bytes:
    return b"<ListBucketResult><IsTruncated>false</IsTruncated>" + contents + b"</ListBucketResult>"


@pytest.mark.parametrize(
    ("contents", "key", "etag"),
    [
        # Attributes on elements (the parser's slow path for declarations with a space).
        (b'<Contents a="1"><Key b="2">k</Key><Size>1</Size><ETag>e</ETag></Contents>', "k", "e"),
        # Comments and processing instructions between elements.
        (
            b"<!-- c --><Contents><?pi x?><Key>k</Key><!--<Key>no</Key>-->"
            b"<Size>1</Size><ETag>e</ETag></Contents>",
            "k",
            "e",
        ),
        # A self-closing element is empty text.
        (b"<Contents><Key>k</Key><Size>1</Size><ETag/></Contents>", "k", ""),
        # Numeric references and named escapes (the CRT's unescaping) beside plain text (copied as is).
        (
            b"<Contents><Key>a&#x1F600;&#252;&apos;</Key><Size>1</Size><ETag>&quot;e&quot;</ETag></Contents>",
            "a\U0001f600\u00fc'",
            '"e"',
        ),
        # Raw UTF-8 of four bytes, the largest code point, and a key that looks like markup once unescaped.
        (
            b"<Contents><Key>\xf4\x8f\xbf\xbf &lt;!-- x</Key><Size>1</Size><ETag>e</ETag></Contents>",
            "\U0010ffff <!-- x",
            "e",
        ),
    ],
)
def test_element_forms_s3_may_send(contents: bytes, key: str, etag: str) -> None:
    assert _core.parse_list_objects_v2(_page_of(contents)) == ([(key, 1, etag)], [], None)


@pytest.mark.parametrize(
    "key",
    [
        b"\xff",  # not UTF-8 at all, in text with nothing to unescape
        b"a\xc3",  # a truncated sequence
        b"\xf4\x90\x80\x80",  # past U+10FFFF, raw
        b"\xf5\x80\x80\x80",  # a lead byte no code point has
        b"&#xD800;",  # a surrogate, by reference
        b"&amp;\xed\xa0\x80",  # a surrogate, raw, in text that is also unescaped
    ],
)
def test_text_that_is_not_unicode_is_malformed(key: bytes) -> None:
    document = _page_of(b"<Contents><Key>" + key + b"</Key><Size>1</Size><ETag>e</ETag></Contents>")
    with pytest.raises(ValueError, match="malformed ListObjectsV2 response"):
        _core.parse_list_objects_v2(document)
