"""ListedSizes: what a lister keeps of its listing for a loader downstream, bounded by pages."""

from __future__ import annotations

from torchdata_s3.datapipes.lister import KEPT_LISTED_URLS, ListedSizes


def page(first: int, count: int) -> tuple[list[str], list[tuple[str, int, str]]]:
    keys = [f"k{number:07d}" for number in range(first, first + count)]
    return [f"s3://b/{key}" for key in keys], [(key, len(key), f'"{key}"') for key in keys]


def test_the_latest_pages_are_kept_and_the_oldest_forgotten() -> None:
    listed = ListedSizes()
    pages = 3 * KEPT_LISTED_URLS // 1000
    for number in range(pages):
        listed.add(*page(number * 1000, 1000))

    newest = f"s3://b/k{pages * 1000 - 1:07d}"
    assert listed.get(newest) == (newest[len("s3://b/") :], 8, f'"{newest[len("s3://b/") :]}"')
    assert listed.get("s3://b/k0000000") is None
    assert len(listed._entries) <= KEPT_LISTED_URLS + 1000  # at most one page over the bound


def test_a_page_larger_than_the_bound_is_kept_whole() -> None:
    listed = ListedSizes()
    urls, entries = page(0, KEPT_LISTED_URLS + 5)
    listed.add(urls, entries)
    assert listed.get(urls[0]) is not None and listed.get(urls[-1]) is not None
