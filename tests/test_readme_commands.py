"""The commands and config names the docs show exist and parse.

A README command that the CLI no longer accepts (a renamed flag, a dropped subcommand) or
a config path that is gone is the first thing a new user meets, and nothing else catches
it: the commands are never run by the tests as printed. So every ``horizonbench ...``
command in README.md and benchmarks/README.md (code blocks and inline code spans) is
parsed by the CLI's own argument parser, without running it; every ``make`` target named
must be a target of the Makefile; every ``python benchmarks/*.py`` or ``deployment/*.py``
command must name a script that exists and flags its argument parser declares; and every
config the docs name (``configs/...yaml``, or a bare ``name.yaml`` of configs/) must exist
and load with the project's config loader.

The extraction and checks are pure functions of the text, so the tests below also show
that a typo'd flag, an unknown subcommand, a missing make target and a missing config are
each caught.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.cli.main import _parser
from horizonbench.schemas.config import load_config

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", ROOT / "benchmarks" / "README.md")

# Names the docs use as placeholders or for files that are not run configs. Each must
# still occur in the docs (see test_the_allowlists_are_used), so the list cannot rot.
PLACEHOLDER_CONFIGS = {"configs/other.yaml"}  # "--param config=configs/other.yaml"
NOT_CONFIGS = {"prefect.yaml", "ten.yaml"}  # deployment/prefect.yaml; overhead.py's own config

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")
# a command starts its line or code span, after a prompt, environment variables or a path
START = r"^(?:\$\s+)?(?:[A-Z_]+=\S*\s+)*(?:\S*/)?"
COMMAND = re.compile(START + r"(horizonbench\s+[a-z].*)$")
SCRIPT = re.compile(START + r"python3?\s+((?:benchmarks|deployment)/[\w-]+\.py\b.*)$")
MAKE = re.compile(r"(?:^|[\s`(])make\s+([a-z][\w-]*)")
CONFIG_PATH = re.compile(r"(?<![\w/.-])configs/[\w.-]+\.(?:ya?ml|json)\b")
BARE_YAML = re.compile(r"^[\w.-]+\.ya?ml$")


@dataclass(frozen=True)
class Shown:
    """A command line as a doc shows it: the text and where it stands."""

    text: str
    where: str
    block: bool = True  # in a code block (a whole command), not an inline span (a mention)


def code_texts(doc: str) -> list[tuple[str, int, bool]]:
    """The code of a Markdown text: (text, line number, in a block) for each line of a
    fenced or indented block, then each inline span.

    Continuation lines (a trailing backslash) are joined, so a command split over lines
    is one command.
    """
    out: list[tuple[str, int, bool]] = []
    spans: list[tuple[int, int]] = []
    for m in FENCE.finditer(doc):
        spans.append(m.span())
        line = doc.count("\n", 0, m.start(1)) + 1
        body = re.sub(r"\\\n\s*", " ", m.group(1))
        # a joined line keeps the number of its first line; later lines shift a little,
        # which only matters for the message
        for i, text in enumerate(body.splitlines()):
            out.append((text, line + i, True))
    offset = 0
    for number, text in enumerate(doc.splitlines(keepends=True), start=1):
        # an indented code block (benchmarks/README.md shows its commands so)
        if text.startswith("    ") and not any(a <= offset < b for a, b in spans):
            out.append((text.strip(), number, True))
        offset += len(text)
    for m in INLINE.finditer(doc):
        if any(a <= m.start() < b for a, b in spans):
            continue
        out.append((m.group(1).replace("\n", " "), doc.count("\n", 0, m.start()) + 1, False))
    return out


def shown_commands(doc: str, name: str, pattern: re.Pattern[str] = COMMAND) -> list[Shown]:
    """Every command line matching ``pattern`` in the doc's code."""
    found = []
    for text, line, block in code_texts(doc):
        m = pattern.search(text.strip())
        if m:
            found.append(Shown(m.group(1).strip(), f"{name}:{line}", block))
    return found


def argv_of(command: str) -> list[str]:
    """A shown command as the argument list a user would type, synopsis notation read.

    ``[--out DIR]`` is an optional part (shown, so it is checked too), ``...`` a value
    left open, ``# ...`` a comment. A choice ``a|b|c`` is kept whole: see
    :func:`argv_variants`.
    """
    tokens = shlex.split(command, comments=True)
    return [t for t in (token.replace("[", "").replace("]", "") for token in tokens) if t]


def argv_variants(command: str) -> list[list[str]]:
    """One argument list per alternative of a shown choice (``--format parquet|jsonl|both``
    is three commands), so every alternative the doc offers is checked."""
    variants: list[list[str]] = [[]]
    for token in argv_of(command):
        options = token.split("|") if "|" in token and not token.startswith("'") else [token]
        variants = [v + [o] for v in variants for o in options if o]
    return variants


def filled(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``argv`` with a placeholder value (``--seed N``: the option's own metavar) replaced
    by one its type accepts, so the type of a documented placeholder is not held
    against it."""
    subparsers = _subparsers(parser)
    actions = subparsers[argv[0]]._option_string_actions if argv and argv[0] in subparsers else {}
    out = list(argv)
    for i, token in enumerate(argv[:-1]):
        action = actions.get(token)
        if action is not None and action.metavar == argv[i + 1] and action.type is int:
            out[i + 1] = "1"
    return out


def strict_parser() -> argparse.ArgumentParser:
    """The CLI's own parser, taking only whole option names: a doc should show
    ``--timezone``, not an abbreviation argparse would accept today and refuse once
    another option shares its prefix."""
    parser = _parser()
    parser.allow_abbrev = False
    for sub in _subparsers(parser).values():
        sub.allow_abbrev = False
    return parser


def parse_error(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """What the parser says about ``argv`` (None when it parses), without running anything.

    argparse reports an error by printing it and raising SystemExit(2); ``--help`` and
    ``--version`` exit 0 after printing, which counts as parsing.
    """
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            if exc.code not in (0, None):
                return err.getvalue().strip().splitlines()[-1]
    return None


def option_error(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """For a command the prose mentions (``horizonbench run --dry-run``), which need not
    give every required argument: the subcommand and each option must exist."""
    subparsers = _subparsers(parser)
    if not argv or argv[0] not in subparsers:
        return f"no subcommand {argv[0] if argv else ''!r} (the CLI has {', '.join(subparsers)})"
    known = subparsers[argv[0]]._option_string_actions
    unknown = [t.split("=")[0] for t in argv[1:] if t.startswith("-") and t.split("=")[0] not in known]
    return f"{argv[0]}: unknown option(s) {', '.join(unknown)}" if unknown else None


def command_error(parser: argparse.ArgumentParser, command: Shown) -> str | None:
    """Why the shown command would be refused (None: it parses), for every alternative it
    offers. A block's command is parsed whole; a mention in the prose may leave out
    required arguments, but its subcommand, options and their values must be right."""
    for variant in argv_variants(command.text):
        argv = filled(parser, variant[1:])
        if command.block:
            error = parse_error(parser, argv)
        else:
            error = option_error(parser, argv) or parse_error(parser, argv)
            if error and "arguments are required" in error:
                error = None
        if error:
            return error
    return None


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("the CLI has no subcommands")


def script_flags(path: Path) -> set[str]:
    """The option strings a script's argparse declares (``add_argument("--x", ...)``).

    Read from the source, not by running the script: a benchmark imports and measures.
    """
    flags = {"-h", "--help"}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("-"):
                    flags.add(arg.value)
    return flags


def script_problem(command: str, root: Path = ROOT) -> str | None:
    """Why a shown ``benchmarks/x.py --flag ...`` command would not run, or None."""
    argv = argv_of(command)
    path = root / argv[0]
    if not path.is_file():
        return f"{argv[0]}: no such script"
    known = script_flags(path)
    unknown = [t.split("=")[0] for t in argv[1:] if t.startswith("-") and t.split("=")[0] not in known]
    if unknown:
        return f"{argv[0]}: unknown option(s) {', '.join(unknown)}"
    return None


def make_targets(makefile: str) -> set[str]:
    """The targets a Makefile defines (``name:`` at the start of a line)."""
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", makefile, re.M))


def shown_make_targets(doc: str, name: str) -> list[Shown]:
    """Every ``make <target>`` in the doc's code."""
    return [
        Shown(m.group(1), f"{name}:{line}") for text, line, _ in code_texts(doc) for m in MAKE.finditer(text)
    ]


def named_configs(doc: str) -> set[str]:
    """Config files the doc names: ``configs/...`` paths anywhere, and bare ``x.yaml`` in
    code spans (the README lists the examples of configs/ by file name)."""
    names = set(CONFIG_PATH.findall(doc))
    for text, _, _ in code_texts(doc):
        if BARE_YAML.match(text.strip()) and text.strip() not in NOT_CONFIGS:
            names.add(f"configs/{text.strip()}")
    return names


def docs() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in DOCS]


def comment_text(yaml_text: str) -> str:
    """A config's comments as prose (the ``#`` taken off), so the commands they quote in
    backticks, split over comment lines or not, read as inline spans."""
    return "\n".join(
        line.strip()[1:].strip() for line in yaml_text.splitlines() if line.strip().startswith("#")
    )


def config_comments() -> list[tuple[str, str]]:
    return [
        (str(p.relative_to(ROOT)), comment_text(p.read_text(encoding="utf-8")))
        for p in sorted((ROOT / "configs").glob("*.yaml"))
    ]


# --------------------------------------------------------------------------- the docs


def test_every_horizonbench_command_the_docs_show_parses():
    parser = strict_parser()
    shown = [c for name, text in docs() for c in shown_commands(text, name)]
    assert len(shown) >= 20, f"the extraction found only {len(shown)} commands"
    subcommands = {c.text.split()[1] for c in shown}
    # the README's command list names every subcommand the CLI has
    assert subcommands >= set(_subparsers(parser)), set(_subparsers(parser)) - subcommands
    problems = []
    for command in shown:
        error = command_error(parser, command)
        if error:
            problems.append(f"{command.where}: `{command.text}`: {error}")
    assert not problems, "\n".join(problems)


def test_every_horizonbench_command_a_config_comment_quotes_parses():
    parser = strict_parser()
    shown = [c for name, text in config_comments() for c in shown_commands(text, name)]
    assert len(shown) >= 2, shown  # wmc-grid-api.yaml and wmc-fine-api.yaml quote their dry runs
    problems = [f"{c.where}: `{c.text}`: {e}" for c in shown if (e := command_error(parser, c))]
    assert not problems, "\n".join(problems)
    assert not [
        name
        for _, text in config_comments()
        for name in CONFIG_PATH.findall(text)
        if not (ROOT / name).is_file()
    ]


def test_every_script_command_the_docs_show_names_a_script_and_its_flags():
    shown = [c for name, text in docs() for c in shown_commands(text, name, SCRIPT)]
    assert len(shown) >= 10, f"the extraction found only {len(shown)} script commands"
    problems = [f"{c.where}: {p}" for c in shown if (p := script_problem(c.text))]
    assert not problems, "\n".join(problems)


def test_every_make_target_the_docs_name_exists():
    targets = make_targets((ROOT / "Makefile").read_text(encoding="utf-8"))
    shown = [t for name, text in docs() for t in shown_make_targets(text, name)]
    assert {"demo", "test", "bench"} <= {t.text for t in shown}
    problems = [f"{t.where}: make {t.text}: no such target" for t in shown if t.text not in targets]
    assert not problems, "\n".join(problems)


def _configs_named() -> list[str]:
    return sorted({n for _, text in docs() for n in named_configs(text)} - PLACEHOLDER_CONFIGS)


@pytest.mark.parametrize("name", _configs_named())
def test_every_config_the_docs_name_exists_and_loads(name):
    path = ROOT / name
    assert path.is_file(), f"the docs name {name}, which does not exist"
    cfg = load_config(path)
    assert cfg.families or cfg.worlds


def test_the_docs_name_the_shipped_configs():
    named = set(_configs_named())
    assert len(named) >= 8, named


def test_the_allowlists_are_used():
    text = "\n".join(t for _, t in docs())
    for name in PLACEHOLDER_CONFIGS | NOT_CONFIGS:
        assert name in text, f"{name} is allowlisted but no doc names it any more"


# --------------------------------------------------------------- the checks have teeth

BAD_DOC = """
```sh
horizonbench run --config configs/figure1.yaml --out runs/x --dry-rnu   # typo'd flag
horizonbench generte --config configs/figure1.yaml --out runs/x
horizonbench status   --run DIR [--jsn]
horizonbench serve --config configs/figure1.yaml \\
    --cron '0 2 * * *' --timezon Europe/Berlin
make dmeo
.venv/bin/python benchmarks/calibration.py --case lag
.venv/bin/python benchmarks/nothere.py
```
Run `horizonbench export --run DIR --format parquet|csv` or `configs/figure-1.yaml`.
"""


def test_a_typod_flag_or_subcommand_in_a_doc_is_caught():
    parser = strict_parser()
    errors = {c.text: command_error(parser, c) for c in shown_commands(BAD_DOC, "bad")}
    assert len(errors) == 5, errors
    assert all(errors.values()), errors  # every one of them is refused
    assert "--dry-rnu" in errors[next(k for k in errors if "dry-rnu" in k)]
    assert "generte" in errors[next(k for k in errors if "generte" in k)]
    assert "--timezon" in errors[next(k for k in errors if "timezon" in k)]  # the joined line
    assert "csv" in errors[next(k for k in errors if "csv" in k)]  # a mention: only its flags
    mention = Shown("horizonbench run --dry-rnu", "bad", block=False)
    assert "--dry-rnu" in (command_error(parser, mention) or "")
    assert command_error(parser, Shown("horizonbench run --dry-run", "ok", block=False)) is None


def test_a_missing_make_target_script_or_flag_is_caught():
    targets = make_targets((ROOT / "Makefile").read_text(encoding="utf-8"))
    assert [t.text for t in shown_make_targets(BAD_DOC, "bad") if t.text not in targets] == ["dmeo"]
    problems = [script_problem(c.text) for c in shown_commands(BAD_DOC, "bad", SCRIPT)]
    assert problems[0] is not None and "--case" in problems[0]
    assert problems[1] is not None and "no such script" in problems[1]


def test_a_missing_config_is_caught():
    assert "configs/figure-1.yaml" in named_configs(BAD_DOC)
    assert not (ROOT / "configs" / "figure-1.yaml").exists()


def test_the_good_forms_parse():
    parser = strict_parser()
    for command in (
        "horizonbench compare  DIR [DIR ...] --out OUT",
        "horizonbench export   --run DIR [--format parquet|jsonl|both]",
        "horizonbench serve    --config FILE [--out 'runs/nightly/{date}'] [--cron ...] [--timezone TZ]",
        "horizonbench run --config configs/wmc-grid-api.yaml --out runs/w --dry-run   # cost first",
    ):
        assert command_error(parser, Shown(command, "ok")) is None, command
    assert command_error(parser, Shown("horizonbench export --run DIR [--seed N]", "ok", block=False)) is None
    assert script_problem("benchmarks/calibration.py --cases lag --seed 1") is None


# ------------------------------------------------------ a quoted figure, recomputed


def _doc_figures():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import doc_figures
    finally:
        sys.path.pop(0)
    return doc_figures


def test_the_readmes_median_optimal_lengths_are_what_doc_figures_prints():
    """The horizon paragraph's L* ranges: deterministic (the worlds of
    configs/wmc-grid.yaml), cheap at sc = 20 (400 worlds built, no agent), so a change to
    StatefulPuzzle that moves them fails here until the README says what
    `python benchmarks/doc_figures.py horizons` prints."""
    figures = _doc_figures()
    config = ROOT / "configs" / "wmc-grid.yaml"
    at_20 = figures.median_range(figures.optimal_lengths(config, "stateful_puzzle", sc=20), 20)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"median L\\\* is (\S+) at sc = 20", readme.replace("\n", " "))
    assert found, "the README's horizon paragraph no longer quotes the median L* at sc = 20"
    assert found.group(1) == at_20, (
        f"README says median L* {found.group(1)} at sc = 20; doc_figures.py horizons prints {at_20}"
    )
    assert "doc_figures.py horizons" in readme
    # configs/wmc-grid.yaml's comment quotes the same figure
    comment = (ROOT / "configs" / "wmc-grid.yaml").read_text(encoding="utf-8").replace("\n# ", " ")
    assert f"median L* is {at_20} at sc = 20" in comment, "configs/wmc-grid.yaml quotes another median L*"
    # the check has teeth: the figure the README quoted before it was re-measured fails
    assert "36-63" != at_20


# ------------------------------------------------- the checker, over every CLI option


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_synopsis_of_real_options_parses_and_any_other_flag_is_refused(data):
    """Property: a synopsis built from a subcommand's own options (each optional, choices
    as ``a|b|c``, values as placeholders of the right type) is accepted, and adding a flag
    the subcommand does not have is refused, whatever else the line holds."""
    parser = strict_parser()
    subparsers = _subparsers(parser)
    name = data.draw(st.sampled_from(sorted(subparsers)))
    sub = subparsers[name]
    options = [a for a in sub._actions if a.option_strings and "--help" not in a.option_strings]
    chosen = data.draw(st.lists(st.sampled_from(options), unique_by=id)) if options else []
    parts = ["horizonbench", name]
    for action in chosen:
        flag = action.option_strings[-1]
        if action.nargs == 0:
            parts.append(f"[{flag}]")
        elif action.choices:
            parts.append(f"[{flag} {'|'.join(map(str, action.choices))}]")
        else:
            parts.append(f"[{flag} {'1' if action.type in (int, float) else 'X'}]")
    line = " ".join(parts)
    assert command_error(parser, Shown(line, "synopsis", block=False)) is None, line
    bogus = data.draw(
        st.from_regex(r"--[a-z][a-z-]{1,14}", fullmatch=True).filter(
            lambda f: f not in sub._option_string_actions
        )
    )
    position = data.draw(st.integers(2, len(parts)))
    broken = " ".join([*parts[:position], bogus, *parts[position:]])
    assert command_error(parser, Shown(broken, "synopsis", block=False)) is not None, broken
