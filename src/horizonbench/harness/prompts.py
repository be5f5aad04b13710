"""The prompts of the three-call harness, versioned.

Every call is one fresh exchange (a system prompt and one user message, plus the repair
turns of :func:`repair_messages`); what the agent remembers between steps is whatever
its memory mode puts in the user message, never a hidden chat history. The user
message is made of ``## Section`` blocks in a fixed order, so a transcript of any call
can be read back by a person or a test.

Nothing is shortened to fit: states, summaries and transcripts go in whole, and the
harness checks the prompt's size against the model's context before it is sent
(``budget_exceeded``, never a silently cut prompt). :data:`PROMPT_VERSION` changes
whenever a prompt's wording changes; it is recorded on every episode, and since it
changes the messages it also changes the attempt keys, so stored answers to an older
wording are never reused for a newer one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from horizonbench.core.types import Message
from horizonbench.datasets.worlds.base import Fact, Observation, Task, format_fact

PROMPT_VERSION = "hb-wmc-1"

#: memory modes: what the Planner conditions on between steps
MEMORY_MODES: tuple[str, ...] = ("structured", "summary", "transcript")

#: an answer quoted back in a repair request is cut here (and the cut is said)
REPAIR_QUOTE_CHARS = 2_000
#: what a repair request quotes for an empty answer (the Anthropic API refuses a
#: message with empty content, so the repair of an empty answer could never be sent)
EMPTY_ANSWER = "[empty answer]"

_FACT_RULES = (
    "Write every fact as a string in function form, predicate first, lower case, "
    'for example "at(agent, room2)" or "open(box1)", using only the names the task '
    "and the observations use. Write an action the same way, for example "
    '"go(room2)", "put(item3, box1)", or "noop" for an action without arguments.'
)

PLANNER_SYSTEM = (
    "You are the Planner of an agent acting in a simulated world, one action per step. "
    "Read the task, what you remember of the world and how your last action went, and "
    "choose the single next action that makes progress towards the goal. The simulator "
    "executes exactly the action you name; an action whose requirements do not hold "
    "fails and still uses up a step.\n"
    "Answer with one JSON object and nothing else, with these keys:\n"
    '  "action": the action, a string;\n'
    '  "preconditions": the facts that must hold for the action to succeed, a list;\n'
    '  "expected_effects": the facts you expect to hold right after it, a list;\n'
    '  "confidence": how sure you are that the action succeeds, a number from 0 to 1.\n' + _FACT_RULES
)

PLANNER_STATE_KEY = (
    'Add the key "world_state": every fact you believe holds right now, before your '
    "action, as a complete list."
)

UPDATER_SYSTEM = (
    "You are the Updater of an agent acting in a simulated world. You keep the agent's "
    "explicit world state: the complete list of facts that hold now. You receive the "
    "state you kept before the last action, that action, and the observation that "
    "followed it. Add the facts that became true, drop the facts the change made false, "
    "keep every other fact you still believe, and write the whole state out again: the "
    "Planner sees nothing but your list. Observations may show only part of the world; "
    "what they do not show, keep as you last knew it.\n"
    "Answer with one JSON object and nothing else: "
    '{"world_state": [every fact that holds now]}.\n' + _FACT_RULES
)

SUMMARY_SYSTEM = (
    "You are the memory of an agent acting in a simulated world. You keep a short "
    "summary in plain words of everything the agent needs to know to finish its task: "
    "where things are, what is open, held, done or still missing. You receive your "
    "previous summary, the last action and the observation that followed it, and write "
    "the new summary; the Planner sees nothing but your summary and its last action. "
    "Use at most {words} words.\n"
    'Answer with one JSON object and nothing else: {{"summary": "..."}}.'
)

SELFDIAG_SYSTEM = (
    "You are the Self-Diag of an agent acting in a simulated world. The Planner has "
    "proposed an action. Judge, from the agent's memory and the task alone, whether "
    "the action will succeed: do all of its requirements hold now? Your verdict is "
    "recorded and does not stop the action.\n"
    "Answer with one JSON object and nothing else, with these keys:\n"
    '  "valid": true if you expect the action to succeed, else false;\n'
    '  "missing_preconditions": the required facts you believe do not hold, a list;\n'
    '  "replan": true if the Planner should have chosen another action.\n' + _FACT_RULES
)

REPAIR = (
    "Your answer could not be used: {error}. Reply again with only the JSON object "
    "described above, nothing before or after it."
)


@dataclass(frozen=True, slots=True)
class Exchange:
    """One executed step, as memory modes remember it: the action text the agent
    wrote and the observation that followed."""

    action: str
    observation: Observation


def facts_block(facts: Sequence[Fact] | None) -> str:
    if not facts:
        return "(none)"
    return "\n".join(format_fact(f) for f in facts)


def _sections(*parts: tuple[str, str]) -> str:
    return "\n\n".join(f"## {title}\n{body}" for title, body in parts)


def _step_line(step: int, horizon: int) -> str:
    left = max(0, horizon - step)
    return f"{step + 1} of at most {horizon} ({left} step{'s' if left != 1 else ''} left, this one included)"


def _last(last: Exchange | None) -> str:
    if last is None:
        return "none: this is the first step"
    return f"{last.action} -> {last.observation.message}"


def transcript_block(briefing: Observation, history: Sequence[Exchange]) -> str:
    """The raw transcript: the briefing, then every action and what followed it."""
    lines = [briefing.text]
    for ex in history:
        lines.append(f"action: {ex.action}")
        lines.append(ex.observation.text)
    return "\n".join(lines)


def planner_messages(
    task: Task,
    step: int,
    horizon: int,
    memory_title: str,
    memory: str,
    last: Exchange | None,
    *,
    wants_state: bool,
) -> tuple[Message, ...]:
    """The Planner's prompt at 0-based ``step``; ``memory`` is the mode's memory block."""
    system = PLANNER_SYSTEM + ("\n" + PLANNER_STATE_KEY if wants_state else "")
    body = _sections(
        ("Task", task.text),
        ("Step", _step_line(step, horizon)),
        (memory_title, memory),
        ("Last action", _last(last)),
    )
    return (Message("system", system), Message("user", body))


def updater_messages(
    task: Task,
    step: int,
    horizon: int,
    state: Sequence[Fact] | None,
    last: Exchange | None,
    observation: Observation,
) -> tuple[Message, ...]:
    """The structured Updater's prompt: the kept state, the last action, the observation."""
    body = _sections(
        ("Task", task.text),
        ("Step", _step_line(step, horizon)),
        ("Your world state before the last action", facts_block(state)),
        ("Last action", _last(last)),
        ("Observation", observation.text),
    )
    return (Message("system", UPDATER_SYSTEM), Message("user", body))


def summary_messages(
    task: Task,
    step: int,
    horizon: int,
    summary: str | None,
    last: Exchange | None,
    observation: Observation,
    words: int,
) -> tuple[Message, ...]:
    """The summary mode's memory call: the previous summary, the last action, the observation."""
    body = _sections(
        ("Task", task.text),
        ("Step", _step_line(step, horizon)),
        ("Your summary before the last action", summary or "(none yet)"),
        ("Last action", _last(last)),
        ("Observation", observation.text),
    )
    return (Message("system", SUMMARY_SYSTEM.format(words=words)), Message("user", body))


def selfdiag_messages(
    task: Task,
    step: int,
    horizon: int,
    memory_title: str,
    memory: str,
    action: str,
    preconditions: Sequence[Fact],
) -> tuple[Message, ...]:
    """Self-Diag's prompt: the memory the Planner used, the proposed action and the
    preconditions it declared (never the outcome: the action has not run yet)."""
    body = _sections(
        ("Task", task.text),
        ("Step", _step_line(step, horizon)),
        (memory_title, memory),
        ("Proposed action", action),
        ("Declared preconditions", facts_block(preconditions)),
    )
    return (Message("system", SELFDIAG_SYSTEM), Message("user", body))


def repair_messages(messages: tuple[Message, ...], answer: str, error: str) -> tuple[Message, ...]:
    """The same exchange with the unusable answer and what is wrong with it appended
    (an empty or blank answer is quoted as :data:`EMPTY_ANSWER`)."""
    quoted = answer if answer.strip() else EMPTY_ANSWER
    if len(quoted) > REPAIR_QUOTE_CHARS:
        quoted = quoted[:REPAIR_QUOTE_CHARS] + f"\n[answer cut here by the harness: {len(answer)} characters]"
    return (*messages, Message("assistant", quoted), Message("user", REPAIR.format(error=error)))
