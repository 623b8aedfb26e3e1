"""Shared pieces of the official-SDK scripts: their input, strict validation with the SDK's own
types, and their JSON output.

Each script reads one JSON object on stdin::

    {"base_url": "http://127.0.0.1:PORT", "keys": {"plain": "sk-polar-...", "stream": ..., ...}}

(one session key per scenario), runs every scenario for two turns through its SDK, and prints one
JSON object on stdout: ``{"sdk": name, "version": v, "scenarios": {name: [turn, turn]}}``. A turn
is ``{"id", "text", "reasoning", "token", "tool_calls": [{"id", "name", "arguments"}],
"finish", "usage": {"input", "cached", "output"}}``. Any response the SDK's types reject makes the
script exit non-zero with the validation error on stderr.
"""

from __future__ import annotations

import json
import sys
import typing
from typing import Any, Callable

from pydantic import BaseModel

QUESTION = "What is 17 * 23?"
RECHECK = "Are you sure?"
CALC_SCHEMA = {
    "type": "object",
    "properties": {"expression": {"type": "string"}},
    "required": ["expression"],
}
TOOL_RESULT = "391"
IMAGE_QUESTION = "How many stars are in this image?"
# A 1x1 PNG, standard base64; the test checks the engine got exactly these bytes.
PNG_1PX = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="
)

# The scenarios every script runs, each in its own session: two turns each, the second sending
# back what the first returned (the reasoning token included). "image" asks about an image first.
SCENARIOS = ("plain", "stream", "tools", "stream_tools", "image")


def load_input() -> dict[str, Any]:
    """The script's input object (base URL and one session key per scenario)."""
    data = json.load(sys.stdin)
    missing = [s for s in SCENARIOS if s not in data.get("keys", {})]
    if "base_url" not in data or missing:
        raise SystemExit(f"stdin: need base_url and keys for {', '.join(SCENARIOS)}")
    return data


def strict(cls: type[BaseModel], raw: str | dict[str, Any] | list[Any], what: str) -> None:
    """Validates one wire object against the SDK type in pydantic's strict mode.

    The openai and anthropic SDKs build their response objects without validation, so a missing
    required field or a wrong type passes silently there; this is the check a typed client does.
    """
    text = raw if isinstance(raw, str) else json.dumps(raw)
    try:
        cls.model_validate_json(text, strict=True)
    except Exception as err:  # pydantic.ValidationError; the message names each field
        raise AssertionError(f"{what} does not validate as {cls.__name__}: {err}") from err


def by_type(union: Any) -> dict[str, type[BaseModel]]:
    """Maps each member of a discriminated union of event models by its ``type`` literal."""
    args = typing.get_args(union)
    if typing.get_origin(union) is typing.Annotated:
        return by_type(args[0])
    out: dict[str, type[BaseModel]] = {}
    for member in args:
        if isinstance(member, type) and issubclass(member, BaseModel) and "type" in member.model_fields:
            for literal in typing.get_args(member.model_fields["type"].annotation):
                out[literal] = member
    return out


def strict_event(types: dict[str, type[BaseModel]], event: dict[str, Any], what: str) -> None:
    """Validates one stream event against the union member named by its ``type``."""
    cls = types.get(event.get("type", ""))
    if cls is None:
        raise AssertionError(f"{what}: unknown event type {event.get('type')!r}")
    strict(cls, event, f"{what} {event['type']}")


def turn(
    *,
    id: str | None,
    text: str,
    reasoning: str | None,
    token: str | None,
    tool_calls: list[dict[str, Any]],
    finish: str | None,
    input_tokens: int | None,
    cached_tokens: int | None,
    output_tokens: int | None,
) -> dict[str, Any]:
    """One turn of the output, in the shape the test checks (usage as the SDK reports it)."""
    return {
        "id": id,
        "text": text,
        "reasoning": reasoning,
        "token": token,
        "tool_calls": tool_calls,
        "finish": finish,
        "usage": {"input": input_tokens, "cached": cached_tokens, "output": output_tokens},
    }


def scenario_table(
    two_turns: Callable[..., Callable[[Any], list[dict[str, Any]]]], create: Any, stream: Any
) -> dict[str, Callable[[Any], list[dict[str, Any]]]]:
    """The five scenarios the test expects, for a family whose ``two_turns(call, tools, image=False)``
    takes the SDK call to use (``create`` or ``stream``)."""
    return {
        "plain": two_turns(create, False),
        "stream": two_turns(stream, False),
        "tools": two_turns(create, True),
        "stream_tools": two_turns(stream, True),
        "image": two_turns(create, False, image=True),
    }


def run(
    sdk: str,
    version: str,
    client: Callable[[str, str], Any],
    scenarios: dict[str, Callable[[Any], list[dict[str, Any]]]],
) -> None:
    """Runs each scenario with a client for its own session key; prints the output object.

    ``client(base_url, key)`` builds the SDK client.
    """
    data = load_input()
    out = {
        "sdk": sdk,
        "version": version,
        "scenarios": {n: f(client(data["base_url"], data["keys"][n])) for n, f in scenarios.items()},
    }
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
