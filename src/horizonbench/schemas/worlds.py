"""The configuration vocabulary of a world-model study: the six stress axes of a world
(:class:`StressSpec`), the five regimes of Table 11 (:data:`REGIMES`), episode seeds
(:func:`episode_seed`) and the episodes a study asks for (:class:`Study`,
:class:`EpisodeSpec`).

Pure data and validation, below the environments: the config models
(:mod:`horizonbench.schemas.config`) check a ``worlds`` section with these, and the
environments (:mod:`horizonbench.datasets.worlds`) take a :class:`StressSpec`; the
environments' own modules re-export every name here, so either import works.

- ``sc``: state cardinality, the number of jointly tracked entities;
- ``dd``: dependency density, preconditions per subgoal;
- ``horizon``: T, the number of steps an episode may take;
- ``branching``: the branching factor (each environment documents how it adds actions);
- ``observation``: one of :data:`OBSERVATION_MODES` (clean, partial, distractor, conflict);
- ``mutation``: one of :data:`MUTATION_LEVELS`, with the per-step chance
  :data:`MUTATION_RATES` that the world changes once without the agent's doing.

Seeds: :func:`episode_seed` derives an episode's seed from the root seed, the grid cell,
the archetype (layout family, 0..9) and the variant (instance, 0..9), through
:func:`horizonbench.core.seeding.derive_seed` (sha256), so seeds never depend on worker
identity or on Python's hash randomisation, and a grid's seeds can be published.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from horizonbench.core.seeding import derive_seed

#: supported state cardinalities (every integer in between is a distinct world size)
SC_MIN, SC_MAX = 3, 60
#: supported dependency densities
DD_MIN, DD_MAX = 1, 12
#: the largest horizon and branching a spec accepts (far above the paper's 80 and 16)
HORIZON_MAX = 100_000
BRANCHING_MAX = 64
#: layout families and instances per family (the paper: 10 archetypes x 10 variants)
N_ARCHETYPES = 10
N_VARIANTS = 10

OBSERVATION_MODES: tuple[str, ...] = ("clean", "partial", "distractor", "conflict")
MUTATION_LEVELS: tuple[str, ...] = ("static", "low", "medium", "high")
#: probability, per step, that the world changes once without the agent's doing
MUTATION_RATES: Mapping[str, float] = {"static": 0.0, "low": 0.05, "medium": 0.15, "high": 0.35}

# --- stress axes -----------------------------------------------------------------


def _int_in(name: str, value: object, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: must be an integer in {lo}..{hi}, got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name}: must be in {lo}..{hi}, got {value}")


@dataclass(frozen=True, slots=True)
class StressSpec:
    """One point of the stress grid. Validated on construction: a bad value raises
    ``ValueError`` whose message starts with the field's name.

    - ``sc``: state cardinality, the number of jointly tracked entities (3..60);
    - ``dd``: dependency density, preconditions per subgoal (1..12);
    - ``horizon``: T, the episode ends after this many steps (1..100000);
    - ``branching``: the branching factor (1..64); each environment documents how it
      changes the number of valid actions;
    - ``observation``: one of :data:`OBSERVATION_MODES`;
    - ``mutation``: one of :data:`MUTATION_LEVELS`.
    """

    sc: int
    dd: int
    horizon: int = 40
    branching: int = 4
    observation: str = "clean"
    mutation: str = "static"

    def __post_init__(self) -> None:
        _int_in("sc", self.sc, SC_MIN, SC_MAX)
        _int_in("dd", self.dd, DD_MIN, DD_MAX)
        _int_in("horizon", self.horizon, 1, HORIZON_MAX)
        _int_in("branching", self.branching, 1, BRANCHING_MAX)
        if self.observation not in OBSERVATION_MODES:
            modes = ", ".join(OBSERVATION_MODES)
            raise ValueError(f"observation: must be one of {modes}, got {self.observation!r}")
        if self.mutation not in MUTATION_LEVELS:
            raise ValueError(f"mutation: must be one of {', '.join(MUTATION_LEVELS)}, got {self.mutation!r}")

    def replace(self, **changes: Any) -> StressSpec:
        """A copy with some axes changed (validated): one-axis ablations from a backdrop."""
        return replace(self, **changes)

    @property
    def mutation_rate(self) -> float:
        return MUTATION_RATES[self.mutation]

    def cell(self) -> tuple[str, ...]:
        """The grid-cell coordinates that seed an episode, labelled (``sc=5``, ...)."""
        return tuple(f"{f.name}={getattr(self, f.name)}" for f in fields(self))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> StressSpec:
        """A spec from config keys (``T`` is accepted for ``horizon``); unknown keys
        raise ``ValueError`` naming them."""
        data = dict(values)
        if "T" in data:
            if "horizon" in data:
                raise ValueError("horizon: given twice (as T and as horizon)")
            data["horizon"] = data.pop("T")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{unknown[0]}: not a stress axis (known: {', '.join(sorted(known))})")
        for key in ("sc", "dd"):
            if key not in data:
                raise ValueError(f"{key}: required")
        return cls(**data)


@dataclass(frozen=True, slots=True)
class Regime:
    """A backdrop of Table 11: the axes not under study. ``sc``/``dd`` of ``None`` are
    left to the grid (Regime III)."""

    name: str
    title: str
    sc: int | None
    dd: int | None
    horizon: int
    branching: int
    observation: str
    mutation: str

    def spec(self, sc: int | None = None, dd: int | None = None) -> StressSpec:
        """The spec of this regime; ``sc``/``dd`` must be given where the regime leaves
        them free and must agree where it fixes them. Ablations change one axis
        afterwards with :meth:`StressSpec.replace`."""
        values: dict[str, int] = {}
        for key, given in (("sc", sc), ("dd", dd)):
            fixed = getattr(self, key)
            if fixed is None:
                if given is None:
                    raise ValueError(f"{key}: regime {self.name} leaves {key} to the grid; give it")
                values[key] = given
            else:
                if given is not None and given != fixed:
                    raise ValueError(f"{key}: regime {self.name} fixes {key}={fixed}, got {given}")
                values[key] = fixed
        return StressSpec(
            sc=values["sc"],
            dd=values["dd"],
            horizon=self.horizon,
            branching=self.branching,
            observation=self.observation,
            mutation=self.mutation,
        )


#: Table 11: the five world regimes (III is the confirmatory-grid backdrop)
REGIMES: Mapping[str, Regime] = {
    "I": Regime("I", "Trivial", 5, 1, 40, 4, "clean", "static"),
    "II": Regime("II", "Moderate", 10, 2, 40, 4, "clean", "static"),
    "III": Regime("III", "Coupled", None, None, 40, 4, "clean", "static"),
    "IV": Regime("IV", "Adversarial", 20, 4, 40, 4, "partial", "low"),
    "V": Regime("V", "Extreme", 40, 6, 80, 8, "conflict", "medium"),
}


def episode_seed(root: int, cell: StressSpec | Sequence[object], archetype: int, variant: int) -> int:
    """The seed of one episode: ``derive_seed(root, "world-episode", *cell,
    "archetype=<a>", "variant=<v>")``, a sha256 of the root seed and the coordinates.

    ``cell`` is a :class:`StressSpec` (its six labelled axes, :meth:`StressSpec.cell`,
    so every axis value gives its own seeds) or any sequence of coordinates the caller
    chooses (e.g. ``("sc=10", "dd=6")`` to pair the worlds of a one-axis ablation).
    The environment receives the archetype separately (it picks the layout family);
    the variant only enters through the seed."""
    _int_in("archetype", archetype, 0, 1_000_000)
    _int_in("variant", variant, 0, 1_000_000)
    parts = cell.cell() if isinstance(cell, StressSpec) else tuple(str(p) for p in cell)
    return derive_seed(root, "world-episode", *parts, f"archetype={archetype}", f"variant={variant}")


# --- the episodes of a study ------------------------------------------------------

#: the axes a regime fixes besides sc and dd: what ``axes`` and ablations change
_SECONDARY: tuple[str, ...] = ("horizon", "branching", "observation", "mutation")


@dataclass(frozen=True, slots=True)
class EpisodeSpec:
    """Which episode to run: the environment, the stress point, the seed and the
    archetype, plus labels that go into the tables unchanged."""

    env: str
    spec: StressSpec
    seed: int
    archetype: int
    variant: int
    regime: str = ""
    #: ``"<axis>=<level>"`` for an episode of a one-axis ablation (``Study.ablations``),
    #: "" for the backdrop's; it tells apart the ids of episodes that share a world
    ablation: str = ""


@dataclass(frozen=True, slots=True)
class Study:
    """The episodes a config asks for (see the module docstring)."""

    environments: tuple[str, ...]
    regime: str
    sc: tuple[int, ...]
    dd: tuple[int, ...]
    archetypes: int
    variants: int
    axes: Mapping[str, Any] = field(default_factory=dict)
    horizon_factor: float | None = None
    #: one-axis ablations around the backdrop: axis -> levels (a level equal to the
    #: backdrop's value is the backdrop itself and adds no episode)
    ablations: Mapping[str, Sequence[Any]] = field(default_factory=dict)

    def specs(self) -> list[StressSpec]:
        """The spec of every (sc, dd) cell, validated: the regime's backdrop with the
        study's one-axis changes."""
        regime = REGIMES[self.regime]
        backdrop = {
            "horizon": regime.horizon,
            "branching": regime.branching,
            "observation": regime.observation,
            "mutation": regime.mutation,
            **self.axes,
        }
        return [StressSpec(sc=sc, dd=dd, **backdrop) for sc in self.sc for dd in self.dd]

    def episodes(self, root_seed: int) -> list[EpisodeSpec]:
        """Every episode of the study, in a fixed order: the backdrop's (environment,
        cell, archetype, variant), then each ablation's (axis, level, and the same order).

        Paired ablations: a seed derives from the world's identity (environment, sc, dd,
        archetype, variant) through the *regime's* cell, never from ``axes`` or an
        ablated level, so ``branching: 8`` or ``T: 80`` meets the same worlds as the
        backdrop and only the ablated axis changes. A study without ``axes`` keeps the
        seeds it always had."""
        regime = REGIMES[self.regime]
        backdrop: list[tuple[str, StressSpec, int, int, int]] = []
        for env in self.environments:
            for spec in self.specs():
                # the regime's cell, whatever ``axes`` changes: the world's identity
                world = replace(spec, **{k: getattr(regime, k) for k in _SECONDARY})
                cell = [f"env={env}", *world.cell()]
                if self.horizon_factor is not None:
                    cell[cell.index(f"horizon={regime.horizon}")] = "horizon=relative"
                for a in range(self.archetypes):
                    for v in range(self.variants):
                        backdrop.append((env, spec, episode_seed(root_seed, cell, a, v), a, v))
        out = [EpisodeSpec(env, spec, seed, a, v, self.regime) for env, spec, seed, a, v in backdrop]
        for axis, levels in self.ablations.items():
            for level in levels:
                label = f"{axis}={level}"
                out.extend(
                    EpisodeSpec(env, spec.replace(**{axis: level}), seed, a, v, self.regime, label)
                    for env, spec, seed, a, v in backdrop
                    if getattr(spec, axis) != level
                )
        return out


__all__: Sequence[str] = [
    "BRANCHING_MAX",
    "DD_MAX",
    "DD_MIN",
    "EpisodeSpec",
    "HORIZON_MAX",
    "MUTATION_LEVELS",
    "MUTATION_RATES",
    "N_ARCHETYPES",
    "N_VARIANTS",
    "OBSERVATION_MODES",
    "REGIMES",
    "Regime",
    "SC_MAX",
    "SC_MIN",
    "StressSpec",
    "Study",
    "episode_seed",
]
