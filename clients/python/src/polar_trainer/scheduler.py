"""The async group scheduler: keeps groups in flight while the trainer learns, bounds staleness,
judges groups, and survives a trainer restart without losing or repeating a group.

Rules (docs/training.md has the whole picture):

* one task per prompt, ``num_samples`` = ``group_size``; the group's batch id is
  ``{run_id}-g{index:06d}``;
* admission (``admission="in_flight"``, the default): at most ``rollout_batch_size ×
  max_async_level`` groups owned; ``"staleness"``: a new group is admitted while the groups
  trained, leased and owned (in flight, or accepted and not yet taken by a step) since the start
  are fewer than ``(steps committed + max_off_policy_steps + 1) × rollout_batch_size``, so it can
  still be trained within the bound. Either way there is no batch barrier; ``max_steps`` ends admission
  once the run's groups are covered;
* each group is stamped with the policy version at submission (task metadata
  ``policy_version``, ``rollout_step``, ``group_id``, and the task field ``min_policy_version``),
  and with ``engine_priority`` = −index (``engine_priority="oldest_first"``, the default), so
  engines that schedule by priority serve the oldest group's calls first;
* a training step takes ``rollout_batch_size`` accepted groups in acceptance order
  (``consume_order="oldest"``: the oldest version first);
  staleness = current version − the group's version (the OLDEST version of any trained token);
  a group staler than ``max_off_policy_steps`` is dropped (``stale``) and never trained on;
* steps are two-phase: :meth:`GroupScheduler.next_batch` leases groups to step S (durably), and
  :meth:`GroupScheduler.commit` marks them consumed once the step's effect is durable on the
  trainer's side. A trainer restarted with ``resume_step`` = the last step its checkpoint holds gets
  the groups of later steps offered again, in the same order.

Why one module of ~700 lines: every method here reads and writes the one durable state under one
condition variable (admission, the result workers, staleness drops, leases and commits see each
other's changes atomically); the parts without that state already live apart (``groups``,
``samples``, ``advantages``, ``state``, ``versions``, ``export``).

Example::

    with GroupScheduler(client, cfg, tasks, state_dir="ckpt/polar") as sched:
        for _ in range(steps):
            batch = sched.next_batch()
            train(batch.samples())
            sched.update_weights(push_weights)      # pause → push(version) → resume(version)
            save_checkpoint(step=batch.step)
            sched.commit(batch.step)
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Set, Union

from . import advantages
from .client import PolarClient
from .config import SchedulerConfig
from .errors import Conflict, NotFound, PolarError, RateLimited, SchedulerError, StateError
from .fence import FenceResult
from .groups import Group, SelectionTally, judge
from .samples import Sample, classify, policy_version_gap, trajectory_index_of
from .state import StateStore
from .versions import as_version

#: The largest magnitude of a task's ``engine_priority`` (the control plane's limit: a 32-bit integer).
ENGINE_PRIORITY_MAX = 2_147_483_647

log = logging.getLogger("polar_trainer.scheduler")

TaskSource = Union[Sequence[Dict[str, Any]], Callable[[int], Dict[str, Any]]]


class Exhausted(SchedulerError):
    """No more groups will come (``max_groups`` reached or the task source ended) and fewer than
    ``rollout_batch_size`` accepted groups are left."""


@dataclass
class TrainingBatch:
    """The groups of one training step (advantages already computed).

    Example::

        batch = sched.next_batch()
        for s in batch.samples(): loss += s.advantage * logp(s.tokens, s.loss_mask)
    """

    run_id: str
    step: int
    policy_version: int
    groups: List[Group]

    def samples(self, include_removed: bool = True) -> List[Sample]:
        """Every sample, group by group."""
        return [s for g in self.groups for s in g.samples(include_removed)]

    @property
    def group_ids(self) -> List[str]:
        return [g.group_id for g in self.groups]


def _task_problem(task: Any, group_size: int) -> Optional[str]:
    """What is wrong with a task spec for a group of ``group_size``, naming the field; None if fine."""
    if not isinstance(task, dict):
        return f"a task spec must be a dict, got {type(task).__name__}"
    for key in ("instruction", "agent"):
        if key not in task:
            return f"a task spec needs {key!r}"
    n = task.get("num_samples", group_size)
    if n != group_size:
        # Never silently resized: a group is one task of group_size sessions (the GRPO group).
        return f"num_samples is {n!r} but group_size is {group_size}: a group is one task of group_size sessions; set num_samples to {group_size} or leave it out"
    tid = task.get("task_id")
    if tid is not None and not isinstance(tid, str):
        return f"task_id must be a string, got {tid!r}"
    return None


def _task_id_of(rec: Dict[str, Any], gid: str) -> str:
    """The task id a stored group was submitted with (its body's), else the group id."""
    try:
        return str(rec["body"]["tasks"][0]["task_id"])
    except (KeyError, IndexError, TypeError):
        return gid


def _bump(counter: Dict[str, int], key: str, n: int = 1) -> None:
    counter[key] = counter.get(key, 0) + n


class GroupScheduler:
    """See the module doc. Thread-safe; the trainer calls it from one thread.

    Args:
        client: a :class:`PolarClient` with the trainer token.
        config: the :class:`SchedulerConfig`.
        tasks: a sequence of task specs (group ``i`` gets ``tasks[i % len(tasks)]``) or a callable
            ``index -> task spec`` (e.g. :func:`polar_trainer.load_task_file`'s list); a spec needs
            ``instruction`` and ``agent``. Its ``task_id`` is kept (it names the prompt in the
            results and the export; the group is named by its batch id, which is also the task id
            of a spec without one). ``num_samples`` must be left out or equal ``group_size``:
            anything else is refused with an error naming the field, never resized (a sequence
            is checked here, a callable's task when its group is admitted). The stamps in
            ``metadata`` and ``min_policy_version`` are set here. Each task is stored before it is
            submitted, so a restart resubmits exactly the same body.
        state_dir: the folder of the durable state (:mod:`polar_trainer.state`).
        resume_step: the last step the trainer's own checkpoint holds; leases of later steps are
            offered again. None: keep the saved leases (``next_batch()`` offers an uncommitted step
            again).
        policy_version: the current version, an int or a decimal string (None: the saved one,
            else 0).
        on_event: called with each audit event (a dict), from scheduler threads.

    Example::

        sched = GroupScheduler(client, cfg, [task_a, task_b], "ckpt/polar", resume_step=ckpt_step)
    """

    def __init__(
        self,
        client: PolarClient,
        config: SchedulerConfig,
        tasks: TaskSource,
        state_dir: str,
        resume_step: Optional[int] = None,
        policy_version: Optional[int] = None,
        on_event: Optional[Callable[[Dict[str, Any]], None]] = None,
    ) -> None:
        self.client = client
        self.cfg = config
        self._gcfg = config.groups
        self._tasks = tasks
        if isinstance(tasks, Sequence):
            if len(tasks) == 0:
                raise ValueError("tasks is empty")
            # Checked here, not when group i is admitted: a wrong task fails the constructor, not a
            # background thread minutes into a run.
            for i, task in enumerate(tasks):
                problem = _task_problem(task, config.group_size)
                if problem:
                    raise ValueError(f"tasks[{i}]: {problem}")
        self.store = StateStore(state_dir)
        self._on_event = on_event
        self.events: Deque[Dict[str, Any]] = deque(maxlen=10000)
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._fatal: Optional[BaseException] = None
        self._threads: List[threading.Thread] = []
        # Groups this process knows the control plane has (its POST answered, or results read).
        # Only these are cancelled by close(cancel_in_flight=True): cancelling an id the control
        # plane never saw leaves a tombstone (upstream's register_if_missing), so a restart could
        # neither submit the group nor read it.
        self._posted: Set[str] = set()
        self._groups: Dict[str, Group] = {}
        self._results: Dict[str, Dict[int, Any]] = {}
        self._exhausted = False
        self._unusable = 0
        self._started = False
        self._stamp_min: Optional[bool] = config.stamp_min_policy_version
        self._stamp_priority: Optional[bool] = None if config.engine_priority == "oldest_first" else False
        self._recover(policy_version, resume_step)

    # -- state -----------------------------------------------------------------------------------

    def _fresh_state(self) -> Dict[str, Any]:
        return {
            "run_id": self.cfg.run_id,
            "next_index": 0,
            "policy_version": 0,
            "last_step": 0,
            "committed_step": 0,
            "groups": {},
            "accepted_order": [],
            "tally": SelectionTally().to_dict(),
            "counters": {"submitted": 0, "replayed": 0, "accepted": 0, "consumed": 0, "early_stops": 0, "rejected": {}, "dropped": {}, "sessions": {}, "staleness": {}},
        }

    def _save(self) -> None:
        self.store.save(self._state)

    def _audit(self, event: str, **fields: Any) -> None:
        e = {"event": event, "t": time.time(), **fields}
        self.store.audit(e)
        self.events.append(e)
        if self._on_event:
            try:
                self._on_event(e)
            except Exception:  # an observer must not break the scheduler
                log.exception("on_event raised")

    def _recover(self, policy_version: Optional[int], resume_step: Optional[int]) -> None:
        state = self.store.load()
        if state is None:
            state = self._fresh_state()
        elif state.get("run_id") != self.cfg.run_id:
            raise StateError(f"{self.store.path} belongs to run '{state.get('run_id')}', not '{self.cfg.run_id}'")
        self._state = state
        self._tally = SelectionTally.from_dict(state["tally"])
        if policy_version is not None:
            state["policy_version"] = as_version(policy_version, "policy_version")
        for gid, rec in list(state["groups"].items()):
            g = Group(group_id=gid, index=rec["index"], stamp=rec["stamp"], task_id=_task_id_of(rec, gid))
            g.staleness, g.step = rec.get("staleness"), rec.get("step")
            spooled = self.store.spool_read(gid)
            self._groups[gid] = g
            self._results[gid] = {}
            for seq, result in spooled:
                self._add(gid, seq, result)
            if rec["state"] != "inflight" and len(self._results[gid]) < self.cfg.group_size:
                # A finished group always has group_size results; re-read the rest from the server.
                rec["state"] = "inflight"
                if gid in state["accepted_order"]:
                    state["accepted_order"].remove(gid)
        if resume_step is not None:
            self._resume_at(int(resume_step))
        self._save()

    def _resume_at(self, step: int) -> None:
        st = self._state
        leased = sorted(((r["step"], r["lease_pos"], gid) for gid, r in st["groups"].items() if r["state"] == "leased"))
        back = []
        for s, _, gid in leased:
            if s <= step:
                self._consume(gid)
            else:
                back.append(gid)
                st["groups"][gid].update(state="accepted", step=None, staleness=None)
                self._groups[gid].step = self._groups[gid].staleness = None
        st["accepted_order"] = back + [g for g in st["accepted_order"] if g not in back]
        st["committed_step"] = step
        st["last_step"] = step

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> "GroupScheduler":
        """Starts admission (and the readers of groups recovered in flight). Idempotent."""
        with self._lock:
            if self._started:
                return self
            self._started = True
        if self._stamp_min is None:
            try:
                self._stamp_min = self.client.supports_task_field("min_policy_version")
            except PolarError as e:
                log.warning("cannot read the server's schema (%s): not setting min_policy_version", e)
                self._stamp_min = False
            if not self._stamp_min:
                log.warning("the control plane has no task field min_policy_version: groups are stamped in metadata only")
        if self._stamp_priority is None:
            try:
                self._stamp_priority = self.client.supports_task_field("engine_priority")
            except PolarError as e:
                log.warning("cannot read the server's schema (%s): not setting engine_priority", e)
                self._stamp_priority = False
            if not self._stamp_priority:
                log.warning("the control plane has no task field engine_priority: groups are not prioritised at the engine")
        if self.cfg.sync_fence_version:
            self._sync_fence_version()
        t = threading.Thread(target=self._guard, args=(self._pump,), name="polar-admit", daemon=True)
        self._threads.append(t)
        t.start()
        return self

    def _sync_fence_version(self) -> None:
        """Sets the queue's fence to the scheduler's version when it differs. The fence labels
        every turn with ITS version and a group's version is read from those labels, so a queue
        left at another run's (or an older checkpoint's) version would make groups look newer or
        staler than they are. A control plane without the fence routes (404) only gets a warning."""
        queue = self.cfg.queue or "default"
        mine = str(self.policy_version)
        try:
            theirs = self.client.fence_status(queue).fence.policy_version
            if theirs != mine:
                self.client.set_policy_version(queue, mine)
                self._audit("fence_version", queue=queue, policy_version=mine, was=theirs)
        except NotFound as e:
            log.warning("the control plane has no fence routes (%s): turns are not labelled with policy versions", e)
        except PolarError as e:
            raise SchedulerError(f"cannot set the policy version of queue '{queue}' to {mine}: {e}") from e

    def close(self, cancel_in_flight: bool = False) -> None:
        """Stops admission and the readers (the state stays valid for a restart). With
        ``cancel_in_flight`` the batches of groups in flight are cancelled too (those whose POST
        the control plane answered; one never posted is left for a restart to submit); a scheduler
        restarted on the same state then reads their CANCELLED sessions (excluded, the group
        rejected and counted) instead of resubmitting them.

        Example::

            sched.close()
        """
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
            # A group whose POST has not been answered is left alone: a restart submits it.
            inflight = [gid for gid, r in self._state["groups"].items() if r["state"] == "inflight" and gid in self._posted]
        for t in list(self._threads):
            t.join(timeout=self.cfg.poll_wait_seconds + 10)
        if cancel_in_flight:
            cancelled = []
            for gid in inflight:
                try:
                    self.client.cancel(gid)
                    cancelled.append(gid)
                except NotFound:
                    pass  # gone from the control plane: a restart submits it
                except PolarError as e:
                    log.warning("cancel %s: %s", gid, e)
            with self._lock:
                # A restart reads these groups' CANCELLED results (excluded sessions) and never
                # resubmits them: the control plane refuses a cancelled batch id (409).
                for gid in cancelled:
                    if gid in self._state["groups"]:
                        self._state["groups"][gid]["cancelled"] = True
                if cancelled:
                    self._save()

    def __enter__(self) -> "GroupScheduler":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _guard(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except BaseException as e:  # re-raised in the trainer's thread by the next call
            log.exception("scheduler thread failed")
            with self._cond:
                if self._fatal is None:
                    self._fatal = e
                self._cond.notify_all()

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            if isinstance(self._fatal, SchedulerError):
                raise self._fatal
            raise SchedulerError(f"scheduler thread failed: {type(self._fatal).__name__}: {self._fatal}") from self._fatal

    # -- admission -------------------------------------------------------------------------------

    def _owned(self) -> int:
        return sum(1 for r in self._state["groups"].values() if r["state"] in ("inflight", "accepted"))

    def _can_admit(self) -> bool:
        st = self._state
        if self._exhausted or self._fatal is not None:
            return False
        if self.cfg.max_groups is not None and st["next_index"] >= self.cfg.max_groups:
            return False
        if self.cfg.max_steps is not None and self._covered() >= self.cfg.max_steps * self.cfg.rollout_batch_size:
            return False
        if self.cfg.admission == "staleness":
            # AReaL's rule by steps: groups trained, leased and owned < (steps committed + bound + 1)
            # × B, so a group admitted now is taken by one of the next bound + 1 steps when steps
            # take the oldest first: at most `bound` updates behind with one update a step, fewer
            # with an update every k steps. Steps, not versions: versions that move every k steps
            # would starve admission. Counted from the run's start (a resumed run is not ahead).
            base = st.setdefault("admission_base", {"step": st["committed_step"], "consumed": st["counters"]["consumed"]})
            used = self._covered() - base["consumed"]
            return used < (st["committed_step"] - base["step"] + self.cfg.max_off_policy_steps + 1) * self.cfg.rollout_batch_size
        return self._owned() < self.cfg.max_in_flight

    def _covered(self) -> int:
        """Groups trained, leased or owned: what the run's steps can take without new groups."""
        st = self._state
        return st["counters"]["consumed"] + sum(1 for r in st["groups"].values() if r["state"] in ("inflight", "accepted", "leased"))

    def _task_for(self, index: int) -> Optional[Dict[str, Any]]:
        src = self._tasks
        try:
            task = src[index % len(src)] if isinstance(src, Sequence) else src(index)
        except (IndexError, StopIteration):
            return None
        return task  # checked by _body (_task_problem), which names the field

    def _body(self, gid: str, index: int, task: Dict[str, Any]) -> Dict[str, Any]:
        st = self._state
        problem = _task_problem(task, self.cfg.group_size)
        if problem:
            raise SchedulerError(f"task {index}: {problem}")
        spec = dict(task)
        # The trainer's own task_id names the prompt in results and the export; the group is named
        # by the batch id. Without one, the task is named like its group.
        spec.setdefault("task_id", gid)
        spec["num_samples"] = self.cfg.group_size
        stamp = st["policy_version"]
        spec["metadata"] = {**(task.get("metadata") or {}), "run_id": self.cfg.run_id, "group_id": gid, "group_index": index, "policy_version": stamp, "rollout_step": st["last_step"]}
        if self._stamp_min:
            spec["min_policy_version"] = stamp
        if self._stamp_priority:
            # Oldest group first at the engine; the field is a 32-bit integer.
            spec.setdefault("engine_priority", -min(index, ENGINE_PRIORITY_MAX))
        early = self._gcfg.early_stop_min_usable_sessions
        if early is not None:
            spec.setdefault("early_stop_min_usable_sessions", early)
        body: Dict[str, Any] = {"batch_id": gid, "tasks": [spec]}
        if self.cfg.queue:
            body["queue"] = self.cfg.queue
        return body

    def _pump(self) -> None:
        with self._lock:
            recovered = sorted((r["index"], gid) for gid, r in self._state["groups"].items() if r["state"] == "inflight")
        for _, gid in recovered:
            self._launch(gid, replay=True)
        while not self._stop.is_set():
            with self._cond:
                while not self._stop.is_set() and not self._can_admit():
                    self._cond.wait(1.0)
                if self._stop.is_set():
                    return
                st = self._state
                index = st["next_index"]
                task = self._task_for(index)
                if task is None:
                    self._exhausted = True
                    self._cond.notify_all()
                    continue
                gid = self.cfg.group_id(index)
                body = self._body(gid, index, task)
                # Written ahead: a crash after the POST resubmits this very body (an idempotent replay).
                st["groups"][gid] = {"index": index, "stamp": st["policy_version"], "state": "inflight", "body": body, "cancelled": False}
                st["next_index"] = index + 1
                self._groups[gid] = Group(group_id=gid, index=index, stamp=st["policy_version"], task_id=body["tasks"][0]["task_id"])
                self._results[gid] = {}
                self._save()
            self._launch(gid, replay=False)

    def _launch(self, gid: str, replay: bool) -> None:
        with self._lock:
            rec = self._state["groups"][gid]
            has_results = bool(self._results.get(gid))
        if replay and has_results:
            with self._lock:
                self._posted.add(gid)
        if not (replay and (has_results or rec.get("cancelled"))):
            created = self._submit(gid, rec["body"])
            if created is None:
                return
            with self._lock:
                self._posted.add(gid)
                _bump(self._state["counters"], "submitted" if created else "replayed")
                self._audit("submit", group_id=gid, index=rec["index"], created=created, stamp=rec["stamp"])
        t = threading.Thread(target=self._guard, args=(self._read, gid), name=f"polar-read-{gid}", daemon=True)
        self._threads.append(t)
        t.start()

    def _submit(self, gid: str, body: Dict[str, Any]) -> Optional[bool]:
        delay = 1.0
        while not self._stop.is_set():
            try:
                return bool(self.client.submit(body).get("created", True))
            except RateLimited as e:
                self._stop.wait(min(e.retry_after or delay, 30))
            except Conflict as e:
                if self._cancelled_on_server(gid):
                    # Cancelled by hand (or by a close that died before it saved): its sessions
                    # come back CANCELLED, excluded, and the group is judged like any other.
                    log.warning("group %s was cancelled on the control plane; reading its results", gid)
                    with self._lock:
                        self._state["groups"][gid]["cancelled"] = True
                        self._save()
                    return False
                raise SchedulerError(f"submit of group {gid} refused: {e}") from e
            except PolarError as e:
                if not e.transient:
                    raise SchedulerError(f"submit of group {gid} refused: {e}") from e
                log.warning("submit of %s failed (%s); retrying in %.0f s", gid, e, delay)
                self._stop.wait(delay)
            delay = min(delay * 2, 30)
        return None

    def _cancelled_on_server(self, gid: str) -> bool:
        try:
            return self.client.status(gid).get("cancelled_at") is not None
        except PolarError:
            return False

    # -- results ---------------------------------------------------------------------------------

    def _add(self, gid: str, seq: int, result: Dict[str, Any]) -> None:
        """Records one result of a group (under the lock)."""
        if seq in self._results[gid]:
            return
        self._results[gid][seq] = result
        g = self._groups[gid]
        idx = trajectory_index_of(str(result.get("session_id", "")), len(g.sessions))
        o = classify(result, trajectory_index=idx, group_id=gid, group_index=g.index, max_tokens=self.cfg.max_trajectory_tokens, reward_fn=self.cfg.reward_fn)
        g.sessions.append(o)
        g.sessions.sort(key=lambda x: x.trajectory_index)

    def _read(self, gid: str) -> None:
        failures = 0
        while not self._stop.is_set():
            with self._lock:
                cursor = max(self._results[gid], default=0)
            try:
                if self.cfg.results_transport == "sse":
                    it = self.client.stream_results(gid, after=cursor, stop=self._stop.is_set)
                else:
                    it = self.client.iter_results(gid, after=cursor, wait=self.cfg.poll_wait_seconds, stop=self._stop.is_set)
                for seq, result in it:
                    self.store.spool_append(gid, seq, result)
                    with self._cond:
                        self._add(gid, seq, result)
                        self._check_version_gap(gid, result)
                        cancel = self._early_stop_due(gid)
                    if cancel:
                        self._early_stop(gid)
                    failures = 0
            except PolarError as e:
                if not e.transient:
                    raise SchedulerError(f"results of group {gid}: {e}") from e
                failures += 1
                log.warning("results of %s: %s (retry %d)", gid, e, failures)
                self._stop.wait(min(2**failures, 30))
                continue
            if self._stop.is_set():
                return
            with self._cond:
                self._finalize(gid)
            return

    def _early_stop_due(self, gid: str) -> bool:
        need = self._gcfg.early_stop_min_usable_sessions
        rec = self._state["groups"][gid]
        if need is None or rec.get("cancelled") or len(self._results[gid]) >= self.cfg.group_size:
            return False
        usable = sum(1 for o in self._groups[gid].sessions if o.kind == "trainable")
        if usable < need:
            return False
        rec["cancelled"] = True
        _bump(self._state["counters"], "early_stops")
        self._save()
        self._audit("early_stop", group_id=gid, usable=usable, threshold=need)
        return True

    def _early_stop(self, gid: str) -> None:
        # Enough usable sessions: the stragglers are cancelled and arrive as CANCELLED (excluded).
        try:
            self.client.cancel_task(gid, self._groups[gid].task_id if gid in self._groups else gid)
        except PolarError as e:
            log.warning("early stop of %s: cancel failed: %s", gid, e)

    def _finalize(self, gid: str) -> None:
        st = self._state
        rec = st["groups"][gid]
        g = self._groups[gid]
        for o in g.sessions:
            _bump(st["counters"]["sessions"], f"{o.kind}:{o.reason}")
        if g.trainable:
            self._unusable = 0
        verdict = judge(g, self._gcfg, self._tally)
        st["tally"] = self._tally.to_dict()
        if verdict.accepted:
            rec.update(state="accepted", version=g.version)
            st["accepted_order"].append(gid)
            _bump(st["counters"], "accepted")
            self._audit("accept", group_id=gid, index=rec["index"], version=g.version, counts=g.counts())
        else:
            _bump(st["counters"][verdict.outcome], verdict.reason or "unknown")
            self._check_unusable(g)
            self._forget(gid)
            self._audit({"rejected": "reject", "dropped": "drop"}[verdict.outcome], group_id=gid, index=rec["index"], reason=verdict.reason, counts=g.counts())
        self._save()
        self._cond.notify_all()

    def _check_version_gap(self, gid: str, result: Dict[str, Any]) -> None:
        # No engine reached the group's version: every later group would wait and fail the same
        # way, so the trainer hears of it at once (from a live result, not a spooled one replayed
        # at restart, when the engines may have been fixed).
        gap = policy_version_gap(result)
        if gap is None or self._fatal is not None:
            return
        g = self._groups[gid]
        self._fatal = SchedulerError(
            f"group {gid} (policy version {g.stamp}): session {result.get('session_id')} found no engine at its version in time: {gap}"
            " (the update must leave every engine reporting the version: engines.update_weights_from_disk or set_weight_version)"
        )
        self._cond.notify_all()

    def _check_unusable(self, g: Group) -> None:
        if g.trainable:
            return
        self._unusable += 1
        if self._unusable >= self.cfg.max_unusable_groups and self._fatal is None:
            reasons: Dict[str, int] = {}
            for o in g.sessions:
                _bump(reasons, o.reason)
            errors = [str((r.get("error") or {}).get("message", ""))[:300] for r in self._results.get(g.group_id, {}).values() if r.get("error")]
            self._fatal = SchedulerError(
                f"{self._unusable} groups in a row had no trainable session (last: {g.group_id}, sessions {reasons}"
                + (f", e.g. {errors[0]!r}" if errors else "")
                + "): the task cannot work as configured"
            )

    def _forget(self, gid: str) -> None:
        self._state["groups"].pop(gid, None)
        if gid in self._state["accepted_order"]:
            self._state["accepted_order"].remove(gid)
        self._groups.pop(gid, None)
        self._results.pop(gid, None)
        self.store.spool_delete(gid)

    def _consume(self, gid: str) -> None:
        _bump(self._state["counters"], "consumed")
        self._audit("consume", group_id=gid, index=self._state["groups"][gid]["index"], step=self._state["groups"][gid].get("step"))
        self._forget(gid)

    # -- training side ---------------------------------------------------------------------------

    @property
    def policy_version(self) -> int:
        """The current policy version (an int; the fence stores it as a decimal string)."""
        return int(self._state["policy_version"])

    def set_policy_version(self, version: Union[int, str]) -> None:
        """Sets the current version (an int or a decimal string): new groups are stamped with it,
        and queued groups now too stale are dropped. The fence's version is not touched.

        Example::

            sched.set_policy_version(ckpt["version"])
        """
        version = as_version(version, "version")
        with self._cond:
            self._state["policy_version"] = version
            self._drop_stale()
            self._save()
            self._cond.notify_all()

    def _drop_stale(self) -> None:
        v = self._state["policy_version"]
        for gid in list(self._state["accepted_order"]):
            rec = self._state["groups"][gid]
            if v - rec["version"] > self.cfg.max_off_policy_steps:
                _bump(self._state["counters"]["dropped"], "stale")
                self._audit("drop", group_id=gid, index=rec["index"], reason="stale", staleness=v - rec["version"])
                self._forget(gid)

    def _next_step(self) -> int:
        st = self._state
        leased = [r["step"] for r in st["groups"].values() if r["state"] == "leased"]
        return min(leased) if leased else max(st["last_step"], st["committed_step"]) + 1

    def next_batch(self, step: Optional[int] = None, timeout: Optional[float] = None) -> TrainingBatch:
        """Blocks until ``rollout_batch_size`` accepted, fresh-enough groups are ready; leases them
        to ``step`` (default: the next step) durably and returns them with advantages.

        Asking again for a step that is leased and not committed returns the same groups (a
        trainer that crashed mid-step gets its step back).

        Raises:
            Exhausted: no more groups will come (``max_groups`` reached or the task source ended);
            SchedulerError: a worker failed, ``max_unusable_groups`` groups in a row had no
            trainable session, or (at once) a session ended because no engine reported its
            group's ``min_policy_version`` in time, naming the group and both versions; TimeoutError (the built-in): ``timeout`` seconds passed with fewer
            groups ready (nothing is leased; call again to keep waiting).

        Example::

            batch = sched.next_batch()
        """
        if not self._started:
            self.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._raise_fatal()
            st = self._state
            if step is None:
                step = self._next_step()
            mine = sorted((r["lease_pos"], gid) for gid, r in st["groups"].items() if r["state"] == "leased" and r["step"] == step)
            if mine:
                return self._batch(step, [gid for _, gid in mine])
            if step <= st["committed_step"]:
                raise ValueError(f"step {step} is already committed (committed_step {st['committed_step']})")
            last_progress = time.monotonic()
            seen = len(st["accepted_order"])
            while True:
                self._drop_stale()
                if len(st["accepted_order"]) >= self.cfg.rollout_batch_size:
                    break
                if self._exhausted_now():
                    raise Exhausted(f"no more groups: {len(st['accepted_order'])} accepted left, {self.cfg.rollout_batch_size} needed")
                wait = 5.0 if deadline is None else min(5.0, deadline - time.monotonic())
                if wait <= 0:
                    raise TimeoutError(f"step {step}: {len(st['accepted_order'])} of {self.cfg.rollout_batch_size} groups after {timeout} s")
                self._cond.wait(wait)
                self._raise_fatal()
                if len(st["accepted_order"]) != seen:
                    seen, last_progress = len(st["accepted_order"]), time.monotonic()
                elif time.monotonic() - last_progress > 60:
                    log.warning("step %d waits: %s", step, self.counters())
                    last_progress = time.monotonic()
            order = st["accepted_order"]
            if self.cfg.consume_order == "oldest":
                order = sorted(order, key=lambda gid: (st["groups"][gid]["version"], st["groups"][gid]["index"]))
            take = order[: self.cfg.rollout_batch_size]
            st["accepted_order"] = [gid for gid in st["accepted_order"] if gid not in take]
            v = st["policy_version"]
            for pos, gid in enumerate(take):
                rec = st["groups"][gid]
                staleness = v - rec["version"]
                rec.update(state="leased", step=step, staleness=staleness, lease_pos=pos, lease_version=v)
                g = self._groups[gid]
                g.step, g.staleness = step, staleness
                _bump(st["counters"]["staleness"], str(staleness))
                self._audit("lease", group_id=gid, index=rec["index"], step=step, staleness=staleness)
            st["last_step"] = max(st["last_step"], step)
            self._save()
            self._cond.notify_all()  # owned slots were freed: admit more
            return self._batch(step, take)

    def _exhausted_now(self) -> bool:
        st = self._state
        done_admitting = (
            self._exhausted
            or (self.cfg.max_groups is not None and st["next_index"] >= self.cfg.max_groups)
            or (self.cfg.max_steps is not None and self._covered() >= self.cfg.max_steps * self.cfg.rollout_batch_size)
        )
        inflight = any(r["state"] == "inflight" for r in st["groups"].values())
        return done_admitting and not inflight

    def _batch(self, step: int, gids: List[str]) -> TrainingBatch:
        groups = [self._groups[g] for g in gids]
        for g in groups:
            advantages.apply(g, self.cfg.advantage, self.cfg.normalize_std)
        version = self._state["groups"][gids[0]].get("lease_version", self.policy_version)
        return TrainingBatch(run_id=self.cfg.run_id, step=step, policy_version=version, groups=groups)

    def commit(self, step: int) -> None:
        """Marks the groups of every leased step up to ``step`` consumed (call it once the step's
        effect is durable: your checkpoint holds it). They are never offered again.

        Example::

            save_checkpoint(step=batch.step); sched.commit(batch.step)
        """
        with self._cond:
            st = self._state
            for gid, rec in list(st["groups"].items()):
                if rec["state"] == "leased" and rec["step"] <= step:
                    self._consume(gid)
            st["committed_step"] = max(st["committed_step"], step)
            self._audit("commit", step=step)
            self._save()
            self._cond.notify_all()

    def update_weights(
        self,
        update: Callable[[str], Any],
        version: Optional[int] = None,
        mode: str = "drain",
        timeout_seconds: float = 300,
        allow_not_drained: bool = False,
    ) -> FenceResult:
        """The fence around the trainer's own update on this run's queue: pause → ``update(v)`` →
        resume with ``v`` (default: current + 1), then the scheduler's version becomes ``v``.

        ``version`` is an int or a decimal string; ``update`` is called with the decimal string
        (``"4"``), and must leave every engine reporting it (:mod:`polar_trainer.engines`).

        Returns:
            The resume's :class:`~polar_trainer.fence.FenceResult`: ``fence`` (the stored state,
            ``policy_version == "4"``), ``ok``, ``nodes`` (each gateway's ack) and ``raw`` (the
            route's JSON answer as received).

        Raises:
            FenceError: ``not_drained``, ``update_failed`` or ``resume_failed`` (``still_paused``
                says whether the queue is still paused); the scheduler's version is then unchanged.
            PolarError: the pause itself was refused.

        Example::

            sched.update_weights(lambda v: engine.update_weights_from_disk(path, weight_version=v))
        """
        new = self.policy_version + 1 if version is None else as_version(version, "version")
        result = self.client.weight_update(self.cfg.queue or "default", new, update, mode, timeout_seconds, allow_not_drained)
        self.set_policy_version(new)
        return result

    def counters(self) -> Dict[str, Any]:
        """A snapshot for logs and benchmarks (a new dict each call). Its keys, always all present:

        * ints: ``submitted`` (groups POSTed and created), ``replayed`` (POSTed again after a
          restart: ``created: false``), ``accepted``, ``consumed`` (committed), ``early_stops``,
          ``policy_version``, ``step`` (the last step leased), ``committed_step``, ``next_index``
          (the next group's index), ``in_flight``, ``queued`` (accepted, not yet leased),
          ``leased``;
        * dicts: ``rejected`` and ``dropped`` (reason → groups), ``sessions`` (``kind:reason`` →
          sessions), ``staleness`` (str(staleness) → trained groups), ``tally`` (accepted groups by
          class: ``mixed``, ``all_correct``, ``all_wrong``).

        Example::

            c = sched.counters(); print(c["dropped"].get("stale", 0), c["staleness"])
        """
        with self._lock:
            st = self._state
            states = [r["state"] for r in st["groups"].values()]
            c = st["counters"]
            return {
                **{k: (dict(v) if isinstance(v, dict) else v) for k, v in c.items()},
                "policy_version": st["policy_version"],
                "step": st["last_step"],
                "committed_step": st["committed_step"],
                "next_index": st["next_index"],
                "in_flight": states.count("inflight"),
                "queued": states.count("accepted"),
                "leased": states.count("leased"),
                "tally": dict(st["tally"]),
            }
