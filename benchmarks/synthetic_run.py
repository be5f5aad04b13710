"""A synthetic finished run folder of realistic shape, as large as asked (``analysis_scale.py``).

A manifest holding a figure1-like config, ``scores/scores.parquet``,
``attempts/attempts.parquet`` with a maze answer of 1-3 kB per attempt, and
``instances/maze/part-00000.parquet`` whose rows are real certified 40x40 mazes, for the
report's violation maps. The data: 4 models (offline ``noisy`` entries whose eps gives
L0 = 120, 60, 30 and 15), 5 samples per instance, L drawn uniformly in 10..119 and moved
to the nearest L of a pool of 160 generated mazes (about 80 distinct L from 20 up),
success ``min(1, A exp(-L / L0))``, 0.3 % of attempts without an answer, failures spread
over the maze violation names (``datasets/maze/categories.py``) with a first violation
step, progress, precision and recall consistent with it. Everything is built with numpy
and Arrow compute (a million rows in about 20 s, most of it compressing the answers).

Not a benchmark itself: ``benchmarks/analysis_scale.py`` times the commands on it, and
``tests/test_analysis_scale.py`` checks its tables have the pipeline's schemas.
"""

from __future__ import annotations

import functools
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SAMPLES = 5
#: (model name, L0 of its decay, A)
MODELS = (
    ("noisy-L0-120", 120.0, 1.0),
    ("noisy-L0-60", 60.0, 0.97),
    ("noisy-L0-30", 30.0, 0.93),
    ("noisy-L0-15", 15.0, 0.9),
)
L_MIN, L_MAX = 10, 120
UNANSWERED = 0.003
#: failure mix over the maze violation names (rules.VIOLATIONS), roughly as models fail
VIOLATION_MIX = {
    "non_adjacent_move": 0.20,
    "locked_door": 0.18,
    "key_not_held": 0.12,
    "suboptimal": 0.10,
    "no_rescue": 0.08,
    "wrong_key": 0.05,
    "key_not_in_room": 0.04,
    "invalid_output": 0.04,
    "use_key_without_unlock": 0.03,
    "unlock_without_use_key": 0.03,
    "rescue_elsewhere": 0.03,
    "not_locked": 0.02,
    "after_rescue": 0.02,
    "unknown_action": 0.02,
    "bad_start": 0.02,
    "rescue_wrong_target": 0.01,
}
PARSE_ERRORS = (
    "no plan found in the answer",
    "the answer's list could not be read",
    "a step is not a pair of strings",
)
ERROR_CLASSES = ("rate_limit", "server_error", "timeout")
#: attempts rows built and written at a time (bounds the builder's memory)
CHUNK = 100_000
#: the maze setting of the run (seqBench's Figure 1), and the real mazes drawn for it
MAZE_PARAMS = {"grid_rows": 40, "grid_cols": 40, "num_keys": 2, "noise_ratio": 0.0, "shuffle_ratio": 1.0}
POOL = 160
POOL_SEED = 7_000_000
PLAN_VARIANTS = 4
MAX_PLAN = 180


def _hex_strings(rng: np.random.Generator, n: int, width: int, prefix: str = "") -> pa.Array:
    """``n`` random lowercase hex strings of ``width`` digits after ``prefix``, built
    straight into an Arrow string array (no Python string per row)."""
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    pre = np.frombuffer(prefix.encode(), dtype=np.uint8)
    size = pre.size + width
    out = np.empty((n, size), dtype=np.uint8)
    out[:, : pre.size] = pre
    out[:, pre.size :] = digits[rng.integers(0, 16, size=(n, width), dtype=np.uint8)]
    offsets = np.arange(0, (n + 1) * size, size, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out.tobytes()))


def _room(rng: np.random.Generator) -> str:
    col = int(rng.integers(0, 40))
    letters = chr(ord("A") + col) if col < 26 else "A" + chr(ord("A") + col - 26)
    return f"{letters}{int(rng.integers(1, 41))}"


def _plan_pool(rng: np.random.Generator) -> pa.Array:
    """``PLAN_VARIANTS`` maze answers (``Solution: [('start', 'Q7'), ...]``) for each plan
    length 1..MAX_PLAN, at index ``(length - 1) * PLAN_VARIANTS + variant``."""
    texts = []
    for length in range(1, MAX_PLAN + 1):
        for _ in range(PLAN_VARIANTS):
            steps = [f"('start', '{_room(rng)}')"]
            key = 0
            while len(steps) < length - 1:
                r = rng.random()
                if r < 0.06:
                    key = int(rng.integers(1, 10))
                    steps.append(f"('pick_up_key', '{key}')")
                elif r < 0.1 and key:
                    steps.append(f"('use_key', '{key}')")
                    steps.append(f"('unlock_and_open_door_to', '{_room(rng)}')")
                else:
                    steps.append(f"('move_to', '{_room(rng)}')")
            steps = steps[: max(length - 1, 1)]
            if length > 1:
                steps.append("('rescue', 'Alice')")
            texts.append("Solution: [" + ", ".join(steps) + "]")
    return pa.array(texts, pa.string())


def _prose_pool(rng: np.random.Generator) -> pa.Array:
    """Answers with no readable plan (``invalid_output``), about 1 kB each."""
    words = "Bob must reach Alice first key door locked room path then open the move".split()
    return pa.array(
        [" ".join(rng.choice(words, size=int(rng.integers(120, 220)))) + "." for _ in range(16)], pa.string()
    )


@functools.lru_cache(maxsize=1)
def maze_pool() -> pa.Table:
    """Real certified 40x40, B = 2 maze instance rows with L in L_MIN..L_MAX - 1, about
    POOL of them, sorted by L: every synthetic instance is one of these under its own id,
    so the instance table has real facts and the report can draw its violation maps."""
    from horizonbench.datasets.maze.family import MazeFamily

    family = MazeFamily()
    params = family.params_model.model_validate(MAZE_PARAMS)
    rows = []
    for index in range(40 * POOL):
        row = family.generate_candidate(params, POOL_SEED + index, index).row
        if row is not None and L_MIN <= row["solution_length"] < L_MAX:
            rows.append(row)
            if len(rows) == POOL:
                break
    rows.sort(key=lambda r: r["solution_length"])
    return pa.Table.from_pylist(rows, schema=family.instance_schema)


def synthetic_columns(n_target: int, seed: int) -> dict[str, Any]:
    """Every per-attempt value as numpy arrays (one row per model x instance x sample,
    in that order, as the score stage writes them)."""
    rng = np.random.default_rng(seed)
    n_models = len(MODELS)
    instances = max(1, n_target // (n_models * SAMPLES))
    n = instances * n_models * SAMPLES
    # L drawn uniformly, then the pool maze of the nearest L stands for the instance
    pool_L = maze_pool()["solution_length"].to_numpy().astype(np.int64)
    wanted = rng.integers(L_MIN, L_MAX, size=instances)
    right = np.clip(np.searchsorted(pool_L, wanted), 0, pool_L.size - 1)
    left = np.clip(right - 1, 0, pool_L.size - 1)
    inst_pool = np.where(np.abs(pool_L[left] - wanted) <= np.abs(pool_L[right] - wanted), left, right)
    inst_L = pool_L[inst_pool]
    model = np.repeat(np.arange(n_models), instances * SAMPLES)
    inst = np.tile(np.repeat(np.arange(instances), SAMPLES), n_models)
    sample = np.tile(np.arange(SAMPLES), instances * n_models).astype(np.int32)
    L = inst_L[inst]
    L0 = np.array([m[1] for m in MODELS])[model]
    A = np.array([m[2] for m in MODELS])[model]
    p = np.minimum(1.0, A * np.exp(-L / L0))
    answered = rng.random(n) >= UNANSWERED
    success = answered & (rng.random(n) < p)
    failed = answered & ~success
    names = np.array(list(VIOLATION_MIX), dtype=object)
    weights = np.array(list(VIOLATION_MIX.values()))
    vcode = np.full(n, -1)
    vcode[failed] = rng.choice(names.size, size=int(failed.sum()), p=weights / weights.sum())
    code = {v: i for i, v in enumerate(names)}
    invalid = vcode == code["invalid_output"]
    suboptimal = vcode == code["suboptimal"]
    plan_len = np.where(success, L, 0)
    wander = np.rint(L * (1 + rng.normal(0.0, 0.15, n))).astype(np.int64)
    plan_len = np.where(failed & ~invalid, np.clip(wander, 1, MAX_PLAN), plan_len)
    plan_len = np.where(suboptimal, np.maximum(plan_len, L + 1), plan_len)
    fvs = np.floor(rng.random(n) * plan_len).astype(np.int64) + 1
    fvs = np.minimum(fvs, plan_len)
    fvs = np.where(vcode == code["bad_start"], 0, fvs)
    fvs = np.where(vcode == code["no_rescue"], plan_len, fvs)
    progress_steps = np.minimum(np.floor(fvs * rng.uniform(0.6, 1.0, n)), L)
    fvs = np.where(suboptimal, progress_steps, fvs)
    progress = np.where(success, 1.0, np.where(failed & ~invalid, progress_steps / L, 0.0))
    precision = np.where(success, 1.0, np.where(failed & ~invalid, rng.uniform(0.3, 1.0, n), 0.0))
    recall = np.where(success, 1.0, np.where(failed & ~invalid, rng.uniform(0.2, 1.0, n), 0.0))
    positional = np.where(success, 1.0, np.where(failed, precision * rng.random(n), np.nan))
    return {
        "n": n,
        "instances": instances,
        "inst_pool": inst_pool,
        "rng": rng,
        "model": model,
        "inst": inst,
        "sample": sample,
        "L": L,
        "answered": answered,
        "success": success,
        "exact": success & (rng.random(n) < 0.95),
        "valid": success | suboptimal,
        "vcode": vcode,
        "names": names,
        "invalid": invalid,
        "plan_len": plan_len,
        "fvs": fvs,
        "fvs_null": ~failed | invalid,
        "progress": progress,
        "precision": precision,
        "recall": recall,
        "positional": positional,
        "parse_code": rng.integers(0, len(PARSE_ERRORS), n),
        "error_code": rng.integers(0, len(ERROR_CLASSES), n),
    }


def _strings(values: np.ndarray, codes: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """``values[codes]`` as an Arrow string column (null where ``mask``), via a
    dictionary so no Python string is made per row."""
    dictionary = pa.array([str(v) for v in values], pa.string())
    indices = pa.array(np.asarray(codes, dtype=np.int32), mask=mask)
    return pc.take(dictionary, indices)


def scores_table(c: dict[str, Any], instance_ids: pa.Array) -> pa.Table:
    from horizonbench.schemas.tables import SCORES_SCHEMA

    n = c["n"]
    unanswered = ~c["answered"]
    model_names = np.array([m[0] for m in MODELS], dtype=object)
    null_f = pa.nulls(n, pa.float64())
    null_i = pa.nulls(n, pa.int32())
    cols = {
        "model": _strings(model_names, c["model"]),
        "instance_id": pc.take(instance_ids, pa.array(c["inst"])),
        "family": _strings(np.array(["maze"]), np.zeros(n)),
        "mode": _strings(np.array(["plan"]), np.zeros(n)),
        "sample": pa.array(c["sample"], pa.int32()),
        "answered": pa.array(c["answered"]),
        "error_class": _strings(np.array(ERROR_CLASSES), c["error_code"], mask=c["answered"]),
        "solution_length": pa.array(c["L"].astype(np.int32)),
        "num_keys": pa.array(np.full(n, 2, np.int32)),
        "noise_ratio": pa.array(np.zeros(n)),
        "shuffle_ratio": pa.array(np.ones(n)),
        "success": pa.array(c["success"]),
        "valid": pa.array(c["valid"]),
        "exact_match": pa.array(c["exact"]),
        "progress_ratio": pa.array(c["progress"]),
        "precision": pa.array(c["precision"]),
        "precision_positional": pa.array(c["positional"], mask=unanswered),
        "recall": pa.array(c["recall"]),
        "plan_length": pa.array(c["plan_len"].astype(np.int32)),
        "violation": _strings(c["names"], np.maximum(c["vcode"], 0), mask=c["vcode"] < 0),
        "first_violation_step": pa.array(c["fvs"].astype(np.int32), mask=c["fvs_null"]),
        "parse_error": _strings(np.array(PARSE_ERRORS), c["parse_code"], mask=~c["invalid"]),
        "n": null_i,
        "optimality_gap": null_f,
        "move_legality_rate": null_f,
        "steps_taken": null_i,
        # puzzle-only measures (the maze leaves them null, as score_shards does)
        "legal_move_coverage": null_f,
        "best_progress": null_f,
    }
    return pa.table([cols[f.name] for f in SCORES_SCHEMA], schema=SCORES_SCHEMA)


def write_attempts(c: dict[str, Any], instance_ids: pa.Array, dest: Path) -> int:
    """``attempts/attempts.parquet``, built CHUNK rows at a time and written in one
    ``pq.write_table`` as ``tasks/run_folder/storage.write_table`` does (the same row groups: up to
    1Mi rows each); returns its bytes of response text."""
    from horizonbench.schemas.tables import ATTEMPTS_SCHEMA

    rng = c["rng"]
    plans, prose = _plan_pool(rng), _prose_pool(rng)
    model_names = np.array([m[0] for m in MODELS], dtype=object)
    text_bytes = 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    chunks = []
    for lo in range(0, c["n"], CHUNK):
        sl = slice(lo, min(lo + CHUNK, c["n"]))
        k = sl.stop - sl.start
        answered, invalid, plan_len = c["answered"][sl], c["invalid"][sl], c["plan_len"][sl]
        ids = pc.take(instance_ids, pa.array(c["inst"][sl]))
        variant = rng.integers(0, PLAN_VARIANTS, k)
        idx = (np.clip(plan_len, 1, MAX_PLAN) - 1) * PLAN_VARIANTS + variant
        body = pc.if_else(
            pa.array(invalid),
            pc.take(prose, pa.array(rng.integers(0, len(prose), k))),
            pc.take(plans, pa.array(idx)),
        )
        keys = pc.cast(pa.array(rng.integers(1, 10, k)), pa.string())
        lead = pc.binary_join_element_wise(
            "Here is my plan for ",
            ids,
            ". Bob has to pick up key ",
            keys,
            " before the locked door on the way, then walk on to Alice.\n\n",
            "",
        )
        response = pc.if_else(
            pa.array(answered), pc.binary_join_element_wise(lead, body, ""), pa.nulls(k, pa.string())
        )
        text_bytes += int(pc.sum(pc.binary_length(response)).as_py() or 0)
        out_tokens = np.where(answered, pc.binary_length(response).to_numpy(zero_copy_only=False) / 4, 0)
        in_tokens = 1500 + 40 * c["L"][sl] + rng.integers(0, 200, k)
        error = _strings(np.array([f"{e}: the provider gave up" for e in ERROR_CLASSES]), c["error_code"][sl])
        cols = {
            "attempt_key": _hex_strings(rng, k, 64),
            "model": _strings(model_names, c["model"][sl]),
            "instance_id": ids,
            "family": _strings(np.array(["maze"]), np.zeros(k)),
            "sample": pa.array(c["sample"][sl], pa.int32()),
            "turn": pa.array(np.zeros(k, np.int32)),
            "mode": _strings(np.array(["plan"]), np.zeros(k)),
            "prompt_sha256": _hex_strings(rng, k, 64),
            "response": response,
            "finish_reason": _strings(np.array(["stop"]), np.zeros(k), mask=~answered),
            "input_tokens": pa.array(in_tokens.astype(np.int64)),
            "output_tokens": pa.array(np.nan_to_num(out_tokens).astype(np.int64)),
            "latency_s": pa.array(rng.gamma(2.0, 4.0, k)),
            "cost_usd": pa.array(np.where(answered, in_tokens * 3e-6 + out_tokens * 15e-6, 0.0)),
            "error": pc.if_else(pa.array(answered), pa.nulls(k, pa.string()), error),
            "error_class": _strings(np.array(ERROR_CLASSES), c["error_code"][sl], mask=answered),
            "tries": pa.array(np.where(answered, 1, 4).astype(np.int32)),
            "reused": pa.array(np.zeros(k, bool)),
            "via_batch": pa.array(np.zeros(k, bool)),
            "served_model": _strings(model_names, c["model"][sl], mask=~answered),
            "system_fingerprint": pa.nulls(k, pa.string()),
        }
        chunks.append(pa.table([cols[f.name] for f in ATTEMPTS_SCHEMA], schema=ATTEMPTS_SCHEMA))
    pq.write_table(pa.concat_tables(chunks), dest, compression="zstd", write_statistics=True)
    return text_bytes


def write_instances(c: dict[str, Any], instance_ids: pa.Array, dest: Path) -> None:
    """``instances/maze/part-00000.parquet``: each instance a pool maze under its own id and seed."""
    table = maze_pool().take(pa.array(c["inst_pool"]))
    seeds = c["rng"].integers(0, 2**62, size=c["instances"])
    for name, values in (
        ("instance_id", instance_ids),
        ("seed", pa.array(seeds, pa.int64())),
        ("candidate_index", pa.array(np.arange(c["instances"]), pa.int64())),
    ):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, table.schema.field(i), values)
    dest.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, dest, compression="zstd", write_statistics=True)


def _config(instances: int) -> dict[str, Any]:
    per_bin = max(1, math.ceil(instances / (L_MAX - L_MIN)))
    return {
        "run": {"name": "analysis-scale", "seed": 2025},
        "families": {
            "maze": {
                "params": dict(MAZE_PARAMS),
                "sampling": {
                    "bins": {"min": L_MIN, "max": L_MAX, "width": 1, "per_bin": per_bin},
                    "shard_size": 500,
                    "max_candidates": 100 * instances,
                },
            }
        },
        "evaluation": {
            "samples": SAMPLES,
            "models": [
                {"name": name, "provider": "offline", "kind": "noisy", "eps": -math.expm1(-1.0 / L0)}
                for name, L0, _ in MODELS
            ],
        },
        "dask": {"n_workers": 2},
    }


def _manifest(c: dict[str, Any], run: Path) -> dict[str, Any]:
    from horizonbench.schemas.config import parse_config
    from horizonbench.tasks.run_folder.manifest import content_hashes, git_sha, versions

    cfg = parse_config(_config(c["instances"]), source="analysis_scale")
    models = {}
    for m, (name, _, _) in enumerate(MODELS):
        mine = c["model"] == m
        answered = int((c["answered"] & mine).sum())
        failed = int((~c["answered"] & mine).sum())
        classes = np.bincount(c["error_code"][mine & ~c["answered"]], minlength=len(ERROR_CLASSES))
        models[name] = {
            "attempts": int(mine.sum()),
            "answered": answered,
            "reused": 0,
            "failed": failed,
            "failed_by_class": {k: int(v) for k, v in zip(ERROR_CLASSES, classes, strict=True) if v},
            "calls": int(mine.sum()) + 3 * failed,
            "rate_limited": 0,
            "concurrency_cuts": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": 0.0,
            "cost_usd_this_run": 0.0,
            "price": {"input_per_mtok": 0.0, "output_per_mtok": 0.0, "source": "offline"},
            "served_models": [name],
            "stopped": None,
        }
    total = {
        "attempts": c["n"],
        "answered": int(c["answered"].sum()),
        "failed": int((~c["answered"]).sum()),
        "cost_usd_this_run": 0.0,
        "budget_usd": None,
        "budget_reached": False,
    }
    generation = {
        "family": "maze",
        "kept": c["instances"],
        "candidates_considered": 7 * c["instances"],
        "candidates_certified": 6 * c["instances"],
        "rejections": {},
        "unfilled_bins": {},
        "path": "instances/maze",
    }
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "config": cfg.model_dump(mode="json"),
        "versions": versions(),
        "git_sha": git_sha(),
        "started_at": now,
        "finished_at": now,
        "counts": {"generation": [generation], "attempts": {"models": models, "total": total}},
        "content_sha256": content_hashes(run),
    }


def build_run(run: Path, n_target: int, seed: int = 0) -> dict[str, Any]:
    """A finished run folder with about ``n_target`` scored maze attempts."""
    t0 = time.perf_counter()
    c = synthetic_columns(n_target, seed)
    ids = _hex_strings(c["rng"], c["instances"], 16, prefix="maze-")
    run.mkdir(parents=True, exist_ok=True)
    (run / "scores").mkdir(exist_ok=True)
    pq.write_table(scores_table(c, ids), run / "scores" / "scores.parquet", compression="zstd")
    write_instances(c, ids, run / "instances" / "maze" / "part-00000.parquet")
    text_bytes = write_attempts(c, ids, run / "attempts" / "attempts.parquet")
    (run / "manifest.json").write_text(json.dumps(_manifest(c, run), indent=2, sort_keys=True))
    return {
        "rows": c["n"],
        "instances": c["instances"],
        "failed_rows": int((c["answered"] & ~c["success"]).sum()),
        "response_mb": text_bytes / 1e6,
        "attempts_file_mb": (run / "attempts" / "attempts.parquet").stat().st_size / 1e6,
        "scores_file_mb": (run / "scores" / "scores.parquet").stat().st_size / 1e6,
        "build_s": time.perf_counter() - t0,
    }
