"""The run configuration, validated before anything is written.

A config is YAML or JSON. Unknown keys are errors (a typo must not silently fall back
to a default), types are strict (YAML's ``yes`` is not a seed, ``"no"`` is not a boolean,
``true`` is not 1: pydantic's lax mode would coerce all three), and every error names the
dotted path of the offending field.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from horizonbench.core.errors import ConfigError
from horizonbench.core.hazard import DEFAULT_CAP, PlantedTruth, complete_mix, usable_share
from horizonbench.core.registry import SETTING_SEPARATOR
from horizonbench.schemas.prices import Price, price_for
from horizonbench.schemas.training import TrainingSpec


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BinSpec(_Strict):
    """Keep ``per_bin`` instances in every bin ``[lo, lo + width)`` for lo in [min, max),
    or ``quotas[lo]`` in the bins it names."""

    min: int = Field(ge=1)
    max: int = Field(ge=2)
    width: int = Field(default=1, ge=1)
    per_bin: int = Field(ge=1)
    #: a quota of its own for some bins, keyed by the bin's lower edge: a puzzle size n
    #: with fewer distinct puzzles than per_bin (RecurrReason's Blocks World has 6 at
    #: n = 1) asks for what it has, and an explicit quota it cannot fill still fails
    quotas: dict[int, int] = Field(default_factory=dict)

    @field_validator("quotas", mode="before")
    @classmethod
    def _int_keys(cls, value: Any) -> Any:
        # JSON (and a config recorded in a manifest) spells the keys as strings
        if isinstance(value, dict):
            return {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _ordered(self) -> BinSpec:
        if self.max <= self.min:
            raise ValueError(f"max ({self.max}) must be greater than min ({self.min})")
        edges = set(self.edges())
        for lo, quota in self.quotas.items():
            if lo not in edges:
                raise ValueError(f"quotas: {lo} is not the lower edge of a bin ({_edges_text(self)})")
            if quota < 1:
                raise ValueError(f"quotas: the quota of bin {lo} must be at least 1 (got {quota})")
        return self

    def edges(self) -> list[int]:
        return list(range(self.min, self.max, self.width))

    def quota(self, lo: int) -> int:
        """How many instances the bin with lower edge ``lo`` keeps."""
        return self.quotas.get(lo, self.per_bin)

    def total(self) -> int:
        """How many instances all bins keep together."""
        return sum(self.quota(lo) for lo in self.edges())


def _repeated(names: list[str]) -> list[str]:
    """The names that stand more than once, sorted (what a uniqueness error lists)."""
    return sorted({n for n in names if names.count(n) > 1})


def _edges_text(bins: BinSpec) -> str:
    edges = bins.edges()
    shown = ", ".join(map(str, edges[:6])) + (", ..." if len(edges) > 6 else "")
    return f"edges {shown}"


class AdaptiveSpec(_Strict):
    """Adaptive depth sampling (``analysis/adaptive.py``): waves of instances chosen
    per model to pin its decay length, instead of filling every bin. The bins stay the
    grid the waves choose from, and ``per_bin`` the most any bin may hold."""

    #: stop when the interval's half-width is within this share of the estimate
    target: float = Field(default=0.05, gt=0, lt=1)
    #: calls per model and family label at most (none: ``max_waves`` ends it)
    max_calls: int | None = Field(default=None, ge=1)
    #: instances of the first wave, spread evenly over the bins' whole range
    first_wave: int = Field(default=24, ge=2, le=100_000)
    max_waves: int = Field(default=12, ge=1, le=100)
    #: share of every later wave spread evenly over the range, so a wrong first
    #: estimate or a curve that is not exponential is still seen
    explore: float = Field(default=0.2, ge=0, le=1)


class SamplingSpec(_Strict):
    """How many instances to keep: a plain ``count``, quotas per difficulty ``bins``, or
    ``all`` certified candidates (enumerated families); exactly one of them."""

    count: int | None = Field(default=None, ge=1)
    bins: BinSpec | None = None
    #: keep every certified candidate of the family's candidate space
    all: bool = False
    #: candidates per Dask task; by default sized to about a second of worker CPU. The
    #: kept instances never depend on it (nor on the worker count), only the traffic
    shard_size: int | None = Field(default=None, ge=1, le=100_000)
    #: give up oversampling after this many candidates (unfilled bins are reported)
    max_candidates: int = Field(default=200_000, ge=1)
    #: a run whose bins are not all filled ends with exit code 4 and the list of short
    #: bins (everything is still written); true accepts short bins as a success
    allow_unfilled: bool = False
    #: choose the instances in waves that pin each model's L0 (needs ``bins``: the grid)
    adaptive: AdaptiveSpec | None = None

    @model_validator(mode="after")
    def _one_target(self) -> SamplingSpec:
        if (self.count is not None) + (self.bins is not None) + bool(self.all) != 1:
            raise ValueError("give exactly one of 'count', 'bins' or 'all: true'")
        if self.adaptive is not None and self.bins is None:
            raise ValueError("adaptive: needs 'bins' (the grid of depths the waves choose from)")
        return self


class SettingSpec(_Strict):
    """One setting of a sweep: changes from the family's own section (the base setting).

    ``params`` and ``prompt`` are merged key by key over the base's; ``sampling``, when
    given, replaces the base's (seqBench's backtracking and noise points sample L in a
    narrow window, for example).
    """

    name: str = Field(min_length=1, max_length=60, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
    params: dict[str, Any] = Field(default_factory=dict)
    prompt: dict[str, Any] = Field(default_factory=dict)
    sampling: SamplingSpec | None = None


class FamilySpec(_Strict):
    """One family's section: generation parameters, sampling, prompt settings, and how
    models are evaluated on it."""

    params: dict[str, Any] = Field(default_factory=dict)
    sampling: SamplingSpec
    prompt: dict[str, Any] = Field(default_factory=dict)
    #: "plan": one answer with the whole move list, replayed; "rollout": one call per
    #: step, the model writing each next state (families that support it); both: each
    #: model is evaluated both ways
    modes: list[Literal["plan", "rollout"]] = Field(default_factory=lambda: ["plan"], min_length=1)
    #: more settings of this family, each evaluated by every model and given its own
    #: instance table under the label ``<family>@<name>`` (see :func:`expand_sweeps`)
    sweep: list[SettingSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _distinct_modes(self) -> FamilySpec:
        if len(set(self.modes)) != len(self.modes):
            raise ValueError(f"modes: each mode at most once (got {self.modes})")
        dupes = _repeated([s.name for s in self.sweep])
        if dupes:
            raise ValueError(f"sweep: setting names must be unique; repeated: {', '.join(dupes)}")
        return self


class GenerationSettings(_Strict):
    """Sampling settings sent to API models (the paper used T=1.0, top-p=0.95)."""

    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=0.95, gt=0.0, le=1.0)
    max_tokens: int = Field(default=8192, ge=1)


#: the answer styles of offline models (horizonbench.core.hazard.ANSWER_STYLES)
AnswerStyle = Literal["plain", "reasoning", "draft", "fenced", "json", "recap", "cut", "refusal"]


class ModelSpec(_Strict):
    """One model to evaluate. ``name`` labels it in every table and in the report."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:@/+-]+$")
    provider: Literal["offline", "openai", "anthropic", "openai_compatible", "local"]
    #: offline baselines: oracle | noisy | random | rising (a simulated model whose
    #: per-step error rises with the step index; see horizonbench.core.hazard)
    kind: Literal["oracle", "noisy", "random", "rising"] | None = None
    #: per-step error probability of the ``noisy`` baseline; the first step's for ``rising``
    eps: float | None = Field(default=None, ge=0.0, lt=1.0)
    #: ``rising``: how the error of step i (from 1) grows: linear eps*(1 + rate*(i-1)),
    #: or exponential eps*(1 + rate)^(i-1); each step's capped at ``eps_cap``
    rise: Literal["linear", "exponential"] | None = None
    rate: float | None = Field(default=None, gt=0.0, le=100.0)
    #: ``rising``: the most any step's error reaches (below 1); default 0.9
    eps_cap: float | None = Field(default=None, gt=0.0, lt=1.0)
    #: offline models: shares of answer styles (plain, reasoning, draft, fenced, json,
    #: recap, cut, refusal), summing to at most 1; ``plain`` takes the rest. Unset: plain
    styles: dict[AnswerStyle, float] | None = None
    #: provider's model identifier, e.g. "gpt-4.1-mini"
    model: str | None = None
    base_url: str | None = None
    #: name of the environment variable holding the API key (never the key itself)
    api_key_env: str | None = None
    #: name of a Prefect Secret block holding the key, used when the variable is unset
    api_key_block: str | None = Field(default=None, pattern=r"^[a-z0-9-]+$")
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    #: seconds over which the provider counts its per-minute limits; no more than a
    #: window's share of the limits is ever sent within one window
    rate_window_s: float = Field(default=1.0, gt=0, le=60)
    #: what the provider counts against tokens_per_minute: the prompt plus ``max_tokens``
    #: at admission ("requested", OpenAI) or the tokens used ("used", Anthropic, vLLM);
    #: default by provider
    tpm_counts: Literal["requested", "used"] | None = None
    #: ``local``: a saved sequence-model checkpoint per family (a checkpoint folder or a
    #: hub name), key "*" for every family; it answers rollout steps only
    checkpoints: dict[str, str] | None = None
    #: ``local``: the most rollout steps decoded in one batched generate call
    decode_batch: int = Field(default=32, ge=1, le=4096)
    #: the most calls in flight; lowered on 429s and raised again when they stop. A local
    #: model batches the calls in flight, so it wants max_concurrency = decode_batch: when
    #: unset it is raised to decode_batch (at most 256)
    max_concurrency: int = Field(default=4, ge=1, le=256)
    timeout_s: float = Field(default=600.0, gt=0)
    #: retries after the first try, all through the rate limiter (the SDKs' are off)
    max_retries: int = Field(default=6, ge=0, le=20)
    #: the first backoff is drawn from [0, backoff_base_s]; the ceiling doubles per retry
    backoff_base_s: float = Field(default=1.0, ge=0, le=600)
    backoff_max_s: float = Field(default=60.0, ge=0, le=3600)
    #: a Retry-After hint longer than this ends the attempt (retried by the next run)
    retry_after_cap_s: float = Field(default=120.0, ge=0, le=86400)
    #: consecutive 401/403/404 answers after which the model is stopped
    stop_after_errors: int = Field(default=3, ge=1, le=100)
    #: USD per million tokens; unset means the shipped price table (models/prices.py)
    input_cost_per_mtok: float | None = Field(default=None, ge=0)
    output_cost_per_mtok: float | None = Field(default=None, ge=0)
    #: send the attempts through the provider's batch API (about half price, hours)
    batch: bool = False
    #: seconds between polls of a submitted batch
    batch_poll_s: float = Field(default=30.0, gt=0, le=3600)
    #: the most USD this model's calls may cost the run folder in all, reruns included
    #: (beside the total ``evaluation.budget_usd``); unset: the total alone caps it
    budget_usd: float | None = Field(default=None, ge=0)
    #: the model's context window in tokens: a harness prompt that would not fit with
    #: max_tokens to spare is recorded as budget_exceeded instead of being sent
    context_tokens: int | None = Field(default=None, ge=1)
    settings: GenerationSettings | None = None

    def price(self) -> Price:
        return price_for(self.provider, self.model, self.input_cost_per_mtok, self.output_cost_per_mtok)

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        """What a call cost at this model's price (config override or shipped table)."""
        return self.price().cost(input_tokens, output_tokens)

    def counts_requested_tokens(self) -> bool:
        if self.tpm_counts is not None:
            return self.tpm_counts == "requested"
        return self.provider == "openai"

    def truth(self) -> PlantedTruth | None:
        """The planted truth of a simulated offline model (``noisy``: a constant error,
        ``rising``: a rising one; both scaled by the share of usable answer styles), or
        None for any other model. The calibration suite compares analyses with it."""
        if self.provider != "offline" or self.kind not in ("noisy", "rising") or self.eps is None:
            return None
        usable = usable_share(self.styles)
        if self.kind == "noisy":
            return PlantedTruth(eps=float(self.eps), usable=usable)
        return PlantedTruth(
            eps=float(self.eps),
            shape=self.rise or "linear",
            rate=float(self.rate or 0.0),
            cap=float(self.eps_cap if self.eps_cap is not None else DEFAULT_CAP),
            usable=usable,
        )

    @model_validator(mode="before")
    @classmethod
    def _local_concurrency(cls, data: Any) -> Any:
        """A local model batches the steps in flight: unless max_concurrency is given,
        let decode_batch of them be in flight (the default 4 would cap every batch at 4)."""
        if isinstance(data, dict) and data.get("provider") == "local" and "max_concurrency" not in data:
            batch = data.get("decode_batch", 32)
            if isinstance(batch, int) and not isinstance(batch, bool) and batch >= 1:
                data = {**data, "max_concurrency": min(batch, 256)}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.checkpoints is not None and self.provider != "local":
            raise ValueError(f"checkpoints: only local models load them (provider is {self.provider!r})")
        if self.kind != "rising":
            for name in ("rise", "rate", "eps_cap"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name}: only the 'rising' kind uses it (kind is {self.kind!r})")
        if self.styles is not None:
            if self.provider != "offline":
                raise ValueError("styles: only offline models write styled answers")
            complete_mix(self.styles)  # the shares: one line naming the style
        if self.provider == "offline":
            if self.kind is None:
                raise ValueError("offline models need 'kind' (oracle, noisy, random or rising)")
            if self.kind == "noisy" and self.eps is None:
                raise ValueError("the noisy baseline needs 'eps'")
            if self.kind == "rising":
                for name in ("eps", "rise", "rate"):
                    if getattr(self, name) is None:
                        raise ValueError(f"{name}: the rising model needs it")
                cap = self.eps_cap if self.eps_cap is not None else DEFAULT_CAP
                if self.eps is not None and cap < self.eps:
                    raise ValueError(f"eps_cap: {cap} is below eps ({self.eps}); the error only rises")
        elif self.provider == "local":
            if not self.checkpoints:
                raise ValueError("provider 'local' needs 'checkpoints' (family -> checkpoint, '*' for all)")
            for name in ("kind", "model", "base_url", "api_key_env", "api_key_block"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name}: a local model does not use it (it loads 'checkpoints')")
        else:
            if not self.model:
                raise ValueError(f"provider {self.provider!r} needs 'model'")
            if self.provider == "openai_compatible" and not self.base_url:
                raise ValueError("provider 'openai_compatible' needs 'base_url'")
        if self.batch and self.provider not in ("openai", "anthropic"):
            raise ValueError(f"batch: provider {self.provider!r} has no batch API (openai and anthropic do)")
        return self


class EvaluationSpec(_Strict):
    #: independent samples (runs) per instance and model; Pass@1 averages over them
    samples: int = Field(default=1, ge=1, le=100)
    settings: GenerationSettings = GenerationSettings()
    models: list[ModelSpec] = Field(default_factory=list)
    #: where the attempt store lives; default <out>/attempts/store.sqlite
    store: str | None = None
    #: which stored answers a run may reuse: "run" (those this run folder made: resume),
    #: "store" (any answer in the store with the same key, across runs: only for pinned
    #: model snapshots), "never" (always call)
    reuse: Literal["run", "store", "never"] = "run"
    #: the most USD the run folder pays for model calls in all, reruns included (the
    #: attempt store keeps what was paid): no call is sent that could take it past the
    #: cap (estimates of calls in flight count); what was answered is kept. A rerun past
    #: it sends nothing; raise it here or with ``run --budget-usd``
    budget_usd: float | None = Field(default=None, ge=0)
    #: on Ctrl-C or SIGTERM, wait this long for calls in flight so their answers are kept
    interrupt_grace_s: float = Field(default=10.0, ge=0, le=600)

    @model_validator(mode="after")
    def _unique_names(self) -> EvaluationSpec:
        dupes = _repeated([m.name for m in self.models])
        if dupes:
            raise ValueError(f"model names must be unique; repeated: {', '.join(dupes)}")
        return self


class DaskSpec(_Strict):
    """Where generation runs: a LocalCluster by default, or an existing scheduler."""

    address: str | None = None
    n_workers: int = Field(default=2, ge=1, le=512)
    threads_per_worker: int = Field(default=1, ge=1, le=64)
    #: worker processes (the default: generation is pure Python, so threads would share
    #: one GIL); threads are for debugging and for families registered at run time
    processes: bool = True


class GenerationSpec(_Strict):
    """Where finished generation shards are kept for reruns (``tasks.generate.shard_cache``)."""

    #: a shard cache shared by a series of runs (a nightly series: each night reuses the
    #: instances of the night before when nothing changed); default ``<out>/cache/shards``
    cache_dir: str | None = Field(default=None, min_length=1)
    #: the cache's bound in GB, least recently used keys pruned first; 0 keeps shards
    #: only while a generation runs (enough to resume one after a crash)
    cache_max_gb: float = Field(default=4.0, ge=0, le=100_000)


class AnalysisSpec(_Strict):
    bootstrap: int = Field(default=200, ge=0, le=100_000)
    #: width of the L-bins the per-length tables and the two WLS fits use (the paper: 1)
    bin_width: int = Field(default=1, ge=1, le=1000)
    #: bins with fewer attempts than this are left out of the WLS fits
    min_attempts_per_bin: int = Field(default=1, ge=1)


class WorldAgentSpec(_Strict):
    """An agent of a world study: an offline ``oracle`` (perfect memory), ``bounded``
    (working memory of ``capacity`` entities), ``decaying`` (its memory scrambles at a
    per-step hazard growing with sc beyond ``capacity``, ``rate`` per extra entity, and
    its actions fail ``lead`` steps later: a planted tau_W - tau_A lag; see
    datasets/worlds/agents.py), ``unusable`` (the real harness over an offline model
    whose answers are unusable at ``rate`` per step and role; harness/offline.py), or a
    ``model``: an entry of ``evaluation.models`` playing through the three-call harness
    (harness/agent.py) with the given ``memory`` mode."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:@/+-]+$")
    kind: Literal["oracle", "bounded", "decaying", "unusable", "model"]
    capacity: int | None = Field(default=None, ge=1, le=10_000)
    #: kind decaying: the per-step chance that one entity beyond capacity scrambles its
    #: memory; kind unusable: the chance that a call's answers are all unusable
    rate: float | None = Field(default=None, ge=0, le=1)
    #: kind decaying: steps from the scrambled memory to the first wrong action
    lead: int | None = Field(default=None, ge=0, le=10_000)
    #: kind model: the ``name`` of an ``evaluation.models`` entry
    model: str | None = None
    #: kind model: what the Planner remembers between steps
    memory: Literal["structured", "summary", "transcript"] | None = None

    @model_validator(mode="after")
    def _capacity(self) -> WorldAgentSpec:
        if self.kind in ("bounded", "decaying") and self.capacity is None:
            raise ValueError(f"the {self.kind} agent needs 'capacity'")
        # the messages name the field, so the error's dotted path ends at it
        if self.kind not in ("bounded", "decaying") and self.capacity is not None:
            raise ValueError(
                f"capacity: the {self.kind} agent takes no 'capacity' (bounded and decaying agents do)"
            )
        if self.kind in ("decaying", "unusable") and self.rate is None:
            raise ValueError(f"the {self.kind} agent needs 'rate'")
        if self.kind not in ("decaying", "unusable") and self.rate is not None:
            raise ValueError(f"rate: the {self.kind} agent takes no 'rate' (decaying and unusable agents do)")
        if self.kind == "decaying" and self.lead is None:
            raise ValueError("the decaying agent needs 'lead'")
        if self.kind != "decaying" and self.lead is not None:
            raise ValueError(f"lead: the {self.kind} agent takes no 'lead' (decaying agents do)")
        if self.kind == "model" and self.model is None:
            raise ValueError("model: a model agent names an evaluation.models entry")
        if self.kind != "model" and (self.model is not None or self.memory is not None):
            which = "model" if self.model is not None else "memory"
            raise ValueError(f"{which}: the {self.kind} agent is offline: it takes no 'model' or 'memory'")
        return self

    @property
    def memory_mode(self) -> str:
        return self.memory or "structured"


class HarnessSpec(_Strict):
    """Limits of the agent harness (the paper's Appendix F, per episode) and the repair
    rule for malformed answers."""

    #: output tokens one episode may spend, repairs included (the paper: 80k)
    episode_output_tokens: int = Field(default=80_000, ge=1)
    #: seconds of model calls one episode may spend (the paper: 30 minutes)
    episode_wall_s: float = Field(default=1800.0, gt=0)
    #: repair requests per malformed answer before the deterministic fallback (the paper: 3)
    repairs: int = Field(default=3, ge=0, le=10)
    #: the longest rolling summary, in words (summary memory mode)
    summary_words: int = Field(default=150, ge=10, le=5000)
    #: characters per token for the prompt-size and output-size checks
    chars_per_token: float = Field(default=4.0, gt=0, le=20)
    #: consecutive steps whose Planner fell back (no usable action after the repairs)
    #: that end an episode as ``format_failure``
    fallback_streak: int = Field(default=3, ge=1, le=1000)


_AXES = ("horizon", "branching", "observation", "mutation")
#: a valid sc for checking an ablation level alone (the grid's cells are checked apart)
SC_PROBE = 10
#: the factor of ``horizon: relative`` given without ``horizon_factor``
DEFAULT_HORIZON_FACTOR = 1.5


def horizon_setting(value: Any, factor: Any) -> None:
    """``worlds.horizon`` checked before its type is: ``paper`` or ``relative``, and
    ``paper`` without a factor (it would silently do nothing); ValueError in one line
    naming the field otherwise."""
    if value not in ("paper", "relative"):
        raise ValueError(
            "horizon: give paper (the regime's fixed T of Table 11) or relative "
            f"(T = ceil(horizon_factor x L*) per world); got {value!r}"
        )
    if value == "paper" and factor is not None:
        raise ValueError(
            "horizon: paper uses the regime's fixed T; drop horizon_factor or set horizon: relative"
        )


class G1bPair(_Strict):
    """The G1b trigger pair locked before data collection (the paper's Appendix H):
    cells (sc_from, dd) and (sc_to, dd) of every agent's grid. Unset, G1b tests each
    agent's largest adjacent drop, a pair picked from the data."""

    sc_from: int = Field(ge=0)
    sc_to: int = Field(ge=0)
    dd: int = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> G1bPair:
        if self.sc_from >= self.sc_to:
            raise ValueError(f"g1b_pair: sc_from ({self.sc_from}) must be below sc_to ({self.sc_to})")
        return self


class ScScanSpec(_Strict):
    """An adaptive scan of sc for the critical point sc* (``analysis/sc_scan.py``): both
    ends of [min, max] first, then the midpoint of the bracket, until the cells that
    bracket the crossing are ``target_width`` apart, for every (environment, dd, agent)."""

    min: int = Field(ge=1)
    max: int = Field(ge=2)
    target_width: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> ScScanSpec:
        if self.max <= self.min:
            raise ValueError(f"max ({self.max}) must be greater than min ({self.min})")
        return self


class WorldsSpec(_Strict):
    """A world-model study: environments x (sc, dd) grid x archetypes x variants on a
    regime backdrop of Table 11, run by offline agents on the Dask cluster."""

    #: the names of datasets/worlds/study.ENVIRONMENTS, in its order (a test keeps them equal;
    #: schemas sit below datasets, so the registry is not imported here)
    environments: list[Literal["stateful_puzzle", "graph_nav", "tool_dag"]] = Field(min_length=1)
    regime: Literal["I", "II", "III", "IV", "V"] = "III"
    #: the grid; required where the regime leaves sc / dd free (III), else its value
    sc: list[int] | None = None
    dd: list[int] | None = None
    #: instead of ``sc``: the cells chosen in waves that bracket each agent's sc*
    sc_scan: ScScanSpec | None = None
    #: one-axis changes from the regime (an ablation): horizon, branching, observation,
    #: mutation
    axes: dict[str, Any] = Field(default_factory=dict)
    #: paired one-axis ablations around the backdrop (Table 4): axis (horizon or T,
    #: branching, observation, mutation) -> levels; every level plays the backdrop's worlds
    ablations: dict[str, list[Any]] = Field(default_factory=dict)
    #: the horizon T: ``paper`` (the regime's fixed T of Table 11) or ``relative``
    #: (T = ceil(horizon_factor x L*) per world). Unset: ``relative`` when horizon_factor
    #: is given, else ``paper``
    horizon: Literal["paper", "relative"] | None = None
    #: T = ceil(factor x L*) for every episode instead of the regime's fixed T
    #: (``horizon: relative``; 1.5 when that is given without a factor)
    horizon_factor: float | None = Field(default=None, gt=0, le=1000)
    archetypes: int = Field(default=10, ge=1, le=10)
    variants: int = Field(default=10, ge=1, le=100_000)
    #: episodes per Dask task (fixed, so output never depends on worker count)
    shard_size: int = Field(default=25, ge=1, le=100_000)
    agents: list[WorldAgentSpec] = Field(min_length=1)
    harness: HarnessSpec = HarnessSpec()
    #: the null margin of the one-sided Miettinen-Nurminen cliff test
    delta0: float = Field(default=0.30, ge=0, lt=1)
    #: G1b's trigger pair locked before data collection; unset, the largest drop
    g1b_pair: G1bPair | None = None

    @model_validator(mode="before")
    @classmethod
    def _horizon(cls, data: Any) -> Any:
        """``horizon`` checked first, in one line naming both settings (a Literal
        error would not say what each means); ``relative`` alone gets its factor."""
        if isinstance(data, dict) and data.get("horizon") is not None:
            data = dict(data)
            horizon_setting(data["horizon"], data.get("horizon_factor"))
            if data["horizon"] == "relative" and data.get("horizon_factor") is None:
                data["horizon_factor"] = DEFAULT_HORIZON_FACTOR
        return data

    @property
    def horizon_mode(self) -> str:
        """``paper`` or ``relative``, whether given as ``horizon`` or by a factor alone."""
        return "relative" if self.horizon_factor is not None else "paper"

    def horizon_label(self) -> str:
        """How T was set, for every world table and figure (``paper T=40``,
        ``relative T=ceil(1.5 L*)``; ``axes.horizon`` gives ``fixed T=80``)."""
        from horizonbench.schemas.worlds import REGIMES

        if self.horizon_mode == "relative":
            return f"relative T=ceil({self.horizon_factor:g} L*)"
        if "horizon" in self.axes:
            return f"fixed T={self.axes['horizon']}"
        return f"paper T={REGIMES[self.regime].horizon}"

    @model_validator(mode="after")
    def _consistent(self) -> WorldsSpec:
        from horizonbench.schemas.worlds import REGIMES, StressSpec

        for what, values in (("environments", self.environments), ("agents", [a.name for a in self.agents])):
            dupes = _repeated(values)
            if dupes:
                raise ValueError(f"{what}: each at most once; repeated: {', '.join(dupes)}")
        regime = REGIMES[self.regime]
        if self.sc_scan is not None:
            if (
                self.sc is not None
                and not self.sc_scan.min <= min(self.sc) <= max(self.sc) <= self.sc_scan.max
            ):
                raise ValueError(
                    "sc_scan: sc lies outside [min, max]; leave sc out (the scan chooses the cells)"
                )
            if regime.sc is not None:
                raise ValueError(
                    f"sc_scan: regime {self.regime} fixes sc={regime.sc}; there is nothing to scan"
                )
            if self.g1b_pair is not None:
                raise ValueError("sc_scan: g1b_pair names cells the scan may never test; give one")
        for key in ("sc", "dd"):
            values = getattr(self, key)
            fixed = getattr(regime, key)
            if values is None and key == "sc" and self.sc_scan is not None:
                continue
            if values is None:
                if fixed is None:
                    raise ValueError(f"{key}: regime {self.regime} leaves {key} to the grid; list its values")
                continue
            if not values or len(set(values)) != len(values):
                raise ValueError(f"{key}: give distinct values")
            if fixed is not None and values != [fixed]:
                raise ValueError(f"{key}: regime {self.regime} fixes {key}={fixed}; leave {key} out")
        unknown = sorted(set(self.axes) - set(_AXES))
        if unknown:
            raise ValueError(f"axes: {unknown[0]!r} is not an axis to override (known: {', '.join(_AXES)})")
        if "horizon" in self.axes and self.horizon_factor is not None:
            raise ValueError("axes.horizon and horizon_factor both set the horizon; give one")
        if "horizon" in self.axes and self.horizon is not None:
            raise ValueError("axes.horizon and horizon both set the horizon; give one")
        self._check_ablations(regime)
        if self.g1b_pair is not None:
            grid = {"sc": self.sc or [regime.sc], "dd": self.dd or [regime.dd]}
            pair = self.g1b_pair
            checks = (("sc_from", "sc", pair.sc_from), ("sc_to", "sc", pair.sc_to), ("dd", "dd", pair.dd))
            for field, axis, value in checks:
                if value not in grid[axis]:
                    raise ValueError(f"g1b_pair.{field}: {value} is not in the grid's {axis} {grid[axis]}")
        scan = [self.sc_scan.min, self.sc_scan.max] if self.sc_scan is not None and self.sc is None else None
        for sc in scan or self.sc or [regime.sc]:
            for dd in self.dd or [regime.dd]:
                values = {
                    "sc": sc,
                    "dd": dd,
                    "horizon": regime.horizon,
                    "branching": regime.branching,
                    "observation": regime.observation,
                    "mutation": regime.mutation,
                    **self.axes,
                }
                StressSpec.from_mapping(values)  # ValueError naming the axis
        return self

    @model_validator(mode="before")
    @classmethod
    def _ablation_keys(cls, data: Any) -> Any:
        """``T`` is accepted for ``horizon`` in ``ablations`` (as in a stress spec)."""
        if isinstance(data, dict) and isinstance(data.get("ablations"), dict) and "T" in data["ablations"]:
            ablations = dict(data["ablations"])
            if "horizon" in ablations:
                raise ValueError("ablations: horizon given twice (as T and as horizon)")
            ablations["horizon"] = ablations.pop("T")
            data = {**data, "ablations": ablations}
        return data

    def _check_ablations(self, regime: Any) -> None:
        """Each ablated axis known, its levels distinct and valid on every cell; the
        horizon is ablated only where T is fixed (not relative)."""
        from horizonbench.schemas.worlds import StressSpec

        unknown = sorted(set(self.ablations) - set(_AXES))
        if unknown:
            raise ValueError(f"ablations: {unknown[0]!r} is not an axis (known: {', '.join(_AXES)})")
        for axis, levels in self.ablations.items():
            if not levels:
                raise ValueError(f"ablations.{axis}: list at least one level")
            if len({repr(v) for v in levels}) != len(levels):
                raise ValueError(f"ablations.{axis}: levels must be distinct, got {levels}")
            if axis == "horizon" and self.horizon_factor is not None:
                raise ValueError("ablations.horizon: T is ablated around a fixed T, not a relative one")
            for level in levels:
                values = {"horizon": regime.horizon, "branching": regime.branching}
                values |= {"observation": regime.observation, "mutation": regime.mutation, **self.axes}
                try:
                    StressSpec.from_mapping({"sc": SC_PROBE, "dd": 1, **values, axis: level})
                except ValueError as err:
                    raise ValueError(f"ablations.{axis}: {err}") from None

    def study(self) -> Any:
        """The :class:`~horizonbench.schemas.worlds.Study` this section asks for."""
        from horizonbench.schemas.worlds import REGIMES, Study

        regime = REGIMES[self.regime]
        return Study(
            environments=tuple(self.environments),
            regime=self.regime,
            sc=tuple(self.sc or [regime.sc]),
            dd=tuple(self.dd or [regime.dd]),
            archetypes=self.archetypes,
            variants=self.variants,
            axes=dict(self.axes),
            horizon_factor=self.horizon_factor,
            ablations={axis: tuple(levels) for axis, levels in self.ablations.items()},
        )


NIGHTLY = "nightly"


def nightly_seed(day: dt.date) -> int:
    """The seed of ``run.seed: nightly`` on ``day``: a hash of the date, so every night
    draws instances no model has seen, and rerunning the same night draws the same."""
    digest = hashlib.sha256(f"horizonbench-nightly:{day.isoformat()}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def today_utc() -> dt.date:
    """The date ``{date}`` in an out folder and ``run.seed: nightly`` both use."""
    return dt.datetime.now(dt.UTC).date()


class RunSpec(_Strict):
    name: str = Field(default="run", min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")
    #: an integer, or ``nightly``: the seed derived from the run's UTC date
    #: (:func:`nightly_seed`); the config as recorded then holds the integer and
    #: ``seed_from`` the date it came from
    seed: int = Field(default=0, ge=0, lt=2**63)
    seed_from: str | None = Field(default=None, pattern=r"^nightly:\d{4}-\d{2}-\d{2}$")

    @model_validator(mode="before")
    @classmethod
    def _nightly(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("seed") == NIGHTLY:
            day = today_utc()
            return {**data, "seed": nightly_seed(day), "seed_from": f"{NIGHTLY}:{day.isoformat()}"}
        return data

    @model_validator(mode="after")
    def _seed_from(self) -> RunSpec:
        if self.seed_from is not None:
            day = dt.date.fromisoformat(self.seed_from.split(":", 1)[1])
            if self.seed != nightly_seed(day):
                raise ValueError(f"seed: {self.seed} is not the nightly seed of {day} (seed_from)")
        return self


class ExportSpec(_Strict):
    """``horizonbench export``'s split of the puzzle step tables (``--split`` overrides):
    ``per_n``, 80/20 within each n = 1..7 (the paper's text); ``pooled``, one 80/20
    split over n = 1..7 with ceil(0.2 * total) validation puzzles (what the paper's
    validation percentages imply: 9 Hanoi, 110 Blocks World, 540 Checkers)."""

    split: Literal["per_n", "pooled"] = "per_n"
    #: the largest n split into train and validation; larger sizes are out of
    #: distribution (the paper's 7: train on 1..7, OOD 8..10; a tiny study uses less)
    in_distribution_max: int = Field(default=7, ge=1, le=1000)


class Config(_Strict):
    run: RunSpec = RunSpec()
    families: dict[str, FamilySpec] = Field(default_factory=dict)
    #: a world-model study (environments, grid, offline agents)
    worlds: WorldsSpec | None = None
    evaluation: EvaluationSpec = EvaluationSpec()
    generation: GenerationSpec = GenerationSpec()
    dask: DaskSpec = DaskSpec()
    analysis: AnalysisSpec = AnalysisSpec()
    export: ExportSpec = ExportSpec()
    #: RecurrReason's sequence models: trained on the export, evaluated by rollout
    training: TrainingSpec | None = None

    @model_validator(mode="after")
    def _adaptive_mazes(self) -> Config:
        """Waves pin L0 over bins of logical depth: the maze's. A puzzle bins by its size
        n, whose depth (the optimal plan's length) is known only once generated, and a
        training study trains on every instance before any wave could choose."""
        for label, spec in self.families.items():
            if spec.sampling.adaptive is None:
                continue
            if label.partition("@")[0] != "maze":
                raise ValueError(
                    f"families.{label}.sampling.adaptive: only the maze samples in waves "
                    "(a puzzle bins by its size n, not by depth)"
                )
            if self.training is not None:
                raise ValueError(f"families.{label}.sampling.adaptive: a training study samples every bin")
        return self

    @model_validator(mode="after")
    def _trainable(self) -> Config:
        """Every puzzle a training section names is a puzzle family of this config that
        is evaluated by rollout (a sequence model writes next states, not plans)."""
        if self.training is None:
            return self
        puzzles = self.training.puzzles or training_puzzles(self)
        if not puzzles:
            raise ValueError("training: the config has no puzzle family to train on")
        for name in puzzles:
            if name not in self.families:
                raise ValueError(f"training.puzzles: {name!r} is not a family of this config")
            if "rollout" not in self.families[name].modes:
                raise ValueError(
                    f"families.{name}.modes: a trained model is evaluated by rollout; add 'rollout'"
                )
        for name, arch in self.training.architectures.items():
            source = (arch.pretrained or "").removeprefix("run:")
            if arch.pretrained and arch.pretrained.startswith("run:") and source not in puzzles:
                raise ValueError(
                    f"training.architectures.{name}.pretrained: {arch.pretrained!r} names no puzzle "
                    f"this run trains on ({', '.join(puzzles)})"
                )
        return self

    @model_validator(mode="after")
    def _local_rollouts(self) -> Config:
        """A local sequence model writes next states, not plans: it may only meet families
        evaluated by rollout alone, and each such family needs a checkpoint."""
        for i, spec in enumerate(self.evaluation.models):
            if spec.provider != "local":
                continue
            checkpoints = spec.checkpoints or {}
            for name, family in self.families.items():
                if family.modes != ["rollout"]:
                    raise ValueError(
                        f"evaluation.models.{i}: the local model {spec.name!r} answers rollout steps only, "
                        f"but families.{name}.modes is {family.modes}; use modes: [rollout]"
                    )
                base = name.split(SETTING_SEPARATOR)[0]
                if not {name, base, "*"} & set(checkpoints):
                    raise ValueError(
                        f"evaluation.models.{i}.checkpoints: the local model {spec.name!r} has no checkpoint "
                        f"for family {name!r} (give one, or '*')"
                    )
            for j, agent in enumerate(self.worlds.agents if self.worlds is not None else ()):
                if agent.kind == "model" and agent.model == spec.name:
                    raise ValueError(
                        f"worlds.agents.{j}.model: {spec.name!r} is a local sequence model; it answers "
                        "puzzle rollout steps, not harness prompts"
                    )
        return self

    @model_validator(mode="after")
    def _some_family(self) -> Config:
        if not self.families and self.worlds is None:
            raise ValueError("give at least one family, or a 'worlds' study")
        if self.worlds is not None:
            models = {m.name: m for m in self.evaluation.models}
            for i, agent in enumerate(self.worlds.agents):
                if agent.kind != "model":
                    continue
                where = f"worlds.agents.{i}.model"
                spec = models.get(agent.model or "")
                if spec is None:
                    known = ", ".join(models) or "none configured"
                    raise ValueError(f"{where}: no evaluation.models entry named {agent.model!r} ({known})")
                if spec.provider == "offline":
                    raise ValueError(
                        f"{where}: {agent.model!r} is an offline baseline; offline world agents are "
                        "kind oracle or bounded"
                    )
                if spec.batch:
                    raise ValueError(
                        f"{where}: {agent.model!r} uses the batch API; harness steps must run live"
                    )
        return self


def _shown(value: Any) -> str:
    kind = type(value).__name__
    text = repr(value)
    return f"{text[:40]}{'...' if len(text) > 40 else ''}, a {kind}" if kind != "NoneType" else "null"


def _format_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"].endswith("_type") and "input" in first:
        # strict types: say what was given, since YAML's spelling hides it (yes, "5")
        msg += f" (got {_shown(first['input'])})"
    # a section's own check names the field first ("sc: must be in 3..60"): put it in the path
    field = re.match(r"([a-z_][a-z0-9_.]*): (.*)", msg, re.S)
    if field and first["type"] == "value_error":
        loc, path = [str(p) for p in first["loc"]], field.group(1).split(".")
        if loc and path[0] == loc[-1]:  # a field's own validator names itself: said once
            path = path[1:]
        where, msg = ".".join(loc + path), field.group(2)
    more = len(err.errors()) - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{where}: {msg}{tail}"


def expand_sweeps(cfg: Config, source: str = "config") -> Config:
    """Each setting of a family's ``sweep`` becomes a family entry of its own, labelled
    ``<family>@<setting>``, with the base's params and prompt updated by the setting's.

    Everything downstream (generation, evaluation, scoring, validation, analysis) then
    treats a setting as one more family label: its own instance table, attempts in the
    shared store, and its own rows in every analysis table. The base keeps the plain
    family name. Candidate seeds come from the family, not the label, so settings that
    change only the text (noise, shuffle, prompt) are drawn from the same mazes and
    compare pairwise. An expanded config expands to itself (the manifest records it).
    """
    if not any(spec.sweep for spec in cfg.families.values()):
        return cfg
    families: dict[str, FamilySpec] = {}
    for name, spec in cfg.families.items():
        if SETTING_SEPARATOR in name and spec.sweep:
            raise ConfigError(f"{source}: families.{name}.sweep: a setting cannot have a sweep of its own")
        families[name] = spec.model_copy(update={"sweep": []})
        for setting in spec.sweep:
            label = f"{name}{SETTING_SEPARATOR}{setting.name}"
            if label in cfg.families:
                raise ConfigError(f"{source}: families.{name}.sweep: {label!r} is also a family entry")
            families[label] = FamilySpec(
                params={**spec.params, **setting.params},
                prompt={**spec.prompt, **setting.prompt},
                sampling=setting.sampling or spec.sampling,
                modes=list(spec.modes),
            )
    return cfg.model_copy(update={"families": families})


def parse_config(data: Any, source: str = "config") -> Config:
    """Validate raw data, including each family's own params and prompt sections, with
    sweeps expanded into one family label per setting (:func:`expand_sweeps`)."""
    from horizonbench.core.registry import family_modes, get_family

    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping")
    families = data.get("families")
    for fam_name in families if isinstance(families, dict) else ():
        try:  # first: an unknown family's missing sections are not the problem
            get_family(str(fam_name))
        except KeyError as err:
            raise ConfigError(f"{source}: families.{fam_name}: {err.args[0]}") from None
    try:
        cfg = Config.model_validate(data, strict=True)
    except ValidationError as err:
        raise ConfigError(f"{source}: {_format_error(err)}") from None
    cfg = expand_sweeps(cfg, source)
    for fam_name, spec in cfg.families.items():
        try:
            family = get_family(fam_name)
        except KeyError as err:
            raise ConfigError(f"{source}: families.{fam_name}: {err.args[0]}") from None
        supported = family_modes(family)
        for mode in spec.modes:
            if mode not in supported:
                known = ", ".join(supported)
                where = f"{source}: families.{fam_name}.modes"
                raise ConfigError(f"{where}: {fam_name} supports {known}, not {mode!r}")
        for section, model in (("params", family.params_model), ("prompt", family.prompt_model)):
            try:
                model.model_validate(getattr(spec, section), strict=True)
            except ValidationError as err:
                raise ConfigError(f"{source}: families.{fam_name}.{section}.{_format_error(err)}") from None
    return cfg


def check_requests(cfg: Config, source: str = "config") -> None:
    """Refuse what no run of this config can deliver, where a family can compute it
    (a maze family's unreachable L bins or key count): a ConfigError naming the field,
    before anything is written. Families without the hook (``request_problems``) are
    left to the run, whose short bins end it with exit code 4."""
    from horizonbench.core.registry import get_family

    for label, spec in cfg.families.items():
        family = get_family(label)
        check = getattr(family, "request_problems", None)
        if check is None:
            continue
        problems = check(family.params_model.model_validate(spec.params), spec.sampling)
        if problems:
            more = f" (and {len(problems) - 1} more problem)" if len(problems) > 1 else ""
            raise ConfigError(f"{source}: families.{label}.{problems[0]}{more}")


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML or JSON config file; raise ConfigError naming the problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such config file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{p}: cannot read config ({err})") from None
    try:
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ConfigError(f"{p}: {syntax_error(err)}") from None
    return parse_config(data, source=str(p))


def syntax_error(err: json.JSONDecodeError | yaml.YAMLError) -> str:
    """A parser's error as one line: ``not valid YAML at line 5, column 13: problem``
    (1-based, as editors count). PyYAML's own text is eight lines: the source shown
    twice, with carets, under ``<unicode string>``."""
    if isinstance(err, json.JSONDecodeError):
        return f"not valid JSON at line {err.lineno}, column {err.colno}: {err.msg}"
    mark = getattr(err, "problem_mark", None)
    problem = " ".join(str(getattr(err, "problem", None) or err).split())
    context = getattr(err, "context", None)
    context_mark = getattr(err, "context_mark", None)
    if context and context_mark is not None:
        problem += f" ({context} at line {context_mark.line + 1}, column {context_mark.column + 1})"
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"not valid YAML{where}: {problem}"


#: the families a training section trains on when it names none: the puzzle families
PUZZLE_FAMILIES = ("hanoi", "checkers", "river_crossing", "blocks_world")


def training_puzzles(cfg: Config) -> list[str]:
    """The puzzles ``cfg.training`` trains on, in config order."""
    if cfg.training is not None and cfg.training.puzzles:
        return list(cfg.training.puzzles)
    return [name for name in cfg.families if name in PUZZLE_FAMILIES]
