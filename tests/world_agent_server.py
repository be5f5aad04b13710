"""A fake-model-server responder that plays an offline world agent through the harness.

The harness (horizonbench.harness) sends its prompts over real HTTP through the real
SDKs; this responder reads each prompt as a model would have to (the ``## Task`` and
``## Step`` sections, the role from the system prompt) and answers with the JSON the
offline agent's step implies: the Updater writes the agent's state, the Planner its
action and declared preconditions, Self-Diag its verdict. It is a pure function of
the prompt (retries and resumed runs get the same answer), so a harness episode must
reproduce the offline agent's episode exactly.

Misbehaviour is injected deterministically, per prompt:

* ``malformed``: (role, step) pairs whose first answer is unusable (prose, broken JSON
  or a wrong type) and whose repair is correct;
* ``always_bad``: (role, step) pairs that never answer usably (the harness falls back);
* ``too_long``: (role, step) pairs answered with finish reason ``length``.

Episodes are told apart by their task text (tests check it is unique among theirs).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from horizonbench.datasets.worlds.agents import Agent, AgentStep
from horizonbench.datasets.worlds.base import format_fact
from horizonbench.datasets.worlds.episode import EpisodeSpec, run_episode
from horizonbench.datasets.worlds.study import environment_class

_SECTION = re.compile(r"^## (.+)$", re.M)

#: unusable first answers, cycled through by (role, step)
BAD_ANSWERS = (
    "Sure! I think the best next move is to look around first.",
    '{"action": "go(room2)", "preconditions": [at(agent, room1)]',  # broken JSON
    '{"world_state": "everything is fine", "valid": "yes", "action": 3}',  # wrong types
)


class _Recorder:
    """Wraps an offline agent and keeps every step it takes."""

    def __init__(self, agent: Agent) -> None:
        self.inner = agent
        self.name = agent.name
        self.privileged = agent.privileged
        self.steps: list[AgentStep] = []

    def begin(self, observation: Any, task: Any, env: Any) -> None:
        self.inner.begin(observation, task, env)

    def act(self, observation: Any) -> AgentStep:
        step = self.inner.act(observation)
        self.steps.append(step)
        return step


def sections(text: str) -> dict[str, str]:
    """``## Title`` blocks of a harness user message."""
    out: dict[str, str] = {}
    heads = list(_SECTION.finditer(text))
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out[h.group(1).strip()] = text[h.end() : end].strip("\n")
    return out


def role_of(system: str) -> str:
    for role, marker in (
        ("planner", "You are the Planner"),
        ("updater", "You are the Updater"),
        ("summary", "You are the memory"),
        ("selfdiag", "You are the Self-Diag"),
    ):
        if system.startswith(marker):
            return role
    raise ValueError(f"not a harness system prompt: {system[:60]!r}")


def split_body(body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """(system text, non-system messages) for an OpenAI or Anthropic request body."""
    messages = list(body.get("messages", []))
    system = body.get("system")
    if isinstance(system, list):  # Anthropic content blocks
        system = "".join(b.get("text", "") for b in system)
    if system is None and messages and messages[0].get("role") == "system":
        system = messages.pop(0)["content"]
    return str(system or ""), messages


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content)
    return str(content)


@dataclass
class WorldAgentPlayer:
    """The responder (see the module docstring); ``make_agent`` builds a fresh offline
    agent for one episode."""

    episodes: Iterable[EpisodeSpec]
    make_agent: Callable[[], Agent]
    malformed: set[tuple[str, int]] = field(default_factory=set)
    always_bad: set[tuple[str, int]] = field(default_factory=set)
    too_long: set[tuple[str, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.traces: dict[str, list[AgentStep]] = {}
        self.offline: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.calls_by_role: dict[str, int] = {}
        for ep in self.episodes:
            env = environment_class(ep.env)(ep.spec)
            _, task = env.reset(ep.seed, ep.archetype)
            if task.text in self.traces:
                raise ValueError("two episodes share a task text; pick other seeds")
            recorder = _Recorder(self.make_agent())
            env = environment_class(ep.env)(ep.spec)
            self.offline[task.text] = run_episode(env, recorder, ep)
            self.traces[task.text] = recorder.steps

    def __call__(self, body: dict[str, Any]) -> Any:
        system, messages = split_body(body)
        role = role_of(system)
        first = sections(_text(messages[0]["content"]))
        step = int(first["Step"].split()[0]) - 1
        repair = len(messages) > 1
        with self._lock:
            self.calls_by_role[role] = self.calls_by_role.get(role, 0) + 1
        key = (role, step)
        if key in self.too_long:
            return {"text": '{"world_state": ["at(agent, room1)", ', "stop": "length"}
        if key in self.always_bad or (key in self.malformed and not repair):
            return BAD_ANSWERS[(step + len(role)) % len(BAD_ANSWERS)]
        move = self.traces[first["Task"]][step]
        if role == "updater":
            return json.dumps({"world_state": [format_fact(f) for f in move.state or ()]})
        if role == "summary":
            return json.dumps({"summary": f"step {step}: following the plan"})
        if role == "planner":
            answer: dict[str, Any] = {
                "action": move.action,
                "preconditions": [format_fact(f) for f in move.preconditions or ()],
                "expected_effects": [],
                "confidence": 0.9,
            }
            if "world_state" in system:
                answer["world_state"] = [format_fact(f) for f in move.state or ()]
            return json.dumps(answer)
        return json.dumps({"valid": bool(move.expects_valid), "missing_preconditions": [], "replan": False})
