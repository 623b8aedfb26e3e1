"""OpenAI Responses through the official ``openai`` SDK: plain, streamed, with tools and streamed
with tools, two turns each, stateless (``store: false``, ``include: reasoning.encrypted_content``).
The second turn sends the reasoning back as Codex does, only its ``encrypted_content`` (no
visible text), so the proxy must read its own token. Every response and stream event is validated
strictly against the SDK's types. Input and output: see ``sdkcheck.py``.
"""

from __future__ import annotations

import json
from typing import Any

import openai
from openai.types.responses import Response, ResponseStreamEvent

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

TOOLS = [{"type": "function", "name": "calculator", "parameters": CALC_SCHEMA, "strict": False}]
EVENTS = by_type(ResponseStreamEvent)


def client(base_url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=f"{base_url}/v1", max_retries=0)


def params(items: list[Any], tools: bool) -> dict[str, Any]:
    return {
        "model": "gpt-5",
        "input": items,
        "temperature": 0,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        **({"tools": TOOLS} if tools else {}),
    }


def summary(r: Response) -> dict[str, Any]:
    reasoning = next((o for o in r.output if o.type == "reasoning"), None)
    calls = [
        {"id": o.call_id, "name": o.name, "arguments": json.loads(o.arguments)}
        for o in r.output
        if o.type == "function_call"
    ]
    return turn(
        id=r.id,
        text=r.output_text,
        # The reasoning text is the item's summary, as OpenAI's API gives it (no `content`).
        reasoning="\n".join(s.text for s in reasoning.summary) if reasoning else None,
        token=reasoning.encrypted_content if reasoning else None,
        tool_calls=calls,
        finish=r.status,
        input_tokens=r.usage.input_tokens if r.usage else None,
        cached_tokens=r.usage.input_tokens_details.cached_tokens if r.usage else None,
        output_tokens=r.usage.output_tokens if r.usage else None,
    )


def create(c: openai.OpenAI, items: list[Any], tools: bool) -> Response:
    raw = c.responses.with_raw_response.create(**params(items, tools))
    strict(Response, raw.http_response.text, "response")
    return raw.parse()


def stream(c: openai.OpenAI, items: list[Any], tools: bool) -> Response:
    types: list[str] = []
    final: Response | None = None
    for event in c.responses.create(**params(items, tools), stream=True):
        types.append(event.type)
        strict_event(EVENTS, event.to_dict(), "response stream event")
        if event.type == "response.completed":
            final = event.response
    if final is None or types[0] != "response.created" or types[-1] != "response.completed":
        raise AssertionError(f"stream events out of order: {types}")
    return final


def replay(r: Response) -> list[Any]:
    """The first turn's output as input items; reasoning as its opaque token alone."""
    items: list[Any] = []
    for o in r.output:
        if o.type == "reasoning":
            token = o.encrypted_content
            items.append({"type": "reasoning", "id": o.id, "summary": [], "encrypted_content": token})
        else:
            items.append(o.to_dict())
    return items


IMAGE_ITEM = {
    "role": "user",
    "content": [
        {"type": "input_text", "text": IMAGE_QUESTION},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG_1PX}", "detail": "auto"},
    ],
}


def two_turns(call: Any, tools: bool, image: bool = False) -> Any:
    def scenario(c: openai.OpenAI) -> list[dict[str, Any]]:
        items: list[Any] = [IMAGE_ITEM if image else {"role": "user", "content": QUESTION}]
        first = call(c, items, tools)
        items += replay(first)
        calls = [o for o in first.output if o.type == "function_call"]
        if calls:
            items += [
                {"type": "function_call_output", "call_id": o.call_id, "output": TOOL_RESULT} for o in calls
            ]
        else:
            items.append({"role": "user", "content": RECHECK})
        second = call(c, items, tools)
        return [summary(first), summary(second)]

    return scenario


if __name__ == "__main__":
    run("openai", openai.__version__, client, scenario_table(two_turns, create, stream))
