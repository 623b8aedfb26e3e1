"""Reading the project's task files into the task specs the scheduler and the client take.

A task file (``examples/*/task.yaml``, what ``polar submit`` reads) is JSON or YAML and holds one
task, a list of tasks, or a whole batch (``{"tasks": [...], ...}``). JSON is read with the standard
library; YAML needs PyYAML, the package's one optional dependency (``pip install
'./clients/python[yaml]'``), and without it the error names that extra instead of failing on an
import deep inside a run. The specs are returned as written: the control plane checks them (and
answers 400 naming the field) when they are submitted.

Example::

    from polar_trainer import load_task_file
    tasks = load_task_file("examples/hello/task.yaml")     # [{"task_id": "hello-arith", ...}]
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List

#: What a YAML task file needs installed, as an error names it.
YAML_EXTRA = "pip install 'polar-trainer[yaml]' (from a checkout: pip install './clients/python[yaml]')"


class TaskFileError(ValueError):
    """A task file that cannot be read, parsed, or does not hold task specs; the message names the
    file (and the task's position or the missing key).

    Example::

        try: load_task_file("missing.yaml")
        except TaskFileError as e: print(e)     # missing.yaml: cannot read (No such file ...)
    """


def _is_yaml(path: str) -> bool:
    return path.lower().endswith((".yaml", ".yml"))


def _parse_yaml(path: str, text: str) -> Any:
    try:
        import yaml  # PyYAML: optional, only for YAML files
    except ImportError as e:
        raise TaskFileError(f"{path}: reading YAML needs PyYAML, which is not installed: {YAML_EXTRA}, or give the task file as JSON") from e
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise TaskFileError(f"{path}: not valid YAML: {e}") from e


def load_task_file(path: "str | os.PathLike[str]") -> List[Dict[str, Any]]:
    """The task specs of a JSON or YAML task file (``.yaml``/``.yml`` is YAML, anything else JSON),
    always as a list: one task gives ``[task]``, a batch gives its ``tasks``.

    Raises:
        TaskFileError: the file cannot be read or parsed, PyYAML is missing for a YAML file (the
            message names the ``yaml`` extra), or an entry is not an object with ``instruction``
            and ``agent``.

    Example::

        tasks = load_task_file("examples/hello/task.yaml")
        sched = GroupScheduler(client, cfg, tasks, state_dir="ckpt/polar")
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise TaskFileError(f"{name}: cannot read ({e.strerror or e})") from e
    if _is_yaml(name):
        doc = _parse_yaml(name, text)
    else:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise TaskFileError(f"{name}: not valid JSON: {e}") from e
    if isinstance(doc, list):
        tasks, where = doc, "[{}]"
    elif isinstance(doc, dict) and "tasks" in doc:
        tasks, where = doc["tasks"], "tasks[{}]"
        if not isinstance(tasks, list):
            raise TaskFileError(f"{name}: tasks must be a list, got {type(tasks).__name__}")
    else:
        tasks, where = [doc], "the task"
    if not tasks:
        raise TaskFileError(f"{name}: holds no task")
    for i, task in enumerate(tasks):
        at = where.format(i)
        if not isinstance(task, dict):
            raise TaskFileError(f"{name}: {at} must be an object, got {type(task).__name__}")
        for key in ("instruction", "agent"):
            if key not in task:
                raise TaskFileError(f"{name}: {at} has no {key!r}")
    return tasks
