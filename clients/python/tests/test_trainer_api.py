"""What the docs promise about the scheduler's API, checked against the code (no stack): the
counters table of the package README against ``counters()``, the SchedulerConfig table of
docs/training.md against the dataclass defaults, task specs (a task's own ``task_id`` kept,
``num_samples`` other than ``group_size`` refused naming the field) and versions passed as int or
decimal string."""

from __future__ import annotations

import ast
import dataclasses
import os
import re

import pytest

from polar_trainer import PolarClient
from polar_trainer.config import SchedulerConfig
from polar_trainer.errors import SchedulerError
from polar_trainer.scheduler import GroupScheduler
from polar_trainer.versions import as_version

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(PACKAGE))
TASK = {"instruction": "What is 2 + 3?", "agent": {"harness": "shell", "custom_shell": {"command": "true"}}}
# Never contacted: the constructor and the methods used here only read and write the state folder.
CLIENT = PolarClient("http://127.0.0.1:9", "unused-token")


def _table(path: str, heading: str) -> list:
    """The rows (lists of cells) of the first table after ``heading`` in a markdown file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.index(heading)
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not set(cells[0]) <= set("-: "):
                rows.append(cells)
        elif rows:
            break
    return rows[1:]  # without the header


def _code(cell: str) -> str:
    m = re.match(r"^`([^`]+)`", cell)
    assert m, f"expected a `code` cell, got {cell!r}"
    return m.group(1)


def _sched(tmp_path, tasks=None, **cfg):
    config = SchedulerConfig(run_id="r", rollout_batch_size=1, group_size=cfg.pop("group_size", 4), **cfg)
    return GroupScheduler(CLIENT, config, tasks or [TASK], str(tmp_path / "state"))


def test_the_readme_counters_table_is_what_counters_returns(tmp_path):
    rows = _table(os.path.join(PACKAGE, "README.md"), "## Counters")
    documented = {_code(r[0]): r[1] for r in rows}
    counters = _sched(tmp_path).counters()
    assert set(documented) == set(counters)
    for key, kind in documented.items():
        assert type(counters[key]).__name__ == kind, key


def test_the_docs_scheduler_config_table_is_the_dataclass(tmp_path):
    rows = _table(os.path.join(REPO, "docs", "training.md"), "## `SchedulerConfig`")
    documented = {_code(r[0]): r[1] for r in rows}
    fields = {f.name: f for f in dataclasses.fields(SchedulerConfig)}
    assert list(documented) == list(fields)
    for name, cell in documented.items():
        f = fields[name]
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            assert cell == "required", name
        else:
            assert ast.literal_eval(_code(cell)) == f.default, name


def test_a_tasks_own_task_id_is_kept_and_others_get_the_group_id(tmp_path):
    sched = _sched(tmp_path, [dict(TASK, task_id="add-2-3", num_samples=4), TASK])
    own = sched._body("r-g000000", 0, sched._task_for(0))
    assert own["batch_id"] == "r-g000000" and own["tasks"][0]["task_id"] == "add-2-3"
    assert own["tasks"][0]["num_samples"] == 4 and own["tasks"][0]["metadata"]["group_id"] == "r-g000000"
    assert sched._body("r-g000001", 1, sched._task_for(1))["tasks"][0]["task_id"] == "r-g000001"


def test_num_samples_other_than_group_size_is_refused_naming_the_field(tmp_path):
    with pytest.raises(ValueError, match=r"tasks\[1\]: num_samples is 8 but group_size is 4"):
        _sched(tmp_path, [TASK, dict(TASK, num_samples=8)])
    with pytest.raises(ValueError, match=r"tasks\[0\]: a task spec needs 'agent'"):
        _sched(tmp_path, [{"instruction": "x"}])
    # A task source that is a function is checked when its group is admitted.
    config = SchedulerConfig(run_id="r", rollout_batch_size=1, group_size=4)
    sched = GroupScheduler(CLIENT, config, lambda i: dict(TASK, num_samples=2), str(tmp_path / "fn"))
    with pytest.raises(SchedulerError, match=r"task 0: num_samples is 2 but group_size is 4"):
        sched._body("r-g000000", 0, sched._task_for(0))


def test_versions_are_accepted_as_int_or_decimal_string(tmp_path):
    assert as_version("3") == as_version(3) == 3
    for bad in ("default", -1, "v3", True, None, 1.5):
        with pytest.raises(ValueError, match="policy_version must be an integer >= 0 or a decimal string"):
            as_version(bad)
    config = SchedulerConfig(run_id="r", rollout_batch_size=1, group_size=4)
    sched = GroupScheduler(CLIENT, config, [TASK], str(tmp_path / "s"), policy_version="2")
    assert sched.policy_version == 2 and isinstance(sched.policy_version, int)
    sched.set_policy_version("5")
    assert sched.policy_version == 5 and sched.counters()["policy_version"] == 5
    with pytest.raises(ValueError, match=r"^version must be"):
        sched.set_policy_version("default")
