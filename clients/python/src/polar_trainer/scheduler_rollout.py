"""The rollout side of the group scheduler: admits groups, submits them, reads their results and
judges them, in the scheduler's own threads (``polar-admit``, and one ``polar-read-<group>`` per
group). :class:`~polar_trainer.scheduler.GroupScheduler` is this class plus the trainer's side
(leases, commits, the weight update, counters); the module doc of :mod:`polar_trainer.scheduler`
states the rules.

One lock for everything both sides touch: ``self._cond`` (a condition variable over the re-entrant
``self._lock``) guards the durable state (``self._state``, a
:class:`~polar_trainer.scheduler_state.SchedulerState`), the in-memory groups and results, the
posted set and the fatal error. Admission, the result readers, staleness drops, leases and commits
each change several of these at once, and each change is saved whole; with one lock every thread
sees the others' changes whole, and ``notify_all`` wakes whoever waits on them (admission for a
free slot, ``next_batch`` for accepted groups). Network calls and result spooling happen outside it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Set, Union

from .client import PolarClient
from .config import SchedulerConfig
from .errors import Conflict, PolarError, RateLimited, SchedulerError
from .groups import Group, judge
from .samples import classify, policy_version_gap, trajectory_index_of
from .scheduler_state import AdmissionBase, GroupRecord, bump, load_state
from .state import StateStore

#: The largest magnitude of a task's ``engine_priority`` (the control plane's limit: a 32-bit integer).
ENGINE_PRIORITY_MAX = 2_147_483_647

# The scheduler's one logger, whichever of its modules logs.
log = logging.getLogger("polar_trainer.scheduler")

TaskSource = Union[Sequence[Dict[str, Any]], Callable[[int], Dict[str, Any]]]


def task_problem(task: Any, group_size: int) -> Optional[str]:
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


class GroupRollouts:
    """The state both sides of the scheduler share and the threads that keep groups rolling out
    (see the module doc). Built by :class:`~polar_trainer.scheduler.GroupScheduler`, which checks
    the tasks first and then recovers the groups the loaded state holds."""

    def __init__(
        self,
        client: PolarClient,
        config: SchedulerConfig,
        tasks: TaskSource,
        state_dir: str,
        on_event: Optional[Callable[[Dict[str, Any]], None]] = None,
    ) -> None:
        self.client = client
        self.cfg = config
        self._gcfg = config.groups
        self._tasks = tasks
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
        # In memory only, rebuilt from the state and the spools by _recover_groups.
        self._groups: Dict[str, Group] = {}
        self._results: Dict[str, Dict[int, Any]] = {}
        self._exhausted = False
        self._unusable = 0
        self._started = False
        self._stamp_min: Optional[bool] = config.stamp_min_policy_version
        self._stamp_priority: Optional[bool] = None if config.engine_priority == "oldest_first" else False
        self._state = load_state(self.store, config.run_id)

    # -- state -----------------------------------------------------------------------------------

    def _save(self) -> None:
        self.store.save(self._state.to_json())

    def _audit(self, event: str, **fields: Any) -> None:
        e = {"event": event, "t": time.time(), **fields}
        self.store.audit(e)
        self.events.append(e)
        if self._on_event:
            try:
                self._on_event(e)
            except Exception:  # an observer must not break the scheduler
                log.exception("on_event raised")

    def _recover_groups(self) -> None:
        """Rebuilds the in-memory groups from the loaded state and their result spools."""
        state = self._state
        for gid, rec in list(state.groups.items()):
            g = Group(group_id=gid, index=rec.index, stamp=rec.stamp, task_id=rec.task_id(gid))
            g.staleness, g.step = rec.staleness, rec.step
            spooled = self.store.spool_read(gid)
            self._groups[gid] = g
            self._results[gid] = {}
            for seq, result in spooled:
                self._add(gid, seq, result)
            if rec.state != "inflight" and len(self._results[gid]) < self.cfg.group_size:
                # A finished group always has group_size results; re-read the rest from the server.
                rec.state = "inflight"
                if gid in state.accepted_order:
                    state.accepted_order.remove(gid)

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

    def _can_admit(self) -> bool:
        st = self._state
        if self._exhausted or self._fatal is not None:
            return False
        if self.cfg.max_groups is not None and st.next_index >= self.cfg.max_groups:
            return False
        if self.cfg.max_steps is not None and st.covered() >= self.cfg.max_steps * self.cfg.rollout_batch_size:
            return False
        if self.cfg.admission == "staleness":
            # AReaL's rule by steps: groups trained, leased and owned < (steps committed + bound + 1)
            # × B, so a group admitted now is taken by one of the next bound + 1 steps when steps
            # take the oldest first: at most `bound` updates behind with one update a step, fewer
            # with an update every k steps. Steps, not versions: versions that move every k steps
            # would starve admission. Counted from the run's start (a resumed run is not ahead).
            if st.admission_base is None:
                st.admission_base = AdmissionBase(step=st.committed_step, consumed=st.counters.consumed)
            base = st.admission_base
            used = st.covered() - base.consumed
            return used < (st.committed_step - base.step + self.cfg.max_off_policy_steps + 1) * self.cfg.rollout_batch_size
        return st.owned() < self.cfg.max_in_flight

    def _task_for(self, index: int) -> Optional[Dict[str, Any]]:
        src = self._tasks
        try:
            task = src[index % len(src)] if isinstance(src, Sequence) else src(index)
        except (IndexError, StopIteration):
            return None
        return task  # checked by _body (task_problem), which names the field

    def _body(self, gid: str, index: int, task: Dict[str, Any]) -> Dict[str, Any]:
        st = self._state
        problem = task_problem(task, self.cfg.group_size)
        if problem:
            raise SchedulerError(f"task {index}: {problem}")
        spec = dict(task)
        # The trainer's own task_id names the prompt in results and the export; the group is named
        # by the batch id. Without one, the task is named like its group.
        spec.setdefault("task_id", gid)
        spec["num_samples"] = self.cfg.group_size
        stamp = st.policy_version
        spec["metadata"] = {**(task.get("metadata") or {}), "run_id": self.cfg.run_id, "group_id": gid, "group_index": index, "policy_version": stamp, "rollout_step": st.last_step}
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
            recovered = sorted((rec.index, gid) for gid, rec in self._state.groups.items() if rec.state == "inflight")
        for _, gid in recovered:
            self._launch(gid, replay=True)
        while not self._stop.is_set():
            with self._cond:
                while not self._stop.is_set() and not self._can_admit():
                    self._cond.wait(1.0)
                if self._stop.is_set():
                    return
                st = self._state
                index = st.next_index
                task = self._task_for(index)
                if task is None:
                    self._exhausted = True
                    self._cond.notify_all()
                    continue
                gid = self.cfg.group_id(index)
                body = self._body(gid, index, task)
                # Written ahead: a crash after the POST resubmits this very body (an idempotent replay).
                st.groups[gid] = GroupRecord(index=index, stamp=st.policy_version, state="inflight", body=body, cancelled=False)
                st.next_index = index + 1
                self._groups[gid] = Group(group_id=gid, index=index, stamp=st.policy_version, task_id=body["tasks"][0]["task_id"])
                self._results[gid] = {}
                self._save()
            self._launch(gid, replay=False)

    def _launch(self, gid: str, replay: bool) -> None:
        with self._lock:
            rec = self._state.groups[gid]
            has_results = bool(self._results.get(gid))
        if replay and has_results:
            with self._lock:
                self._posted.add(gid)
        if not (replay and (has_results or rec.cancelled)):
            created = self._submit(gid, rec.body)
            if created is None:
                return
            with self._lock:
                self._posted.add(gid)
                if created:
                    self._state.counters.submitted += 1
                else:
                    self._state.counters.replayed += 1
                self._audit("submit", group_id=gid, index=rec.index, created=created, stamp=rec.stamp)
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
                        self._state.groups[gid].cancelled = True
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
        rec = self._state.groups[gid]
        if need is None or rec.cancelled or len(self._results[gid]) >= self.cfg.group_size:
            return False
        usable = sum(1 for o in self._groups[gid].sessions if o.kind == "trainable")
        if usable < need:
            return False
        rec.cancelled = True
        self._state.counters.early_stops += 1
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
        rec = st.groups[gid]
        g = self._groups[gid]
        for o in g.sessions:
            bump(st.counters.sessions, f"{o.kind}:{o.reason}")
        if g.trainable:
            self._unusable = 0
        verdict = judge(g, self._gcfg, st.tally)
        if verdict.accepted:
            rec.state, rec.version = "accepted", g.version
            st.accepted_order.append(gid)
            st.counters.accepted += 1
            self._audit("accept", group_id=gid, index=rec.index, version=g.version, counts=g.counts())
        else:
            bump(st.counters.by_reason(verdict.outcome), verdict.reason or "unknown")
            self._check_unusable(g)
            self._forget(gid)
            self._audit({"rejected": "reject", "dropped": "drop"}[verdict.outcome], group_id=gid, index=rec.index, reason=verdict.reason, counts=g.counts())
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
                bump(reasons, o.reason)
            errors = [str((r.get("error") or {}).get("message", ""))[:300] for r in self._results.get(g.group_id, {}).values() if r.get("error")]
            self._fatal = SchedulerError(
                f"{self._unusable} groups in a row had no trainable session (last: {g.group_id}, sessions {reasons}"
                + (f", e.g. {errors[0]!r}" if errors else "")
                + "): the task cannot work as configured"
            )

    def _forget(self, gid: str) -> None:
        self._state.forget(gid)
        self._groups.pop(gid, None)
        self._results.pop(gid, None)
        self.store.spool_delete(gid)

    def _consume(self, gid: str) -> None:
        rec = self._state.groups[gid]
        self._state.counters.consumed += 1
        self._audit("consume", group_id=gid, index=rec.index, step=rec.step)
        self._forget(gid)
