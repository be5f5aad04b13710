"""Binned figures draw each L bin at its centre, success points carry Wilson intervals, and
the captions say what is drawn (issue 25). The positions are read back from the SVG itself:
the tick marks give the map from data to page, the ids the figures put on their points,
intervals and bars say which marks to read."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from horizonbench.analysis.phase import wilson_interval
from horizonbench.reports import html, plots
from horizonbench.reports import seqbench_plots as sp

TEMPLATE = Path(html.__file__).parent / "templates" / "report.html"
_MOVE = re.compile(r"[ML]\s*(-?[\d.]+)\s+(-?[\d.]+)")


def _points(d: str) -> np.ndarray:
    """The (x, y) page coordinates of a path's M/L commands."""
    return np.array([[float(x), float(y)] for x, y in _MOVE.findall(d)])


def _tick_map(root: ET.Element, axis: str) -> tuple[float, float]:
    """(slope, intercept) of data = slope * page + intercept on one axis, from the grid
    line and label of every tick of the (single) panel."""
    page, data = [], []
    for group in root.iter("g"):
        if not re.search(rf"-{axis}tick_\d+$", group.get("id", "")):
            continue
        line = next(group.iter("path"))
        label = "".join("".join(t.itertext()) for t in group.iter("text")).replace("\u2212", "-")
        try:
            value = float(label)
        except ValueError:
            continue
        page.append(_points(line.get("d", ""))[0][0 if axis == "x" else 1])
        data.append(value)
    assert len(page) >= 2, f"no {axis} ticks found"
    slope, intercept = np.polyfit(page, data, 1)
    return float(slope), float(intercept)


def _group(root: ET.Element, suffix: str) -> ET.Element | None:
    for group in root.iter("g"):
        if group.get("id", "").endswith(suffix):
            return group
    return None


def _to_data(svg: str) -> tuple[ET.Element, tuple[float, float], tuple[float, float]]:
    # plots._to_svg drops the xlink namespace declaration (seqbench_plots writes SVG 2's href)
    root = ET.fromstring(svg.replace(' xlink:href="', ' href="'))
    return root, _tick_map(root, "x"), _tick_map(root, "y")


BY_LENGTH = pd.DataFrame(
    {
        "model": ["a"] * 3,
        "L": [20, 30, 40],
        "attempts": [10, 12, 9],
        "successes": [8, 5, 1],
        "success_rate": [0.8, 5 / 12, 1 / 9],
    }
)


def test_bin_centres_are_the_middle_of_the_integer_depths() -> None:
    assert plots.bin_centres(np.array([20, 30]), 10).tolist() == [24.5, 34.5]
    assert plots.bin_centres(np.array([7]), 1).tolist() == [7.0]
    with pytest.raises(ValueError, match="bin width"):
        plots.bin_centres(np.array([7]), 0)


@pytest.mark.parametrize("width", [1, 10])
def test_success_points_sit_at_bin_centres_with_wilson_intervals(width: int) -> None:
    svg = plots.success_vs_length_svg(BY_LENGTH, pd.DataFrame(), bin_width=width)
    root, (sx, ix), (sy, iy) = _to_data(svg)
    points = _group(root, "-points-0")
    assert points is not None, "the success points are not marked"
    uses = [u for u in points.iter("use")]
    xs = np.array([float(u.get("x")) for u in uses]) * sx + ix
    ys = np.array([float(u.get("y")) for u in uses]) * sy + iy
    assert xs == pytest.approx([20 + (width - 1) / 2, 30 + (width - 1) / 2, 40 + (width - 1) / 2], abs=0.05)
    assert ys == pytest.approx(BY_LENGTH["success_rate"].to_numpy(), abs=0.005)
    intervals = _group(root, "-interval-0")
    assert intervals is not None, "the success points have no intervals"
    ends = [_points(p.get("d", "")) for p in intervals.iter("path")]
    low, high = wilson_interval(BY_LENGTH["successes"].to_numpy(), BY_LENGTH["attempts"].to_numpy())
    for seg, x, lo, hi in zip(ends, xs, low, high, strict=True):
        assert seg[:, 0] * sx + ix == pytest.approx([x, x], abs=0.05)
        assert sorted(seg[:, 1] * sy + iy) == pytest.approx([lo, hi], abs=0.005)


def _violations() -> pd.DataFrame:
    """Two bins of width 10: [20, 30) with 6 of 10 successes, [30, 40) with 3 of 10."""
    return pd.DataFrame(
        {
            "model": ["a"] * 4,
            "L": [20, 20, 30, 30],
            "violation": ["none", "wall", "none", "locked_door"],
            "category": ["none", "adjacency", "none", "locked_door"],
            "count": [6, 4, 3, 7],
            "attempts": [10, 10, 10, 10],
            "share": [0.6, 0.4, 0.3, 0.7],
        }
    )


def test_violation_bars_span_their_bins_and_successes_are_the_bottom_band() -> None:
    svg = sp.violation_types_by_length_svg(_violations(), 10)
    root, (sx, ix), (sy, iy) = _to_data(svg)
    for j, (left, success) in enumerate([(19.5, 0.6), (29.5, 0.3)]):
        bar = _group(root, f"-bar-0-0-{j}")  # layer 0: the successes
        assert bar is not None, "the bars are not marked"
        path = next(bar.iter("path"))
        assert path.get("style", "").find(sp._CATEGORY_COLOUR["none"]) >= 0
        corners = _points(path.get("d", ""))
        xs, ys = corners[:, 0] * sx + ix, corners[:, 1] * sy + iy
        assert (xs.min(), xs.max()) == pytest.approx((left, left + 10), abs=0.05)
        assert (xs.min() + xs.max()) / 2 == pytest.approx(left + 5, abs=0.05)  # the centre, 24.5 / 34.5
        assert (ys.min(), ys.max()) == pytest.approx((0.0, success), abs=0.005)  # from the bottom up
        above = next(_group(root, f"-bar-0-1-{j}").iter("path")) if j == 0 else None
        if above is not None:  # the failures stack on top of the successes
            top = _points(above.get("d", ""))[:, 1] * sy + iy
            assert (top.min(), top.max()) == pytest.approx((0.6, 1.0), abs=0.005)


def test_merged_bins_are_drawn_at_the_merged_centre() -> None:
    """70 bins of width 1 (L 0..69) are merged in threes (at most 30 bins): [0, 3) at 1."""
    rows = pd.DataFrame(
        {
            "model": "a",
            "L": np.arange(70),
            "violation": "none",
            "category": "none",
            "count": 1,
            "attempts": 1,
            "share": 1.0,
        }
    )
    root, (sx, ix), _ = _to_data(sp.violation_types_by_length_svg(rows, 1))
    corners = _points(next(_group(root, "-bar-0-0-0").iter("path")).get("d", ""))[:, 0] * sx + ix
    assert (corners.min(), corners.max()) == pytest.approx((-0.5, 2.5), abs=0.05)


def test_the_violation_caption_says_what_the_figure_draws() -> None:
    """The report's caption puts the successes where the figure does: the bottom band."""
    template = TEMPLATE.read_text(encoding="utf-8")
    section = template[template.index('<section id="violations-by-length">') :]
    caption = " ".join(section[: section.index("</section>")].split())
    assert sp.SUCCESS_BAND in caption
    assert "white space" not in caption and "centred on its centre" in caption
    assert sp._CATEGORY_ORDER[0] == "none" and sp._CATEGORY_COLOUR["none"] == "#d9d9d9"  # light grey


def test_the_report_reads_the_bin_width_from_the_config() -> None:
    assert html._bin_width({"config": {"analysis": {"bin_width": 10}}}) == 10
    assert html._bin_width({"config": {"run": {"name": "x"}}}) == 1  # default left out of the dump
    assert html._bin_width({}) == 1


def test_tokens_are_drawn_at_bin_centres() -> None:
    tokens = pd.DataFrame(
        {
            "model": ["a", "a"],
            "L": [20, 30],
            "attempts": [3, 3],
            "output_tokens_mean": [100.0, 200.0],
            "output_tokens_median": [100.0, 200.0],
            "output_tokens_q90": [150.0, 250.0],
        }
    )
    svg = sp.tokens_by_length_svg(tokens, 10)
    assert "bins of 10 at their centres" in svg and "lower edge" not in svg
