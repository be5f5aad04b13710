"""What a run folder has paid for model calls, against its caps, across reruns.

The attempt store keeps a spend ledger (``models/attempt_store.py``): one row per call
a provider billed, under the run folder's tag. A run starts its :class:`Budget` from
that ledger, so ``evaluation.budget_usd`` (and a model's own ``budget_usd``) caps what
the *folder* has paid in all, not what one run spends: a rerun past a cap sends nothing.
A larger cap is an explicit choice: the config, or ``horizonbench run --budget-usd X``.

The same numbers (paid, cap, left; in total and per model) go to ``status``, the
manifest, the report and the Prefect summary, all read from the ledger through
:func:`folder_spend`, so they agree with each other and with what the budget enforced.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from horizonbench.models.attempt_store import read_spend
from horizonbench.models.budget import TOTAL, Budget

if TYPE_CHECKING:  # status imports this module: no pydantic for it
    from horizonbench.models.attempt_store import AttemptStore
    from horizonbench.schemas.config import Config

#: the key of the total cap in the store's budget_caps table
_TOTAL_KEY = ""
#: where a run folder keeps its tag (tasks/evaluate/attempts.py RUN_TAG_REL)
_RUN_TAG_REL = "attempts/run_tag"
#: what a user passes to raise the total cap
RAISE_HINT = "raise evaluation.budget_usd in the config or pass --budget-usd X"


def caps_of(cfg: Config) -> dict[str, float | None]:
    """The caps of a config: ``""`` the total, then each model's own (None: none); an
    offline model without a cap of its own is left out (it costs nothing)."""
    caps: dict[str, float | None] = {_TOTAL_KEY: cfg.evaluation.budget_usd}
    for spec in cfg.evaluation.models:
        if spec.provider != "offline" or spec.budget_usd is not None:
            caps[spec.name] = spec.budget_usd
    return caps


def run_budget(cfg: Config, store: AttemptStore, tag: str) -> Budget:
    """The run's budget, seeded with what the folder ``tag`` has paid already; the caps
    are recorded in the store for ``status``."""
    caps = caps_of(cfg)
    store.set_caps(tag, caps)
    models = {name: cap for name, cap in caps.items() if name != _TOTAL_KEY}
    return Budget(caps[_TOTAL_KEY], model_limits=models, spent=store.spent(tag))


def _left(cap: float | None, paid: float) -> float | None:
    return None if cap is None else round(max(0.0, cap - paid), 6)


def summarize(
    spent: dict[str | None, float], caps: dict[str, float | None], models: Iterable[str] = ()
) -> dict[str, Any]:
    """Paid, cap and left, in total and per model (JSON-ready; USD rounded to 1e-6).

    ``models`` are listed even when they paid nothing (the config's API models);
    ``unattributed_usd`` is spend a store made before the ledger could not assign."""
    paid = sum(spent.values())
    total_cap = caps.get(_TOTAL_KEY)
    names = list(dict.fromkeys([*models, *(n for n in caps if n != _TOTAL_KEY), *(n for n in spent if n)]))
    per_model = {}
    for name in names:
        cap, got = caps.get(name), spent.get(name, 0.0)
        per_model[name] = {"paid_usd": round(got, 6), "cap_usd": cap, "left_usd": _left(cap, got)}
    return {
        "paid_usd": round(paid, 6),
        "cap_usd": total_cap,
        "left_usd": _left(total_cap, paid),
        "models": per_model,
        "unattributed_usd": round(spent.get(None, 0.0), 6),
    }


def run_store_path(run: Path, config: dict[str, Any] | None) -> Path:
    """The attempt store of a run folder, from its config as JSON (``evaluation.store``)."""
    store = ((config or {}).get("evaluation") or {}).get("store")
    return Path(store) if store else run / "attempts" / "store.sqlite"


def folder_spend(run: Path, store: Path | None = None, models: Iterable[str] = ()) -> dict[str, Any] | None:
    """What the run folder has paid and has left, from the store's ledger (read only);
    None when the folder never ran an evaluation (no tag), the store cannot be read, or
    nothing was paid and no cap is set (offline models: nothing to say)."""
    tag_path = run / _RUN_TAG_REL
    if not tag_path.exists():
        return None
    if store is None:
        manifest = run / "manifest.json"
        config = None
        if manifest.exists():
            try:
                config = json.loads(manifest.read_text(encoding="utf-8")).get("config")
            except (OSError, ValueError):
                config = None
        store = run_store_path(run, config)
    try:
        spent, caps = read_spend(store, tag_path.read_text(encoding="utf-8").strip())
    except (OSError, sqlite3.Error):
        return None
    if not any(spent.values()) and all(cap is None for cap in caps.values()):
        return None
    return summarize(spent, caps, models)


def _usd(x: float) -> str:
    return f"{x:.4f} USD"


def _against(paid: float, cap: float | None, left: float | None) -> str:
    if cap is None:
        return f"{_usd(paid)} paid (no cap)"
    return f"{_usd(paid)} paid of {cap:g} USD ({_usd(left or 0.0)} left)"


def spend_lines(summary: dict[str, Any]) -> dict[str, str]:
    """Label -> text: the total, then each model (status, report and summary share them)."""
    out = {"budget": _against(summary["paid_usd"], summary["cap_usd"], summary["left_usd"])}
    for name, m in summary["models"].items():
        out[f"{name}: budget"] = _against(m["paid_usd"], m["cap_usd"], m["left_usd"])
    if summary.get("unattributed_usd"):
        out["budget: paid before the spend ledger (no model)"] = _usd(summary["unattributed_usd"])
    return out


def budget_hint(summary: dict[str, Any] | None, refused: Iterable[str]) -> str | None:
    """The part of the last line that says a cap stopped calls: what was paid, the cap,
    how to raise it. None when no cap refused a call in this run."""
    refused = set(refused)
    if summary is None or not refused:
        return None
    parts = []
    if TOTAL in refused and summary["cap_usd"] is not None:
        parts.append(
            f"the run folder has paid {_usd(summary['paid_usd'])} of its {summary['cap_usd']:g} USD "
            f"budget (across reruns; {RAISE_HINT} to send more)"
        )
    for name in sorted(refused - {TOTAL}):
        m = summary["models"].get(name)
        if m and m["cap_usd"] is not None:
            parts.append(
                f"model {name} has paid {_usd(m['paid_usd'])} of its {m['cap_usd']:g} USD budget "
                f"(raise evaluation.models[{name}].budget_usd to send more)"
            )
    return "; ".join(parts) or None


def budget_counts(cfg: Config, run: Path, refused: Iterable[str]) -> dict[str, Any] | None:
    """The manifest's ``counts.budget``: :func:`summarize` of the folder's ledger, with
    ``refused`` (the caps that refused a call in this run). None for a run whose models
    are all offline and that sets no cap: they cost nothing and the line would be noise."""
    caps = caps_of(cfg)
    api = [m.name for m in cfg.evaluation.models if m.provider != "offline"]
    if not api and all(cap is None for cap in caps.values()):
        return None
    summary = folder_spend(run, run_store_path(run, cfg.model_dump(mode="json")), api)
    if summary is None:
        return None
    return summary | {"refused": sorted(set(refused))}


def budget_problem(budget: dict[str, Any] | None) -> str | None:
    """The run's last line's budget part (see :func:`budget_hint`), from ``counts.budget``."""
    if not budget:
        return None
    return budget_hint(budget, budget.get("refused") or ())
