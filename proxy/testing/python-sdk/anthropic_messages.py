"""Anthropic Messages through the official ``anthropic`` SDK: plain, streamed (the SDK's
``messages.stream`` accumulator), with tools and streamed with tools, two turns each. The second
turn sends the first turn's content blocks back unchanged (thinking with its ``signature``), and
every message and raw stream event is validated strictly against the SDK's types. Input and
output: see ``sdkcheck.py``.
"""

from __future__ import annotations

from typing import Any

import anthropic
from anthropic.types import Message, RawMessageStreamEvent

from sdkcheck import (
    CALC_SCHEMA,
    IMAGE_QUESTION,
    PNG_1PX,
    QUESTION,
    RECHECK,
    TOOL_RESULT,
    by_type,
    run,
    scenario_table,
    strict,
    strict_event,
    turn,
)

TOOLS = [{"name": "calculator", "description": "Evaluates arithmetic.", "input_schema": CALC_SCHEMA}]
EVENTS = by_type(RawMessageStreamEvent)


def client(base_url: str, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=0)


def params(messages: list[Any], tools: bool) -> dict[str, Any]:
    extra = {"tools": TOOLS} if tools else {}
    return {"model": "claude-harness", "max_tokens": 1024, "messages": messages, **extra}


def summary(m: Message) -> dict[str, Any]:
    thinking = [b for b in m.content if b.type == "thinking"]
    return turn(
        id=m.id,
        text="".join(b.text for b in m.content if b.type == "text"),
        reasoning="".join(b.thinking for b in thinking) if thinking else None,
        token=thinking[0].signature if thinking else None,
        tool_calls=[
            {"id": b.id, "name": b.name, "arguments": b.input} for b in m.content if b.type == "tool_use"
        ],
        finish=m.stop_reason,
        input_tokens=m.usage.input_tokens,
        cached_tokens=m.usage.cache_read_input_tokens,
        output_tokens=m.usage.output_tokens,
    )


def create(c: anthropic.Anthropic, messages: list[Any], tools: bool) -> Message:
    raw = c.messages.with_raw_response.create(**params(messages, tools))
    strict(Message, raw.http_response.text, "message")
    return raw.parse()


def stream(c: anthropic.Anthropic, messages: list[Any], tools: bool) -> Message:
    types: list[str] = []
    with c.messages.stream(**params(messages, tools)) as s:
        for event in s:
            # The accumulator also yields derived events (text, thinking, signature, input_json).
            if event.type in EVENTS:
                types.append(event.type)
                strict_event(EVENTS, event.to_dict(), "message stream event")
        final = s.get_final_message()
    if types[0] != "message_start" or types[-2:] != ["message_delta", "message_stop"]:
        raise AssertionError(f"stream events out of order: {types}")
    return final


IMAGE_MESSAGE = {
    "role": "user",
    "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_1PX}},
        {"type": "text", "text": IMAGE_QUESTION},
    ],
}


def two_turns(call: Any, tools: bool, image: bool = False) -> Any:
    def scenario(c: anthropic.Anthropic) -> list[dict[str, Any]]:
        messages: list[Any] = [IMAGE_MESSAGE if image else {"role": "user", "content": QUESTION}]
        first = call(c, messages, tools)
        # As the SDK's docs do: the content blocks go back as returned, signatures included.
        messages.append({"role": "assistant", "content": first.content})
        uses = [b for b in first.content if b.type == "tool_use"]
        if uses:
            results = [{"type": "tool_result", "tool_use_id": b.id, "content": TOOL_RESULT} for b in uses]
            messages.append({"role": "user", "content": results})
        else:
            messages.append({"role": "user", "content": RECHECK})
        second = call(c, messages, tools)
        return [summary(first), summary(second)]

    return scenario


if __name__ == "__main__":
    run("anthropic", anthropic.__version__, client, scenario_table(two_turns, create, stream))
