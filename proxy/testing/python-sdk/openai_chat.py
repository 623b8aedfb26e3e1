"""OpenAI Chat Completions through the official ``openai`` SDK: plain, streamed, with tools and
streamed with tools, two turns each. The assistant message goes back as the SDK returned it (with
the ``reasoning_content`` the proxy adds), and every completion and chunk is validated strictly
against the SDK's ``ChatCompletion`` / ``ChatCompletionChunk`` types. Input and output: see
``sdkcheck.py``.
"""

from __future__ import annotations

import json
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from sdkcheck import (
    CALC_SCHEMA,
    IMAGE_QUESTION,
    PNG_1PX,
    QUESTION,
    RECHECK,
    TOOL_RESULT,
    run,
    scenario_table,
    strict,
    turn,
)

TOOLS = [{"type": "function", "function": {"name": "calculator", "parameters": CALC_SCHEMA}}]


def client(base_url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=f"{base_url}/v1", max_retries=0)


def reasoning_of(message: Any) -> str | None:
    # Not in the SDK's types (SGLang's and vLLM's extension); kept as an extra field.
    return (message.model_extra or {}).get("reasoning_content")


def summary(c: ChatCompletion) -> dict[str, Any]:
    choice = c.choices[0]
    calls = [
        {"id": t.id, "name": t.function.name, "arguments": json.loads(t.function.arguments)}
        for t in choice.message.tool_calls or []
    ]
    return turn(
        id=c.id,
        text=choice.message.content or "",
        reasoning=reasoning_of(choice.message),
        token=None,
        tool_calls=calls,
        finish=choice.finish_reason,
        input_tokens=c.usage.prompt_tokens if c.usage else None,
        cached_tokens=c.usage.prompt_tokens_details.cached_tokens
        if c.usage and c.usage.prompt_tokens_details
        else None,
        output_tokens=c.usage.completion_tokens if c.usage else None,
    )


def create(c: openai.OpenAI, messages: list[Any], tools: bool) -> ChatCompletion:
    raw = c.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=messages, temperature=0, **({"tools": TOOLS} if tools else {})
    )
    strict(ChatCompletion, raw.http_response.text, "chat completion")
    return raw.parse()


def stream(c: openai.OpenAI, messages: list[Any], tools: bool) -> ChatCompletion:
    with c.chat.completions.stream(
        model="gpt-4o",
        messages=messages,
        temperature=0,
        stream_options={"include_usage": True},
        **({"tools": TOOLS} if tools else {}),
    ) as s:
        for event in s:
            if event.type == "chunk":
                strict(ChatCompletionChunk, event.chunk.to_dict(), "chat completion chunk")
        # The SDK's accumulator, which keeps the reasoning_content deltas as an extra field.
        return s.get_final_completion()


IMAGE_MESSAGE = {
    "role": "user",
    "content": [
        {"type": "text", "text": IMAGE_QUESTION},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_1PX}"}},
    ],
}


def two_turns(call: Any, tools: bool, image: bool = False) -> Any:
    def scenario(c: openai.OpenAI) -> list[dict[str, Any]]:
        messages: list[Any] = [IMAGE_MESSAGE if image else {"role": "user", "content": QUESTION}]
        first = call(c, messages, tools)
        message = first.choices[0].message
        # The returned message goes back as the SDK serialises it (reasoning_content included).
        messages.append(message.to_dict())
        if message.tool_calls:
            messages += [
                {"role": "tool", "tool_call_id": t.id, "content": TOOL_RESULT} for t in message.tool_calls
            ]
        else:
            messages.append({"role": "user", "content": RECHECK})
        second = call(c, messages, tools)
        return [summary(first), summary(second)]

    return scenario


if __name__ == "__main__":
    run("openai", openai.__version__, client, scenario_table(two_turns, create, stream))
