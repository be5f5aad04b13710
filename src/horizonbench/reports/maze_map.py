"""Violation maps: one maze instance drawn as inline SVG, with the gold plan, the model's
plan and the place where the model's plan first breaks the rules.

A failure rate says *that* a model fails; a map shows *where* and *how*: the wrong turn
at a fork, the locked door walked into, the key never picked up. The SVG is written
by hand rather than through matplotlib because it is mostly thousands of identical
line segments, which a single ``<path>`` holds in a fraction of the bytes, and because
hand-written output is byte-identical across runs and library versions.

What is drawn comes only from the row, read the way the simulator reads it: the maze
is the world the fact strings describe (``world_from_facts``), so a passage shown is
a passage the model was told about (distracting facts included), and a passage the
facts never state is not drawn even if the generator's tree had it. Room coordinates
are not stored; they are decoded from the room names, which are spreadsheet cells
(column letters, then the 1-based row number; see ``datasets/maze/grid.py``).

Step indices follow :class:`horizonbench.core.types.Score`: ``first_violation_step`` is
the 0-based index of the offending action in the parsed plan, where index 0 is the
``start`` action; so index ``i`` is also "the i-th action after start". The model's
path is drawn through the rooms reached by the actions before that index, and the
error ring sits on the room the agent stands in when it attempts the offending
action. A ``bad_start`` (index 0) is ringed at the true start room; ``no_rescue``
(index = plan length) at the room where the plan ends. For a plan that is legal but
leaves every optimal plan (``suboptimal``), the legal remainder is drawn fainter.

The output is meant for inline use in the HTML report: no ``xmlns`` (like the other
report figures, so no attribute points outside the page; HTML parsers put ``<svg>`` in
the SVG namespace themselves), no ids (several maps share a page), no scripts, no
external references. All text taken from the row, the answer or the title is
XML-escaped, and characters XML cannot carry are replaced.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from horizonbench.core.types import Step
from horizonbench.datasets.maze.facts import World, world_from_facts
from horizonbench.datasets.maze.family import MazeFamily, gold_plan
from horizonbench.datasets.maze.grid import column_letters
from horizonbench.datasets.maze.rules import State, apply, normalize_step

__all__ = ["room_cell", "violation_map_for_answer", "violation_map_svg"]

#: viewBox units per room; all room geometry is in whole units
CELL = 40
#: the drawing is shown at most this wide (CSS px); larger grids are scaled down
MAX_PX = 640
#: grid width (px) at which scaling down starts; the margins take the rest of MAX_PX
_GRID_PX = 560
#: narrowest drawing (px), so the legend fits beside a 2x2 maze
_MIN_PX = 480
#: approximate advance of one character of the 11px legend font, in px
_CHAR_PX = 6.3

GOLD_COLOUR = "#e0a100"
MODEL_COLOUR = "#1f5fd6"
ERROR_COLOUR = "#d7191c"
PASSAGE_COLOUR = "#bdbdbd"
ROOM_COLOUR = "#e6e6e6"
UNKNOWN_KEY_COLOUR = "#555555"
START_COLOUR = "#1a9850"
GOAL_COLOUR = "#222222"
#: key colours (doors share their key's colour); red, gold and blue are left to the paths
KEY_COLOURS = (
    "#7b3294",
    "#008837",
    "#a6611a",
    "#d01c8b",
    "#018571",
    "#5e3c99",
    "#8c510a",
    "#4d9221",
    "#c51b7d",
    "#35978f",
)

_CELL_NAME = re.compile(r"([A-Z]{1,4})([1-9][0-9]{0,5})")
#: characters XML 1.0 cannot carry at all (controls, lone surrogates, U+FFFE/U+FFFF)
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def room_cell(name: str) -> tuple[int, int] | None:
    """(row, col), 0-based, of a room named like a spreadsheet cell ("B7" -> (6, 1)).

    The rows carry no coordinates: the generator names room ``row * cols + col`` by
    :func:`horizonbench.datasets.maze.grid.room_names`, so the name is the coordinate.
    Returns None for a name that is not a cell name.
    """
    m = _CELL_NAME.fullmatch(name)
    if m is None:
        return None
    col = 0
    for ch in m.group(1):
        col = col * 26 + (ord(ch) - ord("A") + 1)  # bijective base 26: A=1 ... Z=26
    return int(m.group(2)) - 1, col - 1


def _clean(text: str) -> str:
    """Text XML can hold: a hostile title or answer must not make the SVG unparsable."""
    return _NOT_XML.sub("\ufffd", text)


def _text(text: str) -> str:
    return escape(_clean(text))


def _attr(text: str) -> str:
    """A quoted attribute value, escaped (quotes and newlines included)."""
    return quoteattr(_clean(text), {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})


def _num(x: float) -> str:
    """Short, deterministic number formatting for coordinates and sizes."""
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _fit(text: str, chars: int) -> str:
    """Cut visible text to about ``chars`` characters (the full text stays in titles)."""
    return text if len(text) <= chars else text[: max(1, chars - 1)] + "\u2026"


@dataclass(frozen=True)
class _Layout:
    """Where things go. ``s`` is viewBox units per CSS px of text and strokes: fonts
    and margins are multiplied by it so they stay readable when a large grid is
    scaled down to fit ``MAX_PX``."""

    rows: int
    cols: int
    s: float
    left: int
    top: int
    width: int
    legend_top: int
    height: int
    px: int

    def centre(self, rc: tuple[int, int]) -> tuple[int, int]:
        r, c = rc
        return self.left + c * CELL + CELL // 2, self.top + r * CELL + CELL // 2


def _layout(rows: int, cols: int, has_title: bool, legend_lines: int) -> _Layout:
    s = max(1.0, cols * CELL / _GRID_PX)
    left = round(30 * s)
    top = round(((24 if has_title else 0) + 20) * s)
    width = max(left + cols * CELL + round(20 * s), math.ceil(_MIN_PX * s))
    legend_top = top + rows * CELL + round(14 * s)
    height = legend_top + round((legend_lines * 18 + 6) * s)
    return _Layout(rows, cols, s, left, top, width, legend_top, height, round(width / s))


def _grid_size(row: Mapping[str, Any], cells: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The grid size the row records, or (for a row without it) the smallest grid
    holding every named room."""
    rows, cols = row.get("grid_rows"), row.get("grid_cols")
    if rows is not None and cols is not None:
        return int(rows), int(cols)
    return max((r for r, _ in cells), default=0) + 1, max((c for _, c in cells), default=0) + 1


def _walk(world: World, plan: Sequence[Step]) -> tuple[list[int], int]:
    """Replay the model's plan by the simulator's rules.

    Returns the room after each legal action (world room indices) and the index of
    the first action that cannot be followed (an illegal action, a room the facts do
    not know, anything after the rescue), or ``len(plan)``. The same rules as the
    simulator, so the drawing cannot disagree with the score about where the agent is.
    """
    after: list[int] = []
    if not plan or world.start is None:
        return after, 0
    first = normalize_step(plan[0])
    if first.action != "start" or first.arg != world.rooms[world.start]:
        return after, 0
    state: State = (world.start, 0, 0, -1)
    after.append(world.start)
    rescued = False
    for i in range(1, len(plan)):
        if rescued:
            return after, i
        step = normalize_step(plan[i])
        state, bad = apply(world, state, step)
        if bad is not None:
            return after, i
        rescued = step.action == "rescue"
        after.append(state[0])
    return after, len(plan)


def _dedup(points: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Consecutive repeats removed: actions that do not move (keys, doors) add no point."""
    out: list[tuple[int, int]] = []
    for p in points:
        if not out or out[-1] != p:
            out.append(p)
    return out


def _polyline(points: Sequence[tuple[int, int]], kind: str, style: str) -> str:
    pts = " ".join(f"{x},{y}" for x, y in points)
    return f'<polyline data-kind="{kind}" points="{pts}" fill="none" {style}/>'


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _step_text(step: Step) -> str:
    return f"{step.action} {step.arg}".strip()


def violation_map_svg(
    row: Mapping[str, Any],
    plan: Sequence[Step] | None,
    first_violation_step: int | None,
    *,
    title: str = "",
    violation: str | None = None,
) -> str:
    """The violation map of one maze attempt, as an inline ``<svg>`` string.

    ``row`` is a maze instance row (its ``facts``, ``solution``, ``grid_rows`` and
    ``grid_cols`` are used); ``plan`` the parsed model plan, or None when the answer
    was not readable as a plan (then only the maze and the gold plan are drawn, with
    a note); ``first_violation_step`` the scores table's 0-based index of the first
    offending action (None for a successful plan: no ring, and the plan is drawn as far
    as the rules let it be followed); ``violation`` optionally its category, shown in
    the legend. Pure and deterministic: the same inputs give the same bytes.
    """
    world = world_from_facts([str(f) for f in row["facts"]])
    cells_of = [room_cell(name) for name in world.rooms]
    rows, cols = _grid_size(row, [c for c in cells_of if c is not None])
    # rooms the facts name that are not on the grid cannot be placed, so are not drawn
    cell = [c if c is not None and c[0] < rows and c[1] < cols else None for c in cells_of]
    off_grid = sum(c is None for c in cell)
    gold = gold_plan(row)

    # --- the model's walk: rooms reached before the first violation --------------------
    plan_t = tuple(plan) if plan is not None else None
    after, legal_end = _walk(world, plan_t) if plan_t is not None else ([], 0)
    # an action that lands in a room the grid cannot place also ends the drawable walk
    for i, room in enumerate(after):
        if cell[room] is None:
            legal_end = min(legal_end, i)
            break
    fvs = None if first_violation_step is None else max(0, int(first_violation_step))
    upto = legal_end if fvs is None else min(fvs, legal_end)
    start_room = world.start
    if start_room is None or cell[start_room] is None:
        start_room = world.index.get(str(row.get("start_room", "")))
    model_rooms = after[:upto]
    # the legal remainder of a plan whose "violation" is leaving the optimal plans
    rest_rooms = after[upto - 1 : legal_end] if fvs is not None and 0 < upto < legal_end else []
    if fvs is None or plan_t is None:
        error_room = None
    elif upto > 0:
        error_room = after[upto - 1]
    else:
        error_room = start_room

    legend_lines = 5 + (1 if rest_rooms else 0) + (2 if fvs is not None and plan_t is not None else 0)
    legend_lines += 1 if off_grid else 0
    lay = _layout(rows, cols, bool(title), legend_lines)
    s = lay.s
    centre = lay.centre

    def at(room: int | None) -> tuple[int, int] | None:
        c = None if room is None else cell[room]
        return None if c is None else centre(c)

    instance = str(row.get("instance_id", ""))
    head = title or f"Violation map of maze {instance}".strip()
    gold_moves = sum(1 for st in gold if st.action == "move_to")
    if plan_t is None:
        summary = "The answer is not readable as a plan."
    elif fvs is None:
        summary = f"The model plan has {len(plan_t)} actions and no violation."
    else:
        where = world.rooms[error_room] if error_room is not None else "an unknown room"
        kind = f" ({violation})" if violation else ""
        summary = f"The model plan first violates the rules{kind} at step {fvs}, in room {where}."
    desc = (
        f"{rows} by {cols} maze from {world.rooms[world.start] if world.start is not None else '?'} "
        f"to {world.rooms[world.goal] if world.goal is not None else '?'}; "
        f"the gold plan makes {gold_moves} moves. {summary}"
    )

    out: list[str] = [
        f'<svg viewBox="0 0 {lay.width} {lay.height}" width="100%" '
        f'style="max-width:{lay.px}px;height:auto;display:block" role="img" '
        f'font-family="sans-serif" data-kind="violation-map" data-rows="{rows}" data-cols="{cols}">',
        f"<title>{_text(head)}</title>",
        f"<desc>{_text(desc)}</desc>",
        f'<rect width="{lay.width}" height="{lay.height}" fill="#fff"/>',
    ]
    chars = int((lay.px - 40) / _CHAR_PX)
    if title:
        out.append(
            f'<text x="{round(8 * s)}" y="{round(17 * s)}" font-size="{_num(13 * s)}" '
            f'font-weight="bold">{_text(_fit(title, int(chars * 0.9)))}</text>'
        )

    # --- axes: column letters and row numbers, thinned out when cells are small ---------
    cell_px = CELL / s
    col_every = max(1, math.ceil(24 / cell_px))
    row_every = max(1, math.ceil(14 / cell_px))
    axis = [f'<g data-kind="axes" font-size="{_num(10 * s)}" fill="#666" text-anchor="middle">']
    for c in range(0, cols, col_every):
        x, _ = centre((0, c))
        axis.append(f'<text x="{x}" y="{lay.top - round(6 * s)}">{column_letters(c)}</text>')
    for r in range(0, rows, row_every):
        _, y = centre((r, 0))
        axis.append(f'<text x="{lay.left - round(14 * s)}" y="{y + round(3.5 * s)}">{r + 1}</text>')
    axis.append("</g>")
    out.extend(axis)

    # --- passages (open and locked) as one path; rooms as one path of squares ----------
    links: set[tuple[int, int, int, int]] = set()
    for a, nbrs in enumerate(world.adj):
        for b in nbrs:
            ca, cb = cell[a], cell[b]
            if ca is not None and cb is not None:
                (x1, y1), (x2, y2) = sorted((centre(ca), centre(cb)))
                links.add((x1, y1, x2, y2))
    seg: list[str] = []
    for x1, y1, x2, y2 in sorted(links):  # sorted: the fact order does not change the bytes
        if y1 == y2:
            seg.append(f"M{x1} {y1}h{x2 - x1}")
        elif x1 == x2:
            seg.append(f"M{x1} {y1}v{y2 - y1}")
        else:  # not grid neighbours; the facts say so, so draw it anyway
            seg.append(f"M{x1} {y1}L{x2} {y2}")
    # sizes: fractions of a room, but never below a readable size once scaled down
    passage_w = max(round(CELL * 0.14), round(2 * s))
    mark_r = max(round(CELL * 0.17), round(5 * s))  # key and start/goal discs
    mark_font = _num(max(CELL * 0.24, 6.5 * s))
    mark_off = round(CELL * 0.28)  # discs sit in the room's corners, clear of the paths
    if seg:
        out.append(
            f'<path data-kind="passages" d="{"".join(seg)}" fill="none" stroke="{PASSAGE_COLOUR}" '
            f'stroke-width="{passage_w}" stroke-linecap="round"/>'
        )
    side = round(CELL * 0.36)
    half = side // 2
    squares = []
    for r in range(rows):
        for c in range(cols):
            x, y = centre((r, c))
            squares.append(f"M{x - half} {y - half}h{side}v{side}h-{side}z")
    out.append(f'<path data-kind="rooms" d="{"".join(squares)}" fill="{ROOM_COLOUR}" stroke="#cfcfcf"/>')

    # --- the gold plan, then the model's plan over it ---------------------------------
    gold_cells = [room_cell(st.arg) for st in gold if st.action in ("start", "move_to")]
    gold_points = [centre(c) for c in gold_cells if c is not None and c[0] < rows and c[1] < cols]
    band = max(round(CELL * 0.34), round(5 * s))
    if gold_points:
        out.append(
            _polyline(
                gold_points,
                "gold-path",
                f'stroke="{GOLD_COLOUR}" stroke-opacity="0.6" stroke-width="{band}" '
                'stroke-linejoin="round" stroke-linecap="round"',
            )
        )
    line = max(round(CELL * 0.1), round(2.5 * s))
    dash_on, dash_off = max(round(CELL * 0.3), round(6 * s)), max(round(CELL * 0.16), round(4 * s))
    model_points = _dedup([p for p in (at(r) for r in model_rooms) if p is not None])
    if model_points:
        out.append(
            _polyline(
                model_points,
                "model-path",
                f'stroke="{MODEL_COLOUR}" stroke-width="{line}" '
                f'stroke-dasharray="{dash_on} {dash_off}" '
                'stroke-linejoin="round"',
            )
        )
    rest_points = _dedup([p for p in (at(r) for r in rest_rooms) if p is not None])
    if len(rest_points) > 1:
        out.append(
            _polyline(
                rest_points,
                "model-rest",
                f'stroke="{MODEL_COLOUR}" stroke-opacity="0.5" stroke-width="{round(line * 0.7)}" '
                f'stroke-dasharray="{round(line * 0.7)} {round(line * 1.2)}" stroke-linejoin="round"',
            )
        )

    # --- the first violation: the attempted move and a ring, under the doors and keys so
    # they stay legible; its step number goes on top of everything (below) -------------
    err_p = at(error_room)
    step_label = ""
    offending = plan_t[fvs] if plan_t is not None and fvs is not None and fvs < len(plan_t) else None
    if err_p is not None and fvs is not None:
        # the attempted move only when the walk did reach the offending action (a step
        # index that disagrees with the rules leaves the ring where the walk stopped)
        if offending is not None and upto == fvs:
            step = normalize_step(offending)
            # by its name on the grid: the target may be a room no fact mentions
            target = room_cell(step.arg) if step.action in ("move_to", "unlock_and_open_door_to") else None
            tp = centre(target) if target is not None and target[0] < rows and target[1] < cols else None
            thin = max(round(CELL * 0.07), round(1.5 * s))
            if tp is not None and tp != err_p:
                out.append(
                    f'<g data-kind="attempt" stroke="{ERROR_COLOUR}" stroke-width="{thin}" fill="none">'
                    f'<path d="M{err_p[0]} {err_p[1]}L{tp[0]} {tp[1]}" stroke-dasharray="{thin} {2 * thin}"/>'
                    f'<circle cx="{tp[0]}" cy="{tp[1]}" r="{max(round(CELL * 0.12), round(3 * s))}"/></g>'
                )
        ring = max(round(CELL * 0.42), round(9 * s))
        what = _step_text(offending) if offending is not None else "the plan ends without a rescue"
        where = world.rooms[error_room] if error_room is not None else "?"
        out.append(
            f'<g data-kind="violation" data-room={_attr(where)} data-step="{fvs}">'
            f"<title>{_text(f'first violation at step {fvs} in room {where}: {what}')}</title>"
            f'<circle cx="{err_p[0]}" cy="{err_p[1]}" r="{ring}" fill="none" stroke="{ERROR_COLOUR}" '
            f'stroke-width="{_num(max(CELL * 0.1, 2.5 * s))}"/></g>'
        )
        step_label = (
            f'<text data-kind="violation-step" x="{err_p[0] + ring}" y="{err_p[1] - ring}" '
            f'font-size="{_num(12 * s)}" font-weight="bold" fill="{ERROR_COLOUR}" stroke="#fff" '
            f'stroke-width="{_num(3 * s)}" paint-order="stroke">{fvs}</text>'
        )

    # --- locked doors and keys, coloured by key ---------------------------------------
    key_ids = sorted(
        {k for k in world.locks.values() if k is not None}
        | {k for ks in world.keys_in_room.values() for k in ks}
    )
    colour = {k: KEY_COLOURS[i % len(KEY_COLOURS)] for i, k in enumerate(key_ids)}
    # a door is a bar across its passage with a square badge holding its key's number;
    # a key is a disc of the same colour and number in its room's upper right corner
    bar, bar_w = max(round(CELL * 0.3), round(6 * s)), max(round(CELL * 0.12), round(2.5 * s))
    badge = 2 * mark_r
    doors = [f'<g data-kind="doors" font-size="{mark_font}" text-anchor="middle" fill="#fff">']
    door_list = []
    for (a, b), key in world.locks.items():
        pa_, pb_ = at(a), at(b)
        if pa_ is not None and pb_ is not None:
            (x1, y1), (x2, y2) = sorted((pa_, pb_))
            door_list.append(((x1, y1, x2, y2), world.rooms[a], world.rooms[b], key))
    for (x1, y1, x2, y2), ra, rb, key in sorted(door_list, key=lambda d: d[0]):
        mx, my = (x1 + x2) // 2, (y1 + y2) // 2
        col = UNKNOWN_KEY_COLOUR if key is None else colour[key]
        label = "?" if key is None else str(key)
        d = f"M{mx} {my - bar}v{2 * bar}" if y1 == y2 else f"M{mx - bar} {my}h{2 * bar}"
        w = max(badge, round(len(label) * mark_r * 1.1 + mark_r * 0.6))
        opened = "its key is not stated" if key is None else f"opened by key {key}"
        doors.append(
            f"<g><title>{_text(f'locked door {ra}-{rb}, {opened}')}</title>"
            f'<path d="{d}" stroke="{col}" stroke-width="{bar_w}"/>'
            f'<rect x="{mx - w // 2}" y="{my - badge // 2}" width="{w}" height="{badge}" fill="{col}"/>'
            f'<text x="{mx}" y="{my + round(mark_r * 0.5)}">{_text(label)}</text></g>'
        )
    doors.append("</g>")
    out.extend(doors)

    keys = [f'<g data-kind="keys" font-size="{mark_font}" text-anchor="middle" fill="#fff">']
    for room in sorted(world.keys_in_room, key=lambda r: cell[r] or (-1, -1)):
        p = at(room)
        if p is None:
            continue
        for j, k in enumerate(world.keys_in_room[room]):
            kx, ky = p[0] + mark_off - j * mark_r, p[1] - mark_off
            keys.append(
                f"<g><title>{_text(f'key {k} in room {world.rooms[room]}')}</title>"
                f'<circle cx="{kx}" cy="{ky}" r="{mark_r}" fill="{colour[k]}" stroke="#fff"/>'
                f'<text x="{kx}" y="{ky + round(mark_r * 0.5)}">{_text(str(k))}</text></g>'
            )
    keys.append("</g>")
    out.extend(keys)

    # --- start and goal: discs in the lower corners -----------------------------------
    ends = [
        f'<g data-kind="ends" font-size="{mark_font}" text-anchor="middle" font-weight="bold" fill="#fff">'
    ]
    goal_room = world.goal
    if goal_room is None or cell[goal_room] is None:
        goal_room = world.index.get(str(row.get("goal_room", "")))
    for room, letter, dx, fill, what in (
        (start_room, "S", -1, START_COLOUR, "start: Bob"),
        (goal_room, "G", 1, GOAL_COLOUR, "goal: Alice"),
    ):
        p = at(room)
        if p is None or room is None:
            continue
        ex, ey = p[0] + dx * mark_off, p[1] + mark_off
        ends.append(
            f"<g><title>{_text(f'{what}, room {world.rooms[room]}')}</title>"
            f'<circle cx="{ex}" cy="{ey}" r="{mark_r}" fill="{fill}" stroke="#fff"/>'
            f'<text x="{ex}" y="{ey + round(mark_r * 0.5)}">{letter}</text></g>'
        )
    ends.append("</g>")
    out.extend(ends)
    if step_label:
        out.append(step_label)

    # --- legend ------------------------------------------------------------------------
    lx, sample = round(10 * s), round(30 * s)
    tx = lx + sample + round(8 * s)
    legend = [f'<g data-kind="legend" font-size="{_num(11 * s)}" fill="#222">']
    y = lay.legend_top
    text_chars = int((lay.px - 60) / _CHAR_PX)

    def entry(glyph: str, text: str) -> None:
        nonlocal y
        legend.append(glyph.replace("{y}", str(y)))
        legend.append(f'<text x="{tx}" y="{y + round(4 * s)}">{_text(_fit(text, text_chars))}</text>')
        y += round(18 * s)

    y += round(6 * s)
    entry(
        f'<path d="M{lx} {{y}}h{sample}" stroke="{GOLD_COLOUR}" stroke-opacity="0.6" '
        f'stroke-width="{round(9 * s)}"/>',
        f"gold plan: {_plural(gold_moves, 'move')}, {_plural(len(gold), 'action')}",
    )
    model_glyph = (
        f'<path d="M{lx} {{y}}h{sample}" stroke="{MODEL_COLOUR}" stroke-width="{round(3 * s)}" '
        f'stroke-dasharray="{round(8 * s)} {round(5 * s)}"/>'
    )
    if plan_t is None:
        entry("", "answer not readable as a plan: no model path")
    elif fvs is None:
        entry(model_glyph, f"model plan: {_plural(len(plan_t), 'action')}, no violation")
    else:
        entry(model_glyph, "model plan, drawn up to its first violation")
    if rest_rooms:
        entry(
            f'<path d="M{lx} {{y}}h{sample}" stroke="{MODEL_COLOUR}" stroke-opacity="0.5" '
            f'stroke-width="{round(2 * s)}" stroke-dasharray="{round(2 * s)} {round(3 * s)}"/>',
            "rest of the model plan: legal, but off every optimal plan",
        )
    if fvs is not None and plan_t is not None:
        what = _step_text(offending) if offending is not None else "no rescue at the end"
        tag = f": {violation}" if violation else ""
        entry(
            f'<circle cx="{lx + sample // 2}" cy="{{y}}" r="{round(6 * s)}" fill="none" '
            f'stroke="{ERROR_COLOUR}" stroke-width="{_num(2.5 * s)}"/>',
            f"first violation at step {fvs} (0 = start){tag}",
        )
        entry("", f"offending action: {what}")
    g5 = round(5 * s)
    entry(
        f'<path d="M{lx + g5} {{y}}m0 {-2 * g5}v{4 * g5}" stroke="{KEY_COLOURS[0]}" '
        f'stroke-width="{round(2.5 * s)}"/>'
        f'<rect x="{lx}" y="{{y}}" transform="translate(0 {-g5})" width="{2 * g5}" height="{2 * g5}" '
        f'fill="{KEY_COLOURS[0]}"/>'
        f'<circle cx="{lx + round(23 * s)}" cy="{{y}}" r="{g5}" fill="{KEY_COLOURS[0]}"/>',
        "door (square) and its key (disc) share a number; ? = key unstated",
    )
    entry(
        f'<path d="M{lx} {{y}}h{sample}" stroke="{PASSAGE_COLOUR}" stroke-width="{round(4 * s)}"/>',
        "passage stated by the facts (distractors included)",
    )
    entry(
        f'<circle cx="{lx + g5}" cy="{{y}}" r="{g5}" fill="{START_COLOUR}"/>'
        f'<circle cx="{lx + round(23 * s)}" cy="{{y}}" r="{g5}" fill="{GOAL_COLOUR}"/>',
        "S start (Bob), G goal (Alice)",
    )
    if off_grid:
        entry("", f"{off_grid} room(s) named in the facts are off the grid and not drawn")
    legend.append("</g>")
    out.extend(legend)
    out.append("</svg>")
    return "".join(out)


def violation_map_for_answer(
    row: Mapping[str, Any],
    response_text: str,
    first_violation_step: int | None,
    *,
    title: str = "",
    violation: str | None = None,
) -> str:
    """The violation map of a raw model answer.

    The answer is untrusted: it is only read by the maze family's own plan parser (the
    one the scorer used, so the drawn plan is the scored plan) and never evaluated.
    """
    parsed = MazeFamily().parse_answer(response_text)
    return violation_map_svg(row, parsed.plan, first_violation_step, title=title, violation=violation)
