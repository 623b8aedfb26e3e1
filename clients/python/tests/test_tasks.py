"""load_task_file on the project's own task file (YAML with PyYAML, and the same task as JSON),
the error that names the ``yaml`` extra when PyYAML is missing, and errors that name the file."""

from __future__ import annotations

import json
import os
import sys

import pytest
import yaml  # the yaml extra; CI installs PyYAML, so this suite never skips there

from polar_trainer import TaskFileError, load_task_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HELLO = os.path.join(REPO, "examples", "hello", "task.yaml")


def test_reads_the_projects_yaml_task_and_a_json_copy(tmp_path):
    tasks = load_task_file(HELLO)
    assert len(tasks) == 1
    task = tasks[0]
    assert task["task_id"] == "hello-arith" and task["num_samples"] == 4 and task["instruction"] == "What is 17 * 23?"
    assert task["agent"] == {"harness": "shell", "custom_shell": {"command": "node ask.mjs {{INSTRUCTION}}"}}
    with open(HELLO, encoding="utf-8") as f:
        assert task == yaml.safe_load(f)
    copy = tmp_path / "task.json"
    copy.write_text(json.dumps(task))
    assert load_task_file(copy) == [task]
    # A list of tasks and a whole batch give their tasks.
    (tmp_path / "list.json").write_text(json.dumps([task, dict(task, task_id="b")]))
    assert [t["task_id"] for t in load_task_file(tmp_path / "list.json")] == ["hello-arith", "b"]
    (tmp_path / "batch.yml").write_text(yaml.safe_dump({"batch_id": "x", "tasks": [task]}))
    assert load_task_file(str(tmp_path / "batch.yml")) == [task]


def test_yaml_without_pyyaml_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "yaml", None)  # `import yaml` now raises ImportError
    with pytest.raises(TaskFileError, match=r"task\.yaml: reading YAML needs PyYAML.*polar-trainer\[yaml\]"):
        load_task_file(HELLO)


def test_errors_name_the_file_and_the_entry(tmp_path):
    with pytest.raises(TaskFileError, match=r"nope\.json: cannot read"):
        load_task_file(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(TaskFileError, match=r"bad\.json: not valid JSON"):
        load_task_file(bad)
    bad.write_text(json.dumps({"tasks": [{"instruction": "x", "agent": {}}, {"instruction": "y"}]}))
    with pytest.raises(TaskFileError, match=r"bad\.json: tasks\[1\] has no 'agent'"):
        load_task_file(bad)
    bad.write_text(json.dumps([]))
    with pytest.raises(TaskFileError, match="holds no task"):
        load_task_file(bad)
