"""Google Gemini (generateContent / streamGenerateContent) through the official ``google-genai``
SDK, in its chat session (``client.chats``), which keeps the history and sends every part back,
the ``thoughtSignature`` bytes included: plain (with visible thoughts, ``include_thoughts``),
streamed, with tools and streamed with tools, two turns each. The SDK validates every response
with its own pydantic types (unknown fields forbidden, ``thoughtSignature`` must be base64), and
its chat drops a turn whose chunks it finds invalid, so the curated history is checked too. Input
and output: see ``sdkcheck.py``.
"""

from __future__ import annotations

import base64
from importlib.metadata import version
from typing import Any

from google import genai
from google.genai import types

from sdkcheck import CALC_SCHEMA, IMAGE_QUESTION, PNG_1PX, QUESTION, RECHECK, TOOL_RESULT, run, turn

MODEL = "gemini-2.5-pro"


def client(base_url: str, key: str) -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=base_url))


def config(tools: bool, thoughts: bool) -> types.GenerateContentConfig:
    calculator = types.FunctionDeclaration(
        name="calculator", description="Evaluates arithmetic.", parameters_json_schema=CALC_SCHEMA
    )
    return types.GenerateContentConfig(
        temperature=0,
        tools=[types.Tool(function_declarations=[calculator])] if tools else None,
        # The calls are answered by this script, as an agent loop does.
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        thinking_config=types.ThinkingConfig(include_thoughts=True) if thoughts else None,
    )


def parts_of(response: types.GenerateContentResponse) -> list[types.Part]:
    content = response.candidates[0].content if response.candidates else None
    return (content.parts or []) if content else []


def summary(chunks: list[types.GenerateContentResponse]) -> dict[str, Any]:
    """One turn from its response (or its stream's chunks, merged as the SDK's chat merges them)."""
    parts = [p for ch in chunks for p in parts_of(ch)]
    signature = next((p.thought_signature for p in parts if p.thought_signature), None)
    thoughts = [p.text or "" for p in parts if p.thought]
    last = chunks[-1]
    finish = last.candidates[0].finish_reason if last.candidates else None
    usage = last.usage_metadata
    return turn(
        id=last.response_id,
        text="".join(p.text or "" for p in parts if p.text and not p.thought),
        reasoning="".join(thoughts) if thoughts else None,
        token=base64.b64encode(signature).decode() if signature else None,
        tool_calls=[
            {"id": p.function_call.id, "name": p.function_call.name, "arguments": p.function_call.args}
            for p in parts
            if p.function_call
        ],
        finish=finish.value if finish else None,
        input_tokens=usage.prompt_token_count if usage else None,
        cached_tokens=usage.cached_content_token_count if usage else None,
        output_tokens=usage.candidates_token_count if usage else None,
    )


def send(chat: Any, message: Any, streamed: bool) -> list[types.GenerateContentResponse]:
    return list(chat.send_message_stream(message)) if streamed else [chat.send_message(message)]


def two_turns(streamed: bool, tools: bool, thoughts: bool = False, image: bool = False) -> Any:
    def scenario(c: genai.Client) -> list[dict[str, Any]]:
        chat = c.chats.create(model=MODEL, config=config(tools, thoughts))
        # Image bytes go out as the SDK serialises bytes fields (URL-safe base64).
        png = types.Part.from_bytes(data=base64.b64decode(PNG_1PX), mime_type="image/png")
        first = send(chat, [png, IMAGE_QUESTION] if image else QUESTION, streamed)
        calls = [p.function_call for ch in first for p in parts_of(ch) if p.function_call]
        if calls:
            result = {"result": TOOL_RESULT}
            answers = [types.FunctionResponse(id=f.id, name=f.name, response=result) for f in calls]
            reply: Any = [types.Part(function_response=a) for a in answers]
        else:
            reply = RECHECK
        second = send(chat, reply, streamed)
        # The chat keeps a turn only when it found every response (chunk) valid; a streamed turn is
        # kept as one entry per chunk.
        roles = [h.role for h in chat.get_history(curated=True)]
        turns = [r for i, r in enumerate(roles) if i == 0 or roles[i - 1] != r]
        if turns != ["user", "model", "user", "model"]:
            raise AssertionError(f"the chat dropped a turn from its history: {roles}")
        return [summary(first), summary(second)]

    return scenario


if __name__ == "__main__":
    run(
        "google-genai",
        version("google-genai"),
        client,
        {
            "plain": two_turns(False, False, thoughts=True),
            "stream": two_turns(True, False),
            "tools": two_turns(False, True),
            "stream_tools": two_turns(True, True),
            "image": two_turns(False, False, image=True),
        },
    )
