"""Task templates with upstream Polar's placeholders.

A template is any JSON value; every string in it may hold ``{path}`` placeholders resolved against
a context (``instruction``, ``num_samples``, ``rollout_id``, ``group_index``, ``run_id``,
``sample.prompt``, ``sample.label``, ``sample.metadata.KEY``, ``sample.index``, ``args.NAME``,
``sglang.router_base_url``, ...). A string that is exactly one placeholder keeps the value's type
(``"{sample.metadata.instance}"`` can become a dict). An unknown path is an error naming it.
A double-braced ``{{NAME}}`` is left as it is: it is the gateway's own placeholder
(``{{INSTRUCTION}}`` in a shell command, ``{{REPORT}}`` in a grader's test command).

Example::

    render({"instruction": "{instruction}", "metadata": {"id": "{sample.metadata.id}"}},
           {"instruction": "fix it", "sample": {"metadata": {"id": 7}}})
    # {"instruction": "fix it", "metadata": {"id": 7}}
"""

from __future__ import annotations

import copy
import re
from typing import Any, Dict

_ONE = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_.]*)\}$")
# A double-braced name is not a placeholder: ``{{INSTRUCTION}}`` and ``{{REPORT}}`` belong to the gateway.
_ANY = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_.]*)\}(?!\})")


class TemplateError(ValueError):
    """A placeholder names nothing in the context, or the template renders to the wrong type."""


def resolve(context: Dict[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` (dict keys or attributes).

    Example::

        resolve({"sample": {"metadata": {"k": 1}}}, "sample.metadata.k")  # 1
    """
    cur: Any = context
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif not isinstance(cur, dict) and hasattr(cur, part):
            cur = getattr(cur, part)
        else:
            raise TemplateError(f"unknown template variable {{{path}}}")
    return cur


def render(value: Any, context: Dict[str, Any]) -> Any:
    """Renders a template value (see the module doc).

    Example::

        render("Task {sample.index}: {instruction}", ctx)
    """
    if isinstance(value, str):
        m = _ONE.match(value)
        if m:
            return copy.deepcopy(resolve(context, m.group(1)))

        def sub(match: "re.Match[str]") -> str:
            v = resolve(context, match.group(1))
            return "" if v is None else str(v)

        return _ANY.sub(sub, value)
    if isinstance(value, list):
        return [render(v, context) for v in value]
    if isinstance(value, dict):
        return {str(k): render(v, context) for k, v in value.items()}
    return value


def prompt_text(prompt: Any) -> str:
    """The instruction text of a prompt: a string as is; a chat message list as its user
    messages' contents joined by blank lines.

    Example::

        prompt_text([{"role": "system", "content": "s"}, {"role": "user", "content": "fix"}])  # "fix"
    """
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        parts = []
        for m in prompt:
            if isinstance(m, dict) and m.get("role") == "user":
                c = m.get("content")
                if isinstance(c, list):
                    c = "".join(x.get("text", "") for x in c if isinstance(x, dict))
                parts.append(str(c or ""))
        return "\n\n".join(parts)
    return str(prompt or "")
