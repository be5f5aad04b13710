"""The demo's report in a real browser: headless Chromium from Debian's packages.

The page must load with no console errors or warnings and no uncaught exception, request
nothing beyond the file itself (data: URLs are part of the file), carry a title and a table
of contents whose links all land on a section, and fit a laptop screen's width. A
screenshot at laptop size is written to ``<run>/report/screenshot.png``; for the demo the
test session runs (at scale 0.1, shared with the digest tests: tests/demo_run.py), the
report and its screenshot are then copied to ``runs/test-report/report/`` for CI to keep.

Chromium is installed with apt-get when it is missing; the tests skip, saying why, only
where that cannot be done. ``HORIZONBENCH_BROWSER_RUN=<run folder>`` tests that run's
report instead of running the demo (e.g. after ``make demo``, so the screenshot lands in
``runs/demo/report/``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from PIL import Image

from browser import INSTALL_HINT, LAPTOP, ensure_chromium, load_page

ENV_RUN = "HORIZONBENCH_BROWSER_RUN"

# every in-page link of the table of contents, whichever way the template marks it up
TOC_LINKS = (
    "[...document.querySelectorAll(\"nav a[href^='#'], .toc a[href^='#'], #toc a[href^='#'], "
    "#contents a[href^='#']\")].map(a => a.getAttribute('href'))"
)
MISSING_TARGETS = f"{TOC_LINKS}.filter(h => !document.getElementById(decodeURIComponent(h.slice(1))))"
PAGE = {
    "title": "document.title",
    "toc": TOC_LINKS,
    "missing": MISSING_TARGETS,
    "sections": "document.querySelectorAll('h2').length",
    "page_width": "document.documentElement.scrollWidth",
    "window_width": "window.innerWidth",
    # tables wider than their box (they would scroll sideways inside it)
    "wide_tables": (
        "[...document.querySelectorAll('.table-wrap')].filter(e => e.scrollWidth > e.clientWidth + 1)"
        ".map(e => e.closest('section').id)"
    ),
    # pick the first violation in the first model's failing answers, as a reader would
    "filtered": """(() => {
        const box = document.querySelector('details.failures');
        const select = box.querySelector('select[data-filter=violation]');
        const rows = [...box.querySelectorAll('details.failure')];
        const pick = select.options[1].value;
        select.value = pick;
        select.dispatchEvent(new Event('change', {bubbles: true}));
        return {
            all: rows.length,
            visible: rows.filter(r => !r.hidden).map(r => r.dataset.violation),
            matching: rows.filter(r => r.dataset.violation === pick).length,
            pick: pick,
            count: box.querySelector('output.count').textContent,
        };
    })()""",
    "sweep_figures": "document.querySelectorAll('section[id^=sweep-] figure svg').length",
    "maps": "document.querySelectorAll('#maps figure svg').length",
}


@pytest.fixture(scope="session")
def chromium() -> str:
    path, why = ensure_chromium()
    if path is None:
        pytest.skip(f"headless Chromium unavailable: {why}; to run the browser tests, {INSTALL_HINT}")
    return path


@pytest.fixture(scope="session")
def demo_run(request) -> Path:
    given = os.environ.get(ENV_RUN)
    if given:
        run = Path(given)
        assert (run / "report" / "index.html").is_file(), f"{ENV_RUN}={given} holds no report/index.html"
        return run
    # the session's demo, shared with the digest and shipped-config tests (tests/demo_run.py)
    demo = request.getfixturevalue("shared_demo_run")
    assert demo.exit_code == 0, (
        f"`horizonbench demo` failed with exit code {demo.exit_code}:\n{demo.stderr_tail}"
    )
    return demo.path


@pytest.fixture(scope="session")
def demo_page(chromium, demo_run):
    page = load_page(
        chromium,
        demo_run / "report" / "index.html",
        screenshot=demo_run / "report" / "screenshot.png",
        evaluate=PAGE,
    )
    if not os.environ.get(ENV_RUN):
        # the session's run sits in its temp folder; CI keeps what lands in runs/ (git-ignored)
        keep = Path(__file__).resolve().parents[1] / "runs" / "test-report" / "report"
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(demo_run / "report", keep)
    return page


@pytest.mark.flow
def test_the_report_loads_without_console_errors_or_exceptions(demo_page) -> None:
    assert demo_page.console == []
    assert demo_page.exceptions == []
    assert demo_page.failed_loads == []


@pytest.mark.flow
def test_no_request_leaves_the_file(demo_page) -> None:
    assert demo_page.requests == []


@pytest.mark.flow
def test_a_laptop_size_screenshot_is_written_to_the_run_folder(demo_page, demo_run) -> None:
    shot = demo_run / "report" / "screenshot.png"
    assert demo_page.screenshot == shot
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000
    with Image.open(shot) as img:
        img.verify()
    with Image.open(shot) as img:
        assert img.size == LAPTOP
        colours = img.convert("RGB").getcolors(maxcolors=1 << 16)
    # a blank or failed page is one or two flat colours; text and tables give many more
    assert colours is None or len(colours) > 50, f"only {len(colours)} colours: a blank page?"
    dominant = max(count for count, _ in colours) if colours else 0
    assert dominant < 0.97 * LAPTOP[0] * LAPTOP[1]


@pytest.mark.flow
def test_the_page_has_a_title(demo_page) -> None:
    assert demo_page.values["title"].startswith("horizonbench")


@pytest.mark.flow
def test_the_table_of_contents_links_to_sections_that_exist(demo_page) -> None:
    toc = demo_page.values["toc"]
    assert len(toc) >= 5, f"table of contents has {len(toc)} links: {toc}"
    assert len(set(toc)) == len(toc), f"repeated entries: {toc}"
    assert demo_page.values["missing"] == []
    assert demo_page.values["sections"] >= len(toc) - 1


@pytest.mark.flow
def test_the_page_fits_a_laptop_screen_width(demo_page) -> None:
    # wide tables may scroll inside their own box; the page itself must not scroll sideways
    assert demo_page.values["page_width"] <= demo_page.values["window_width"] == LAPTOP[0]


@pytest.mark.flow
def test_no_table_is_wider_than_a_laptop_screen(demo_page) -> None:
    assert demo_page.values["wide_tables"] == []


@pytest.mark.flow
def test_the_failing_answers_filter_by_violation_in_the_browser(demo_page) -> None:
    seen = demo_page.values["filtered"]
    assert seen["all"] > seen["matching"] > 0
    assert seen["visible"] == [seen["pick"]] * seen["matching"]
    assert seen["count"] == f"{seen['matching']} shown"


@pytest.mark.flow
def test_the_demo_report_draws_its_sweep_and_violation_maps(demo_page) -> None:
    assert demo_page.values["sweep_figures"] >= 4  # L0 and success against B and noise
    assert demo_page.values["maps"] >= 1


# controls: the harness sees what it is meant to see, and only that


def test_the_harness_catches_a_console_error_and_an_outgoing_request(chromium, tmp_path) -> None:
    page = tmp_path / "bad.html"
    page.write_text(
        "<!doctype html><html><head><title>bad</title></head><body><p>bad</p>"
        '<script>console.error("x")</script><img src="http://127.0.0.1:9/x.png"></body></html>'
    )
    seen = load_page(chromium, page, screenshot=tmp_path / "bad.png")
    assert seen.console == ["error: x"]
    # port 9 is one Chromium refuses to connect to: the request is seen, nothing is sent
    assert seen.requests == ["http://127.0.0.1:9/x.png"]
    assert seen.exceptions == []
    assert (tmp_path / "bad.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_harness_catches_an_uncaught_exception(chromium, tmp_path) -> None:
    page = tmp_path / "throws.html"
    page.write_text('<!doctype html><title>t</title><script>throw new Error("boom")</script>')
    seen = load_page(chromium, page)
    assert len(seen.exceptions) == 1 and "boom" in seen.exceptions[0]
    assert seen.console == [] and seen.requests == []


def test_data_urls_and_in_page_links_are_not_requests(chromium, tmp_path) -> None:
    pixel = (
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
        "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )
    page = tmp_path / "clean.html"
    page.write_text(
        f'<!doctype html><title>clean</title><nav><a href="#a">a</a></nav><img src="{pixel}">'
        '<h2 id="a">a</h2><script>location.hash = "a"; console.log("fine")</script>'
    )
    seen = load_page(chromium, page, evaluate={"toc": TOC_LINKS, "missing": MISSING_TARGETS})
    assert seen.console == [] and seen.exceptions == [] and seen.failed_loads == []
    assert seen.requests == []
    assert seen.values == {"toc": ["#a"], "missing": []}


def test_a_stalled_browser_start_is_retried_with_a_fresh_profile(chromium, tmp_path) -> None:
    # a browser whose first start prints nothing and never opens DevTools, as one did on CI
    count = tmp_path / "starts"
    stalls_once = tmp_path / "stalls-once"
    stalls_once.write_text(
        "#!/bin/sh\n"
        f'echo start >> "{count}"\n'
        f'if [ "$(wc -l < "{count}")" -eq 1 ]; then exec sleep 600; fi\n'
        f'exec "{chromium}" "$@"\n'
    )
    stalls_once.chmod(0o755)
    page = tmp_path / "p.html"
    page.write_text("<!doctype html><title>p</title><p>p</p>")
    seen = load_page(str(stalls_once), page, timeout=5)
    assert seen.console == [] and seen.exceptions == []
    assert count.read_text().splitlines() == ["start", "start"]


def test_a_browser_that_always_stalls_fails_naming_every_start(tmp_path) -> None:
    never = tmp_path / "never"
    never.write_text("#!/bin/sh\nexec sleep 600\n")
    never.chmod(0o755)
    page = tmp_path / "p.html"
    page.write_text("<!doctype html><title>p</title>")
    with pytest.raises(TimeoutError, match="stalled on all 3 starts: attempt 1: .* attempt 3: "):
        load_page(str(never), page, timeout=1)
