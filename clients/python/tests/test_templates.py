"""Task templates with upstream's placeholders (pure units)."""

from __future__ import annotations

import pytest

from polar_trainer.templates import TemplateError, prompt_text, render

CTX = {"instruction": "fix it", "rollout_id": 4, "sample": {"metadata": {"instance": {"repo": "r"}, "id": 7}, "label": None}}


def test_placeholders_keep_the_type_of_a_whole_value_and_format_inside_strings():
    out = render({"i": "{instruction}", "inst": "{sample.metadata.instance}", "id": "task-{sample.metadata.id}-{rollout_id}", "n": ["{rollout_id}"], "lbl": "x{sample.label}"}, CTX)
    assert out == {"i": "fix it", "inst": {"repo": "r"}, "id": "task-7-4", "n": [4], "lbl": "x"}


def test_double_braces_are_the_gateways_placeholders_and_stay():
    cmd = "node agent.mjs {{INSTRUCTION}} --report={{REPORT}} --step={rollout_id}"
    assert render(cmd, CTX) == "node agent.mjs {{INSTRUCTION}} --report={{REPORT}} --step=4"


def test_an_unknown_placeholder_names_itself():
    with pytest.raises(TemplateError, match=r"\{sample.metadata.nope\}"):
        render("{sample.metadata.nope}", CTX)


def test_prompt_text_of_chat_messages():
    assert prompt_text([{"role": "system", "content": "s"}, {"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "text", "text": "b"}]}]) == "a\n\nb"
    assert prompt_text("plain") == "plain"
