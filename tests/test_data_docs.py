"""Great Expectations' data docs of a run open offline and list every suite."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from horizonbench.tasks.validate.checks import validate_frame
from horizonbench.tasks.validate.data_docs import GX_INDEX, OFFLINE_MARK, make_offline, strip_remote


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.remote: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("src", "href"):
            value = a.get(key) or ""
            if tag in ("script", "img", "link") and re.match(r"https?://", value):
                self.remote.append(value)
            if tag == "a" and key == "href" and value and not re.match(r"(https?:|#|mailto:)", value):
                self.links.append(value)


def _refs(page: Path) -> _Refs:
    p = _Refs()
    p.feed(page.read_text(encoding="utf-8"))
    return p


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> Path:
    """Three real validations into one run folder (one fails), as the pipeline runs them."""
    run = tmp_path_factory.mktemp("run")
    df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    ok = [("ExpectColumnValuesToNotBeNull", {"column": "a"})]
    bad = [("ExpectColumnValuesToBeBetween", {"column": "a", "min_value": 5})]
    for table, suite in (("alpha", ok), ("beta/part-00000", ok), ("gamma", bad)):
        validate_frame(df, table, suite, run)
        make_offline(run / "validation" / "data_docs", run / "validation")
    return run / "validation" / "data_docs"


def test_no_page_loads_anything_remote(docs):
    pages = [p for p in docs.rglob("*.html") if p.name != GX_INDEX]
    assert len(pages) >= 7  # the index, three suites, three validation results
    for page in pages:
        assert _refs(page).remote == [], page
        assert OFFLINE_MARK in page.read_text(encoding="utf-8")
    # GX's own index, which needs its CDNs, is kept beside ours
    assert _refs(docs / GX_INDEX).remote


def test_the_index_lists_every_table_with_its_outcome_and_every_link_resolves(docs):
    index = (docs / "index.html").read_text(encoding="utf-8")
    for table, verdict in (("alpha", "passed"), ("beta/part-00000", "passed"), ("gamma", "FAILED")):
        row = re.search(rf"<tr><td><code>{re.escape(table)}</code></td><td>(.*?)</td>", index)
        assert row and verdict in row.group(1), table
    links = _refs(docs / "index.html").links
    assert len([link for link in links if link.startswith("validations/")]) == 3
    for link in links:
        assert (docs / link).is_file(), link


def test_stripping_is_idempotent_and_keeps_local_assets():
    page = (
        '<html><head><link rel="stylesheet" href="https://cdn.example/b.css">'
        '<script src="https://cdn.example/j.js"></script><link rel="stylesheet" href="static/local.css">'
        '</head><body><img src="https://s3.example/logo.png"><p>kept</p></body></html>'
    )
    once = strip_remote(page)
    assert "cdn.example" not in once and "s3.example" not in once
    assert 'href="static/local.css"' in once and "<p>kept</p>" in once
    assert strip_remote(once) == once
