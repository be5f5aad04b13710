"""The ``local`` provider: a trained sequence-model checkpoint rolled out through the real
evaluation engine, exactly like an API model (attempts table, scores, resume).

One tiny T5 (1 layer, width 32) is trained for a few dozen steps on Blocks World step
pairs once per module; it need not be good, only real: its answers go through the
engine, the attempt store and the rollout scorer as any model's do.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from horizonbench.core.errors import ConfigError
from horizonbench.core.registry import get_family
from horizonbench.datasets.puzzles.rollout import ROLLOUT_FAILURES
from horizonbench.datasets.puzzles.steps import step_rows
from horizonbench.models import failures as f
from horizonbench.models.attempt_store import AttemptStore
from horizonbench.models.engine import ModelRunner, converse
from horizonbench.schemas.config import GenerationSettings, ModelSpec, parse_config
from horizonbench.tasks.evaluate.rollouts import RolloutConversation, score_rollout

torch = pytest.importorskip("torch")

FAMILY = "blocks_world"
RULES = ["num_stacks"]
PARAMS = {
    "ns": [1, 2, 3],
    "num_stacks": 3,
    "per_n": 8,
    "alpha": 3,
    "start_sampler": "blockwise",
    "goal": "walk",
    "walk_moves": 35,
    "search": "bfs",
    "node_limit": 150000,
    "dedup": "after",
}


def _rows() -> list[dict[str, Any]]:
    """Certified Blocks World puzzles of sizes 1..3, as the generate stage makes them."""
    fam = get_family(FAMILY)
    params = fam.params_model.model_validate(PARAMS)
    cands = (fam.generate_candidate(params, 7, i) for i in range(200))
    return [c.row for c in cands if c.row is not None]


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return _rows()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]]) -> Path:
    """A tiny encoder-decoder trained for 30 steps on the puzzles' step pairs."""
    from horizonbench.schemas.training import ArchitectureSpec, OptimizerSpec
    from horizonbench.training import texts
    from horizonbench.training.trainer import TrainJob, train

    torch.set_num_threads(1)
    pairs = texts.pairs([s for r in rows for s in step_rows(r, "train", RULES)], RULES)
    job = TrainJob(
        train=pairs,
        validation=pairs[:16],
        arch=ArchitectureSpec(kind="encoder_decoder", layers=1, width=32, heads=2, dropout=0.0),
        condition="scratch",
        optimizer=OptimizerSpec(lr=3e-3, batch_size=16, max_steps=30, eval_every=30, patience=1),
        seed=0,
        out_dir=tmp_path_factory.mktemp("train"),
        init=None,
        tokenizer_texts=[t for pair in pairs for t in pair],
        puzzle=FAMILY,
        architecture="t5",
        threads=1,
        progress=False,
    )
    return Path(train(job).best_dir)


def _spec(ckpt: Path | str, **kw: Any) -> ModelSpec:
    raw = {"name": "tiny", "provider": "local", "checkpoints": {FAMILY: str(ckpt)}, **kw}
    return ModelSpec.model_validate(raw, strict=True)


def _config(ckpt: Path, modes: list[str], **model: Any) -> Any:
    return parse_config(
        {
            "run": {"name": "local", "seed": 5},
            "families": {FAMILY: {"params": PARAMS, "sampling": {"count": 8}, "modes": modes}},
            "evaluation": {
                "samples": 1,
                "settings": {"temperature": 0.0, "max_tokens": 256},
                "models": [
                    {"name": "tiny", "provider": "local", "checkpoints": {FAMILY: str(ckpt)}, **model}
                ],
            },
            "dask": {"n_workers": 1},
        }
    )


def _conversations(rows: list[dict[str, Any]], max_tokens: int = 256) -> list[RolloutConversation]:
    fam = get_family(FAMILY)
    settings = GenerationSettings(temperature=0.0, max_tokens=max_tokens)
    return [RolloutConversation(fam, r, fam.prompt_model(), settings, 5, "tiny", 0) for r in rows]


# --- config ---------------------------------------------------------------------------------------


def test_a_local_model_is_refused_on_plan_modes_with_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _config(tmp_path, ["plan", "rollout"])
    assert str(err.value) == (
        "config: evaluation.models.0: the local model 'tiny' answers rollout steps only, but "
        "families.blocks_world.modes is ['plan', 'rollout']; use modes: [rollout]"
    )
    cfg = _config(tmp_path, ["rollout"])
    spec = cfg.evaluation.models[0]
    # batching wants the episodes in flight: max_concurrency follows decode_batch unless set
    assert spec.max_concurrency == spec.decode_batch == 32
    assert _config(tmp_path, ["rollout"], decode_batch=8).evaluation.models[0].max_concurrency == 8
    assert _config(tmp_path, ["rollout"], max_concurrency=3).evaluation.models[0].max_concurrency == 3
    assert spec.price().cost(10**6, 10**6) == 0.0 and spec.price().source == "local"
    with pytest.raises(ConfigError, match="no checkpoint for family 'blocks_world'"):
        parse_config(
            {
                "families": {FAMILY: {"params": PARAMS, "sampling": {"count": 8}, "modes": ["rollout"]}},
                "evaluation": {"models": [{"name": "t", "provider": "local", "checkpoints": {"hanoi": "x"}}]},
            }
        )
    with pytest.raises(ValueError, match="checkpoints: only local models"):
        ModelSpec.model_validate({"name": "o", "provider": "offline", "kind": "oracle", "checkpoints": {}})
    with pytest.raises(ValueError, match="model: a local model does not use it"):
        _spec(tmp_path, model="t5-small")


def test_importing_the_provider_and_the_factory_does_not_load_torch() -> None:
    code = (
        "import sys, horizonbench.models.factory, horizonbench.models.local, "
        "horizonbench.tasks.evaluate.attempts; assert 'torch' not in sys.modules, 'torch loaded'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# --- the model itself --------------------------------------------------------------------------------


def test_identity_is_the_checkpoints_digest_not_its_path(checkpoint: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    from horizonbench.models.factory import build_model
    from horizonbench.models.local import LocalModel

    model = build_model(_spec(checkpoint))
    assert isinstance(model, LocalModel)
    ident = model.identity()
    assert set(ident) == {"provider", "checkpoints"} and ident["provider"] == "local"
    assert set(ident["checkpoints"]) == {FAMILY} and len(ident["checkpoints"][FAMILY]) == 64
    copy = tmp_path / "copy"
    shutil.copytree(checkpoint, copy)
    assert LocalModel(_spec(copy)).identity() == ident  # the same weights elsewhere: answers reused
    weights = sorted(copy.glob("*.safetensors"))
    assert weights, sorted(p.name for p in copy.iterdir())
    changed = LocalModel(_spec(copy))
    changed.identity()
    tensors = load_file(weights[0])
    first = sorted(tensors)[0]
    tensors[first] = tensors[first] + 0.5
    save_file(tensors, weights[0], metadata={"format": "pt"})
    # a retrained checkpoint never reuses the answers of the old one
    assert LocalModel(_spec(copy)).identity()["checkpoints"] != ident["checkpoints"]
    # and a model whose digest was taken before the change refuses to answer with it
    conv = _conversations(_rows()[:1])[0]
    with pytest.raises(f.CallFailure) as err:
        changed.complete(conv.first())
    assert err.value.kind == f.NOT_FOUND and "changed after its digest" in err.value.message


def test_steps_are_batched_and_each_step_is_answered(checkpoint: Path, rows: list[dict[str, Any]]) -> None:
    """24 episodes in flight cost one generate per round of steps, not one per step."""
    from horizonbench.models.local import LocalModel

    torch.set_num_threads(1)
    spec = _spec(checkpoint, decode_batch=16)
    model = LocalModel(spec)
    runner = ModelRunner(model, AttemptStore(":memory:"), max_concurrency=spec.max_concurrency)
    convs = _conversations(rows[:24])
    episodes = converse(convs, runner)
    steps = sum(len(turns) for turns in episodes)
    assert all(o.completion is not None for turns in episodes for o in turns)
    assert model.generate_calls == len(model.batch_sizes) and sum(model.batch_sizes) == steps
    assert max(model.batch_sizes) > 1 and max(model.batch_sizes) <= 16
    assert model.generate_calls < steps / 2, model.batch_sizes
    for conv, turns in zip(convs, episodes, strict=True):
        first = turns[0].completion
        assert first is not None and first.finish_reason in ("stop", "length")
        assert first.input_tokens > 0 and first.output_tokens > 0 and first.cost_usd == 0.0
        assert conv.episode.done and (conv.episode.solved or conv.episode.failure in ROLLOUT_FAILURES)


def test_plan_requests_and_cut_answers(checkpoint: Path, rows: list[dict[str, Any]]) -> None:
    from dataclasses import replace

    from horizonbench.models.local import LocalModel

    model = LocalModel(_spec(checkpoint))
    request = _conversations(rows[-1:], max_tokens=1)[0].first()
    with pytest.raises(f.CallFailure) as err:
        model.complete(replace(request, mode="plan"))
    assert err.value.kind == f.BAD_REQUEST and not err.value.retryable
    cut = model.complete(request)  # one new token cannot hold a state and its end
    assert cut.finish_reason == "length" and cut.output_tokens <= 1
    ep = get_family(FAMILY).episode(rows[-1])
    ep.feed(cut.text, cut.finish_reason)
    assert ep.failure == "budget_exceeded"


# --- through the evaluation stage: attempts table, scores, resume ------------------------------------


def test_the_evaluate_stage_rolls_out_scores_and_resumes(
    checkpoint: Path, rows: list[dict[str, Any]], tmp_path: Path
) -> None:
    from prefect.logging import disable_run_logger

    from horizonbench.tasks.evaluate.attempts import evaluate_models
    from horizonbench.tasks.evaluate.estimate import estimate_rows
    from horizonbench.tasks.run_folder.layout import ATTEMPTS_REL, instances_rel
    from horizonbench.tasks.run_folder.storage import rows_to_table
    from horizonbench.tasks.run_folder.table_parts import PartWriter
    from horizonbench.tasks.score.stage import score_run

    torch.set_num_threads(1)
    run = tmp_path / "run"
    fam = get_family(FAMILY)
    kept = rows[::3]  # sizes 1..3, 17 puzzles
    with PartWriter(run / instances_rel(FAMILY), fam.instance_schema, instances_rel(FAMILY)) as writer:
        writer.write(rows_to_table(kept, fam.instance_schema))
    cfg = _config(checkpoint, ["rollout"])
    dry = estimate_rows(cfg, run)  # the dry run: no call, no load, no cost
    assert dry[0]["model"] == "tiny" and dry[0]["cost_usd_max"] == 0.0 and dry[0]["price"] == "local"

    with disable_run_logger():
        first = evaluate_models.fn(cfg, str(run))
    counts = first["models"]["tiny"]
    attempts = pq.read_table(run / ATTEMPTS_REL).to_pylist()
    assert counts["failed"] == 0 and counts["reused"] == 0 and counts["calls"] == len(attempts)
    assert {a["model"] for a in attempts} == {"tiny"} and {a["mode"] for a in attempts} == {"rollout"}
    assert {a["instance_id"] for a in attempts} == {r["instance_id"] for r in kept}
    assert all(a["response"] is not None and a["finish_reason"] in ("stop", "length") for a in attempts)

    dest = tmp_path / "scores.parquet"
    score_run(cfg, run, dest)
    scores = pq.read_table(dest).to_pylist()
    assert len(scores) == len(kept) and {s["model"] for s in scores} == {"tiny"}
    assert all(s["mode"] == "rollout" for s in scores)
    assert all(s["success"] or s["violation"] in ROLLOUT_FAILURES for s in scores)
    by_id = {r["instance_id"]: r for r in kept}
    for s in scores:  # the scorer and the engine agree: replaying the stored steps
        turns = [a for a in attempts if a["instance_id"] == s["instance_id"]]
        replayed = score_rollout(fam, by_id[s["instance_id"]], turns)
        assert replayed is not None and replayed.success == s["success"]

    with disable_run_logger():
        again = evaluate_models.fn(cfg, str(run))
    assert again["models"]["tiny"]["calls"] == 0  # the same checkpoint: every step reused
    resumed = pq.read_table(run / ATTEMPTS_REL).to_pylist()
    assert all(a["reused"] for a in resumed)
    assert [a["response"] for a in resumed] == [a["response"] for a in attempts]
