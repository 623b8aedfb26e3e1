"""The durable per-queue inference fence: its state, the routes' answers, and the one call that
wraps a trainer's weight update.

The control plane stores, per queue, ``{paused, mode, policy_version, fence_seq, ...}`` BEFORE it
fans the change out to the queue's gateways, and replays it to every gateway that (re)connects, so
a pause or a version survives gateway reconnects. :func:`weight_update` is the safe order of calls:
pause (drain or abort) → the trainer's own update → resume with the new version (one durable
write that sets the version and resumes) — and when the update fails, the pause is undone.

Example::

    def push(version: str) -> None:
        engine.update_weights_from_disk(checkpoint, weight_version=version)

    result = client.weight_update("default", 3, push)   # pause → push("3") → resume("3")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from .errors import FenceError, PolarError

if TYPE_CHECKING:
    from .client import PolarClient

#: ``POST .../inference/pause`` modes: ``drain`` waits for in-flight engine calls, ``abort`` aborts
#: them at the engine (the proxy re-issues each after resume, or ends the stream with an error the
#: harness retries).
FENCE_MODES = ("drain", "abort")

#: The contract's bounds of ``timeout_seconds``.
MAX_FENCE_TIMEOUT_SECONDS = 3600


@dataclass
class FenceState:
    """A queue's fence as the control plane stores it.

    Example::

        state = client.fence_status("default").fence
        if state.paused: print("paused since", state.paused_at, "mode", state.mode)
    """

    queue: str
    paused: bool
    mode: Optional[str]
    policy_version: Optional[str]
    fence_seq: int
    paused_at: Optional[int]
    updated_at: Optional[int]

    @staticmethod
    def parse(raw: Dict[str, Any]) -> "FenceState":
        """Reads the ``fence`` object of a fence route's answer.

        Example::

            FenceState.parse({"queue": "q", "paused": False, "mode": None, "policy_version": "2",
                              "fence_seq": 4, "paused_at": None, "updated_at": 1})
        """
        return FenceState(
            queue=str(raw.get("queue", "")),
            paused=bool(raw.get("paused", False)),
            mode=raw.get("mode"),
            policy_version=raw.get("policy_version"),
            fence_seq=int(raw.get("fence_seq", 0)),
            paused_at=raw.get("paused_at"),
            updated_at=raw.get("updated_at"),
        )


@dataclass
class NodeAck:
    """One gateway's answer to a fence change.

    Example::

        [n.node_id for n in result.nodes if n.inflight > 0]
    """

    node_id: str
    ok: bool
    paused: bool
    inflight: int
    policy_version: Optional[str]
    error: Optional[str] = None


@dataclass
class FenceResult:
    """The answer of a fence route: the stored state, whether every connected gateway acked
    (``ok``; the status route has no ``ok`` and reports True), and each gateway's ack.

    Example::

        r = client.pause("default", mode="drain", timeout_seconds=120)
        assert r.fence.paused and (r.ok or r.not_drained)
    """

    queue: str
    fence: FenceState
    ok: bool
    nodes: List[NodeAck] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict)

    @property
    def not_drained(self) -> List[NodeAck]:
        """Gateways that did not ack paused with nothing in flight.

        Example::

            for n in result.not_drained: print(n.node_id, n.inflight, n.error)
        """
        return [n for n in self.nodes if not n.ok or n.inflight > 0]

    @staticmethod
    def parse(raw: Dict[str, Any]) -> "FenceResult":
        """Reads ``{queue, fence, ok?, nodes}``.

        Example::

            FenceResult.parse(client.transport.request("GET", "/v1/queues/q/inference"))
        """
        nodes = [
            NodeAck(
                node_id=str(n.get("node_id", "")),
                ok=bool(n.get("ok", False)),
                paused=bool(n.get("paused", False)),
                inflight=int(n.get("inflight", 0) or 0),
                policy_version=n.get("policy_version"),
                error=n.get("error"),
            )
            for n in raw.get("nodes", [])
            if isinstance(n, dict)
        ]
        fence = raw.get("fence") if isinstance(raw.get("fence"), dict) else {}
        return FenceResult(
            queue=str(raw.get("queue", fence.get("queue", ""))),
            fence=FenceState.parse(fence),
            ok=bool(raw.get("ok", True)),
            nodes=nodes,
            raw=raw,
        )


def check_mode(mode: str) -> None:
    """Raises ValueError naming ``mode`` unless it is ``drain`` or ``abort``.

    Example::

        check_mode("drain")
    """
    if mode not in FENCE_MODES:
        raise ValueError(f"mode must be one of {', '.join(FENCE_MODES)}, got {mode!r}")


def check_timeout(timeout_seconds: float) -> None:
    """Raises ValueError naming ``timeout_seconds`` unless it is in (0, 3600].

    Example::

        check_timeout(300)
    """
    if not (isinstance(timeout_seconds, (int, float)) and 0 < timeout_seconds <= MAX_FENCE_TIMEOUT_SECONDS):
        raise ValueError(f"timeout_seconds must be > 0 and <= {MAX_FENCE_TIMEOUT_SECONDS}, got {timeout_seconds!r}")


def weight_update(
    client: "PolarClient",
    queue: str,
    version: Any,
    update: Callable[[str], Any],
    mode: str = "drain",
    timeout_seconds: float = 300,
    allow_not_drained: bool = False,
) -> FenceResult:
    """Pause → ``update(version)`` → resume with ``version``; the pause is undone on any failure.

    Args:
        client: the client whose token fences (the trainer token may fence the queues it uses).
        queue: the queue to fence.
        version: the new policy version (an int or a decimal string; sent as a string).
        update: the trainer's own weight update; it gets the version string. Its return value is
            ignored.
        mode: ``drain`` or ``abort``.
        timeout_seconds: the one timeout of the pause (gateway drain and the control plane's wait).
        allow_not_drained: go on with the update when the pause answered ``ok: false`` (some
            gateway still had calls in flight); by default that raises ``FenceError`` after resuming.

    Returns:
        The resume's answer (the stored fence now has ``policy_version == str(version)``).

    Raises:
        FenceError: ``not_drained``, ``update_failed`` (the update's exception is ``__cause__``) or
            ``resume_failed`` (``still_paused`` True: call ``client.resume(queue, version)`` again).
        PolarError: the pause itself was refused (e.g. 400 naming a field); nothing was paused
            that the client knows of, but an undo is attempted anyway.

    Example::

        client.weight_update("default", step + 1, lambda v: engine.load(ckpt, weight_version=v))
    """
    check_mode(mode)
    check_timeout(timeout_seconds)
    version_str = str(version)
    if not version_str:
        raise ValueError("version is empty")
    try:
        paused = client.pause(queue, mode=mode, timeout_seconds=timeout_seconds)
    except PolarError:
        # The pause may have been stored before the answer was lost: undo it, then report the cause.
        _undo(client, queue)
        raise
    if not paused.ok and not allow_not_drained:
        still = not _undo(client, queue)
        lagging = ", ".join(f"{n.node_id} (inflight {n.inflight}{'; ' + n.error if n.error else ''})" for n in paused.not_drained)
        raise FenceError(queue, "not_drained", f"gateways not paused within {timeout_seconds} s: {lagging or 'unknown'}", paused, still)
    try:
        update(version_str)
    except BaseException as e:
        still = not _undo(client, queue)
        raise FenceError(queue, "update_failed", f"{type(e).__name__}: {e}", paused, still) from e
    try:
        return client.resume(queue, policy_version=version_str)
    except PolarError as e:
        raise FenceError(queue, "resume_failed", str(e), paused, True) from e


def _undo(client: "PolarClient", queue: str) -> bool:
    """Resumes without changing the version; True when that worked."""
    try:
        client.resume(queue)
        return True
    except PolarError:
        return False
