"""The scheduler's durable state: one JSON file replaced atomically, one result spool per group in
flight, and an append-only audit log.

Layout of the state folder::

    state.json              the scheduler's state (write temp file, fsync, rename, fsync folder)
    results/<group>.jsonl   one line per result received, {"seq", "result"}, fsynced before use
    audit.jsonl             submit / accept / reject / drop / lease / commit events, in order

A result is written to its spool before the scheduler acts on it, so after a crash the group's
cursor is the last seq in its spool and nothing is read twice or lost; a torn last line (a crash
mid-write) is cut off on load.

Example::

    store = StateStore("ckpt/polar")
    state = store.load() or {"run_id": "run1"}
    store.save(state)
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Dict, List, Optional, Tuple

from .errors import StateError

STATE_FORMAT = 1


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems do not sync folders; the rename is still atomic
    finally:
        os.close(fd)


def atomic_write_json(path: str, value: Any) -> None:
    """Writes ``value`` as JSON so that ``path`` holds either the old or the new content, whole.

    Example::

        atomic_write_json("ckpt/trainer.json", {"step": 3})
    """
    folder = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, separators=(",", ":"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(folder)


class StateStore:
    """The files of one scheduler run (see the module doc).

    Example::

        store = StateStore(folder)
        store.spool_append("run1-g000003", 7, result)
        [seq for seq, _ in store.spool_read("run1-g000003")]
    """

    def __init__(self, folder: str) -> None:
        self.folder = os.path.abspath(folder)
        self.results = os.path.join(self.folder, "results")
        os.makedirs(self.results, exist_ok=True)
        self.path = os.path.join(self.folder, "state.json")
        self.audit_path = os.path.join(self.folder, "audit.jsonl")
        self._audit_lock = threading.Lock()

    def load(self) -> Optional[Dict[str, Any]]:
        """The saved state, or None for a fresh folder.

        Example::

            state = store.load()
        """
        try:
            with open(self.path, encoding="utf-8") as f:
                state = json.load(f)
        except FileNotFoundError:
            return None
        except ValueError as e:
            raise StateError(f"{self.path}: not valid JSON ({e}); the atomic writes never leave a partial file, so it was changed by hand") from e
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise StateError(f"{self.path}: not a polar_trainer scheduler state (format {STATE_FORMAT})")
        return state

    def save(self, state: Dict[str, Any]) -> None:
        """Replaces the state file atomically."""
        atomic_write_json(self.path, {**state, "format": STATE_FORMAT})

    def _spool(self, group_id: str) -> str:
        return os.path.join(self.results, f"{group_id}.jsonl")

    def spool_append(self, group_id: str, seq: int, result: Dict[str, Any]) -> None:
        """Appends one result and fsyncs it."""
        line = json.dumps({"seq": seq, "result": result}, separators=(",", ":")) + "\n"
        with open(self._spool(group_id), "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def spool_read(self, group_id: str) -> List[Tuple[int, Dict[str, Any]]]:
        """The spooled ``(seq, result)`` pairs in order; a torn last line is cut from the file."""
        path = self._spool(group_id)
        out: List[Tuple[int, Dict[str, Any]]] = []
        good = 0
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return out
        for raw in data.splitlines(keepends=True):
            if not raw.endswith(b"\n"):
                break
            try:
                item = json.loads(raw)
                out.append((int(item["seq"]), item["result"]))
            except (ValueError, KeyError, TypeError):
                break
            good += len(raw)
        if good < len(data):
            with open(path, "r+b") as f:
                f.truncate(good)
        return out

    def spool_delete(self, group_id: str) -> None:
        """Removes a group's spool (it was consumed, rejected or dropped)."""
        try:
            os.remove(self._spool(group_id))
        except FileNotFoundError:
            pass

    def audit(self, event: Dict[str, Any]) -> None:
        """Appends one event to ``audit.jsonl`` (flushed and fsynced)."""
        line = json.dumps(event, separators=(",", ":")) + "\n"
        with self._audit_lock, open(self.audit_path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def audit_events(self) -> List[Dict[str, Any]]:
        """Every complete event of the audit log, in order.

        Example::

            submits = [e for e in store.audit_events() if e["event"] == "submit"]
        """
        try:
            with open(self.audit_path, encoding="utf-8") as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            return []
        out = []
        for line in lines[:-1]:  # the last piece is "" or a torn line
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out
