"""What the group scheduler keeps on disk (``state.json``), typed, and how it maps to that file.

The file is a JSON object; :class:`SchedulerState` has one field per top-level key and
:class:`GroupRecord` one field per key of a group's entry, with the same names, so the file reads
like these classes. ``to_json`` writes the keys the scheduler has always written (a state file of an
earlier version loads, and one written here loads in it); :class:`~polar_trainer.state.StateStore`
adds ``format`` and writes it atomically.

No lock here: the scheduler's one condition variable guards every read and write of this state
(its admission thread, result readers and the trainer's thread see each other's changes whole),
and a second lock would only let two of them interleave half-made changes.

Example::

    state = load_state(StateStore("ckpt/polar"), run_id="run1")
    state.groups["run1-g000003"].state        # "inflight" | "accepted" | "leased"
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, get_args

from .errors import StateError
from .groups import SelectionTally
from .state import StateStore

#: Where a group is: rolling out (``inflight``), judged and waiting for a step (``accepted``), or
#: taken by a step not yet committed (``leased``). A consumed, rejected or dropped group is removed.
GroupState = Literal["inflight", "accepted", "leased"]
GROUP_STATES = get_args(GroupState)


def bump(counter: Dict[str, int], key: str, n: int = 1) -> None:
    """Adds ``n`` to ``counter[key]`` (0 when absent): the by-reason counts start empty."""
    counter[key] = counter.get(key, 0) + n


#: A JSON number: the scheduler writes ints, but steps are stored as the trainer passed them, so a
#: loaded state is refused for text or null where a number belongs, never for a float.
_NUMBER = (int, float)
_KIND_NAMES = {str: "a string", dict: "an object", list: "a list", _NUMBER: "a number"}


def _required(d: Dict[str, Any], key: str, kind: Any, where: str = "") -> Any:
    """``d[key]`` when it has the JSON type ``kind``; a StateError naming the key otherwise (a
    file edited by hand fails here, saying what is wrong, not later in a scheduler thread)."""
    value = d.get(key)
    if not isinstance(value, kind):
        raise StateError(f"{where}{key!r} must be {_KIND_NAMES[kind]}, got {value!r}")
    return value


def _optional_number(d: Dict[str, Any], key: str, where: str) -> Any:
    value = d.get(key)
    if value is not None and not isinstance(value, _NUMBER):
        raise StateError(f"{where}{key!r} must be a number or null, got {value!r}")
    return value


@dataclass
class GroupRecord:
    """One admitted group, from its admission until it is consumed, rejected or dropped.

    Attributes:
        index: the group counter of the run (the id is ``{run_id}-g{index:06d}``).
        stamp: the policy version when the group was admitted (its task's metadata says so).
        state: see :data:`GroupState`.
        body: the submit body, stored before the POST so a restart resubmits exactly it.
        cancelled: its batch was cancelled (by ``close(cancel_in_flight=True)``, the early stop or
            by hand): a restart reads its CANCELLED sessions and never resubmits it.
        version: set at acceptance: the oldest version of any token it trains on.
        step, staleness: set by the lease (the step taking it, current version − ``version``);
            null again when a restart gives the lease back.
        lease_pos, lease_version: the group's place in its step and the policy version of the
            step, set by the lease; a lease given back leaves them as they were (unread until the
            next lease sets them again).
    """

    index: int
    stamp: int
    state: GroupState
    body: Dict[str, Any]
    cancelled: bool = False
    version: Optional[int] = None
    step: Optional[int] = None
    staleness: Optional[int] = None
    lease_pos: Optional[int] = None
    lease_version: Optional[int] = None

    def staleness_at(self, policy_version: int) -> int:
        """How many versions ``policy_version`` is ahead of the group's (accepted or leased groups
        only: the version is set at acceptance)."""
        return policy_version - self._known("version", self.version)

    def lease_step(self) -> int:
        """The step a leased group is leased to."""
        return self._known("step", self.step)

    def _known(self, key: str, value: Optional[int]) -> int:
        if value is None:
            raise StateError(f"group {self.index} ({self.state}) has no {key!r}")
        return value

    def task_id(self, group_id: str) -> str:
        """The task id the group was submitted with (its body's), else the group id."""
        try:
            return str(self.body["tasks"][0]["task_id"])
        except (KeyError, IndexError, TypeError):
            return group_id

    def to_json(self) -> Dict[str, Any]:
        """The group's entry in ``state.json``: an optional key is written once it was set, and a
        group leased once keeps its four lease keys (``step`` and ``staleness`` null after a
        restart gave the lease back), as the file has always held them."""
        out: Dict[str, Any] = {"index": self.index, "stamp": self.stamp, "state": self.state, "body": self.body, "cancelled": self.cancelled}
        if self.version is not None:
            out["version"] = self.version
        leased_once = self.lease_pos is not None
        if self.step is not None or leased_once:
            out["step"] = self.step
        if self.staleness is not None or leased_once:
            out["staleness"] = self.staleness
        if leased_once:
            out["lease_pos"] = self.lease_pos
        if self.lease_version is not None:
            out["lease_version"] = self.lease_version
        return out

    @staticmethod
    def from_json(d: Any, group_id: str) -> "GroupRecord":
        if not isinstance(d, dict):
            raise StateError(f"groups[{group_id!r}] must be an object, got {d!r}")
        where = f"groups[{group_id!r}]: "
        state = _required(d, "state", str, where)
        if state not in GROUP_STATES:
            raise StateError(f"{where}'state' must be one of {', '.join(GROUP_STATES)}, got {state!r}")
        return GroupRecord(
            index=_required(d, "index", _NUMBER, where),
            stamp=_required(d, "stamp", _NUMBER, where),
            state=state,
            body=_required(d, "body", dict, where),
            cancelled=bool(d.get("cancelled", False)),
            version=_optional_number(d, "version", where),
            step=_optional_number(d, "step", where),
            staleness=_optional_number(d, "staleness", where),
            lease_pos=_optional_number(d, "lease_pos", where),
            lease_version=_optional_number(d, "lease_version", where),
        )


#: The counters that count by reason (the others are plain ints).
_BY_REASON = ("rejected", "dropped", "sessions", "staleness")


@dataclass
class Counters:
    """The run's counts since it started (``counters()`` reports them, a restart keeps them).

    Attributes:
        submitted, replayed: groups POSTed and created / POSTed again after a restart.
        accepted, consumed, early_stops: groups accepted / committed / cut short by the early stop.
        rejected, dropped: reason → groups (:mod:`polar_trainer.groups`; ``dropped`` also counts
            ``stale``).
        sessions: ``kind:reason`` → sessions of the judged groups.
        staleness: ``str(staleness)`` → groups leased at that staleness.
    """

    submitted: int = 0
    replayed: int = 0
    accepted: int = 0
    consumed: int = 0
    early_stops: int = 0
    rejected: Dict[str, int] = field(default_factory=dict)
    dropped: Dict[str, int] = field(default_factory=dict)
    sessions: Dict[str, int] = field(default_factory=dict)
    staleness: Dict[str, int] = field(default_factory=dict)

    def by_reason(self, outcome: str) -> Dict[str, int]:
        """The reason counts of a verdict's outcome: ``rejected`` or ``dropped``."""
        return {"rejected": self.rejected, "dropped": self.dropped}[outcome]

    def to_json(self) -> Dict[str, Any]:
        """Every count, the by-reason ones as new dicts (a snapshot the caller may keep)."""
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d: Any) -> "Counters":
        if not isinstance(d, dict):
            raise StateError(f"'counters' must be an object, got {d!r}")
        out = Counters()
        for f in dataclasses.fields(Counters):
            if f.name in d:  # a count the file lacks starts at 0
                kind = dict if f.name in _BY_REASON else _NUMBER
                setattr(out, f.name, _required(d, f.name, kind, "counters: "))
        return out


@dataclass
class AdmissionBase:
    """Where a run admitting by staleness started: its committed step and consumed groups then, so
    a resumed run's bound counts from there and not from step 0."""

    step: int
    consumed: int

    @staticmethod
    def from_json(d: Any) -> "AdmissionBase":
        if not isinstance(d, dict):
            raise StateError(f"'admission_base' must be an object, got {d!r}")
        return AdmissionBase(step=_required(d, "step", _NUMBER, "admission_base: "), consumed=_required(d, "consumed", _NUMBER, "admission_base: "))


@dataclass
class SchedulerState:
    """The whole of ``state.json`` (see the module doc).

    Attributes:
        run_id: the run the folder belongs to (another run's scheduler refuses it).
        next_index: the index of the next group to admit.
        policy_version: the current version (new groups are stamped with it).
        last_step: the highest step leased; committed_step: the highest step committed.
        groups: group id → record, in admission order.
        accepted_order: the accepted groups not yet leased, in acceptance order.
        tally: accepted groups by class (``groups.judge`` counts into it; the balance of
            all-correct groups reads it).
        counters: see :class:`Counters`.
        admission_base: set by the first admission decision by staleness; None before.
    """

    run_id: str
    next_index: int = 0
    policy_version: int = 0
    last_step: int = 0
    committed_step: int = 0
    groups: Dict[str, GroupRecord] = field(default_factory=dict)
    accepted_order: List[str] = field(default_factory=list)
    tally: SelectionTally = field(default_factory=SelectionTally)
    counters: Counters = field(default_factory=Counters)
    admission_base: Optional[AdmissionBase] = None

    def ids_in(self, state: str) -> List[str]:
        """The ids of the groups in ``state``, in admission order."""
        return [gid for gid, rec in self.groups.items() if rec.state == state]

    def count_in(self, *states: str) -> int:
        return sum(1 for rec in self.groups.values() if rec.state in states)

    def owned(self) -> int:
        """Groups in flight or accepted and not yet taken (what ``admission="in_flight"`` caps)."""
        return self.count_in("inflight", "accepted")

    def covered(self) -> int:
        """Groups trained, leased or owned: what the run's steps can take without new groups."""
        return self.counters.consumed + self.count_in("inflight", "accepted", "leased")

    def leased_to(self, step: int) -> List[str]:
        """The groups leased to ``step``, in their order in the step."""
        mine = sorted((rec.lease_pos, gid) for gid, rec in self.groups.items() if rec.state == "leased" and rec.step == step)
        return [gid for _, gid in mine]

    def next_step(self) -> int:
        """The lowest leased step (a trainer that crashed mid-step gets it back), else a new one."""
        leased = [rec.lease_step() for rec in self.groups.values() if rec.state == "leased"]
        return min(leased) if leased else max(self.last_step, self.committed_step) + 1

    def forget(self, group_id: str) -> None:
        """Removes a group (consumed, rejected or dropped) from the record and the queue."""
        self.groups.pop(group_id, None)
        if group_id in self.accepted_order:
            self.accepted_order.remove(group_id)

    def to_json(self) -> Dict[str, Any]:
        """The object ``state.json`` holds (without ``format``, which the store adds)."""
        out: Dict[str, Any] = {
            "run_id": self.run_id,
            "next_index": self.next_index,
            "policy_version": self.policy_version,
            "last_step": self.last_step,
            "committed_step": self.committed_step,
            "groups": {gid: rec.to_json() for gid, rec in self.groups.items()},
            "accepted_order": list(self.accepted_order),
            "tally": self.tally.to_dict(),
            "counters": self.counters.to_json(),
        }
        if self.admission_base is not None:
            out["admission_base"] = dataclasses.asdict(self.admission_base)
        return out

    @staticmethod
    def from_json(d: Dict[str, Any]) -> "SchedulerState":
        """The state of a loaded ``state.json``; a StateError names the first key that is wrong."""
        groups = _required(d, "groups", dict)
        base = d.get("admission_base")
        return SchedulerState(
            run_id=_required(d, "run_id", str),
            next_index=_required(d, "next_index", _NUMBER),
            policy_version=_required(d, "policy_version", _NUMBER),
            last_step=_required(d, "last_step", _NUMBER),
            committed_step=_required(d, "committed_step", _NUMBER),
            groups={gid: GroupRecord.from_json(rec, gid) for gid, rec in groups.items()},
            accepted_order=list(_required(d, "accepted_order", list)),
            tally=SelectionTally.from_dict(_required(d, "tally", dict)),
            counters=Counters.from_json(d.get("counters")),
            admission_base=None if base is None else AdmissionBase.from_json(base),
        )


def load_state(store: StateStore, run_id: str) -> SchedulerState:
    """The state saved in ``store`` (a fresh one for an empty folder).

    Raises:
        StateError: the folder belongs to another run, or its state file is not one the
            scheduler wrote.
    """
    saved = store.load()
    if saved is None:
        return SchedulerState(run_id=run_id)
    if saved.get("run_id") != run_id:
        raise StateError(f"{store.path} belongs to run '{saved.get('run_id')}', not '{run_id}'")
    try:
        return SchedulerState.from_json(saved)
    except StateError as e:
        raise StateError(f"{store.path}: {e}") from e
