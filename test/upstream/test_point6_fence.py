"""Point 6 of issue 15: the bridge's weight-update fence through ``GET /nodes``, against real gateways.

``WeightUpdateFence`` replays upstream's ``pause_for_weight_update`` / ``resume_after_weight_update``
call for call; every answer is validated with the mirror models (``extra="forbid"``). The fence
queue's engine holds each model call a few seconds, so a turn is in flight when the bridge pauses; the engine's own counters (``/sim/stats``) show whether a call reached it during a pause.
"""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace
from typing import Any, Callable

import httpx
import pytest

from bridge_calls import WeightUpdateFence, get_task_status_with_retry
from conftest import hello_task, task_id
from upstream_models import GenerationStatus, validate_nodes


def wait_until(check: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def sim_stats(fence: dict[str, Any]) -> dict[str, Any]:
    return httpx.get(f"{fence['engine']}/sim/stats", timeout=10).json()


def gateway_gate(gateway: dict[str, Any]) -> dict[str, Any]:
    """The gateway's own view of its inference gate (its HTTP health)."""
    return httpx.get(gateway["health"], timeout=10).json()["inference"]


def stored_fence(stack: dict[str, str], queue: str) -> dict[str, Any]:
    """The queue's durable fence as Polar-TS's own API reports it (trainer token)."""
    res = httpx.get(
        f"{stack['root']}/v1/queues/{queue}/inference",
        headers={"Authorization": f"Bearer {stack['trainer']}"},
        timeout=30,
    )
    res.raise_for_status()
    return res.json()["fence"]


def bridge_args(rollout_url: str, timeout: float = 300.0) -> SimpleNamespace:
    """The two ``args.polar_*`` keys the fence reads (Slime's custom config)."""
    return SimpleNamespace(polar_rollout_url=rollout_url, polar_weight_update_pause_timeout=timeout)


def submit(client: httpx.Client, base: str, payload: dict[str, Any]) -> str:
    res = client.post(f"{base}/rollout/task/submit", json=payload)
    res.raise_for_status()
    return payload["task_id"]


def wait_completed(client: httpx.Client, base: str, tid: str) -> dict[str, Any]:
    final: dict[str, Any] = {}

    def done() -> bool:
        final.update(get_task_status_with_retry(client, base, tid))
        return final["status"] in ("completed", "failed")

    wait_until(done, 120, f"task {tid}")
    return final


def test_point6_nodes_are_upstreams_gateway_rows(stack, fence, client, monkeypatch):
    rows = validate_nodes(client.get(f"{fence['base']}/nodes").json())
    assert sorted(r.node_id for r in rows) == sorted(g["node_id"] for g in fence["gateways"])
    for row in rows:
        assert row.gateway_url.startswith(f"{fence['base']}/")
        assert row.healthy and row.max_run_workers > 0
    # /rollout/status lists the same fleet, in the same GatewayNodeInfo rows.
    status = client.get(f"{fence['base']}/rollout/status").json()
    assert validate_nodes(status["nodes"]["nodes"]) == rows
    # A plain URL with X-Polar-Control-Token (on /nodes and on the gateway calls, as the bridge
    # sends it): every queue's fleet, on the root.
    monkeypatch.setenv("POLAR_CONTROL_PLANE_TOKEN", stack["trainer"])
    urls = WeightUpdateFence().discover(bridge_args(stack["root"]))
    assert {f"{stack['root']}/queues/{fence['queue']}/gateways/{g['node_id']}" for g in fence["gateways"]} <= set(urls)


def test_point6_pause_update_resume_around_an_inflight_turn(stack, fence, client):
    bridge = WeightUpdateFence()
    args = bridge_args(fence["base"], timeout=60.0)
    inflight = submit(client, fence["base"], hello_task(task_id("p6-inflight")))
    wait_until(lambda: sim_stats(fence)["running"] == 1, what="the turn to reach the engine")

    aborted = sim_stats(fence)["aborted_total"]
    bridge.pause_for_weight_update(args)
    # The pause answered only once the in-flight turn had ended (the engine holds it seconds):
    # drained, not cut.
    after = sim_stats(fence)
    assert (after["running"], after["aborted_total"]) == (0, aborted)
    pauses = [c for c in bridge.calls if c.action == "pause"]
    assert len(pauses) == len(fence["gateways"]) and set(bridge.paused) == {c.url for c in pauses}
    for call in pauses:
        assert call.status == 200
        body = GenerationStatus.model_validate(call.body)
        assert (body.paused, body.inflight, body.drained, body.timed_out) == (True, 0, True, False)
    assert stored_fence(stack, fence["queue"])["paused"] is True

    # The update. The drained session's next turn (``ask.mjs`` asks twice) and the first turn of
    # a task submitted now are held at their gateways: the engine sees no call until the resume.
    before = sim_stats(fence)["requests_total"]
    held = submit(client, fence["base"], hello_task(task_id("p6-held")))
    wait_until(
        lambda: sum(gateway_gate(g)["waiting"] for g in fence["gateways"]) == 2,
        what="both turns to be held at their gateways",
    )
    update = httpx.post(
        f"{fence['engine']}/update_weights_from_disk",
        json={"model_path": "/ckpt/step-1", "weight_version": "1"},
        timeout=30,
    )
    assert update.status_code == 200
    time.sleep(1.5)
    assert sim_stats(fence)["requests_total"] == before, "a model call reached the engine during the pause"
    assert all(gateway_gate(g)["paused"] for g in fence["gateways"])

    bridge.resume_after_weight_update(args)
    resumes = [c for c in bridge.calls if c.action == "resume"]
    assert {c.url for c in resumes} == {c.url for c in pauses} and bridge.paused == ()
    for call in resumes:
        assert call.status == 200
        assert GenerationStatus.model_validate(call.body).paused is False
    assert stored_fence(stack, fence["queue"])["paused"] is False
    for tid in (inflight, held):
        assert wait_completed(client, fence["base"], tid)["status"] == "completed"
    # After the resume: the first session's second turn and both turns of the held one.
    assert sim_stats(fence)["requests_total"] == before + 3


def test_point6_a_partial_pause_is_undone(stack, fence, client):
    """One gateway drains at once, the other's turn outlasts the timeout: the bridge resumes both."""
    bridge = WeightUpdateFence()
    tid = submit(client, fence["base"], hello_task(task_id("p6-partial")))
    wait_until(lambda: sim_stats(fence)["running"] == 1, what="the turn to reach the engine")
    with pytest.raises(RuntimeError) as err:
        bridge.pause_for_weight_update(bridge_args(fence["base"], timeout=0.5))
    assert "Failed to pause" in str(err.value) and "inflight=1" in str(err.value)
    pauses = [c for c in bridge.calls if c.action == "pause"]
    bodies = [GenerationStatus.model_validate(c.body) for c in pauses]
    assert sorted((b.inflight, b.timed_out) for b in bodies) == [(0, False), (1, True)], "one paused, one timed out"
    assert all(b.paused for b in bodies) and all(c.status == 200 for c in pauses)
    resumes = [c for c in bridge.calls if c.action == "resume"]
    assert {c.url for c in resumes} == {c.url for c in pauses}
    assert all(c.status == 200 and c.body["paused"] is False for c in resumes)
    assert bridge.rollback_errors == [] and bridge.paused == ()
    assert stored_fence(stack, fence["queue"])["paused"] is False
    assert not any(gateway_gate(g)["paused"] for g in fence["gateways"])
    assert wait_completed(client, fence["base"], tid)["status"] == "completed"


def _process_group(reaper_pid: int) -> int:
    """The gateway's process group: the reaper's child leads it."""
    with open(f"/proc/{reaper_pid}/task/{reaper_pid}/children") as f:
        return int(f.read().split()[0])


def test_point6_fails_closed_on_a_gateway_that_does_not_answer(stack, fence):
    """A gateway that stops answering (SIGSTOP): its pause is a 502, the bridge resumes the others."""
    stuck, healthy = fence["gateways"][0], fence["gateways"][1]
    group = _process_group(int(stuck["pid"]))
    bridge = WeightUpdateFence()
    os.killpg(group, signal.SIGSTOP)
    try:
        with pytest.raises(RuntimeError) as err:
            bridge.pause_for_weight_update(bridge_args(fence["base"], timeout=1.0))
    finally:
        os.killpg(group, signal.SIGCONT)
    by_node = {c.url.rsplit("/", 1)[1]: c for c in bridge.calls if c.action == "pause"}
    assert by_node[stuck["node_id"]].status == 502
    assert by_node[stuck["node_id"]].body["error"]["code"] == "gateway_error"
    assert GenerationStatus.model_validate(by_node[healthy["node_id"]].body).inflight == 0
    assert f"gateways/{stuck['node_id']}: HTTPStatusError" in str(err.value)
    resumed = {c.url.rsplit("/", 1)[1]: c.status for c in bridge.calls if c.action == "resume"}
    assert resumed[healthy["node_id"]] == 200
    assert bridge.paused == ()
    assert stored_fence(stack, fence["queue"])["paused"] is False
    # Once it runs again it reads the fence it missed and ends up resumed too.
    wait_until(lambda: not any(gateway_gate(g)["paused"] for g in fence["gateways"]), what="both gateways resumed")


def test_point6_fails_closed_on_bad_discovery(stack, fence, client):
    before = stored_fence(stack, fence["queue"])
    bridge = WeightUpdateFence()
    for url in (f"{stack['root']}/u/pt_nobody.{'A' * 32}", stack["root"]):
        with pytest.raises(httpx.HTTPStatusError) as err:
            bridge.pause_for_weight_update(bridge_args(url))
        assert err.value.response.status_code == 401
    assert bridge.calls == [] and bridge.paused == ()
    assert stored_fence(stack, fence["queue"])["fence_seq"] == before["fence_seq"]
    # A credential fences only its own queue.
    other = client.post(f"{fence['empty_base']}/queues/{fence['queue']}/admin/inference/pause")
    assert other.status_code == 403
    assert stored_fence(stack, fence["queue"])["fence_seq"] == before["fence_seq"]


def test_point6_a_queue_without_gateways_is_fenced_through_its_queue_row(stack, fence, client):
    [row] = validate_nodes(client.get(f"{fence['empty_base']}/nodes").json())
    assert row.node_id == f"queue:{fence['empty_queue']}" and not row.healthy
    bridge = WeightUpdateFence()
    args = bridge_args(fence["empty_base"])
    bridge.pause_for_weight_update(args)
    assert stored_fence(stack, fence["empty_queue"])["paused"] is True
    bridge.resume_after_weight_update(args)
    assert stored_fence(stack, fence["empty_queue"])["paused"] is False
