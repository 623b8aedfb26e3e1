"""The fence client's failure paths against a stand-in of the fence routes (a gateway that never
drains, a resume that fails, a 503 to retry: faults a real stack does not produce on demand). The
real routes and a real gateway: test_fence_stack.py."""

from __future__ import annotations

import pytest
from fence_standin import FenceStandIn

from polar_trainer import BadRequest, FenceError, PolarClient, Unauthorized

TOKEN = "trainer-token-for-tests"


@pytest.fixture
def standin():
    with FenceStandIn(TOKEN) as s:
        yield s


def client_of(s: FenceStandIn, token: str = TOKEN) -> PolarClient:
    c = PolarClient(s.url, token, retries=2)
    c.transport.sleep = lambda _s: None  # retries without waiting
    return c


def test_pause_resume_version_and_status_follow_the_stored_state(standin):
    c = client_of(standin)
    paused = c.pause("q1", mode="abort", timeout_seconds=60)
    assert paused.ok and paused.fence.paused and paused.fence.mode == "abort"
    assert paused.nodes[0].node_id == "node-0" and paused.nodes[0].paused
    assert standin.requests[-1] == ("POST", "/v1/queues/q1/inference/pause", {"mode": "abort", "timeout_seconds": 60})
    seq = paused.fence.fence_seq
    versioned = c.set_policy_version("q1", 7)
    assert versioned.fence.policy_version == "7" and versioned.fence.paused  # a version does not resume
    assert versioned.fence.fence_seq == seq + 1
    resumed = c.resume("q1", policy_version=8)
    assert not resumed.fence.paused and resumed.fence.policy_version == "8" and resumed.fence.mode is None
    status = c.fence_status("q1")
    assert status.fence.policy_version == "8" and status.fence.fence_seq == seq + 2
    # Another queue has its own fence.
    assert c.fence_status("q2").fence.policy_version is None


def test_bad_arguments_are_refused_before_the_request_and_the_server_names_the_field(standin):
    c = client_of(standin)
    with pytest.raises(ValueError, match="mode"):
        c.pause("q", mode="hold")
    with pytest.raises(ValueError, match="timeout_seconds"):
        c.pause("q", timeout_seconds=0)
    n = len(standin.requests)
    assert n == 0
    with pytest.raises(BadRequest) as e:
        c.transport.request("POST", "/v1/queues/q/inference/pause", {"mode": "drain", "timeout_seconds": 9999}, idempotent=True)
    assert e.value.code == "validation_failed" and "timeout_seconds" in e.value.message
    with pytest.raises(Unauthorized):
        client_of(standin, "wrong").pause("q")


def test_weight_update_pauses_updates_then_resumes_with_the_version(standin):
    c = client_of(standin)
    seen = []

    def update(version: str) -> None:
        # The queue is paused while the trainer updates its engines.
        seen.append((version, c.fence_status("q").fence.paused))

    result = c.weight_update("q", 3, update, mode="drain", timeout_seconds=120)
    assert seen == [("3", True)]
    assert result.fence.policy_version == "3" and not result.fence.paused
    calls = [(m, p) for m, p, _ in standin.requests if m == "POST"]
    assert calls == [("POST", "/v1/queues/q/inference/pause"), ("POST", "/v1/queues/q/inference/resume")]
    assert standin.requests[-1][2] == {"policy_version": "3"}


def test_a_failing_update_undoes_the_pause_and_keeps_the_version(standin):
    c = client_of(standin)
    c.resume("q", policy_version="2")

    def update(version: str) -> None:
        raise RuntimeError("NCCL broadcast failed")

    with pytest.raises(FenceError) as e:
        c.weight_update("q", 3, update)
    assert e.value.reason == "update_failed" and not e.value.still_paused
    assert isinstance(e.value.__cause__, RuntimeError)
    state = c.fence_status("q").fence
    assert not state.paused and state.policy_version == "2"


def test_gateways_that_do_not_drain_in_time_stop_the_update_and_the_pause_is_undone():
    nodes = [{"node_id": "gpu-0", "drain_seconds": 0}, {"node_id": "gpu-1", "drain_seconds": 500, "inflight": 3}]
    with FenceStandIn(TOKEN, nodes) as s:
        c = client_of(s)
        calls = []
        with pytest.raises(FenceError) as e:
            c.weight_update("q", 1, calls.append, timeout_seconds=30)
        assert e.value.reason == "not_drained" and "gpu-1 (inflight 3" in str(e.value)
        assert calls == []  # the update never ran on a fleet that was still generating
        assert not c.fence_status("q").fence.paused
        # allow_not_drained goes on anyway (abort-style trainers that accept it).
        r = c.weight_update("q", 1, calls.append, timeout_seconds=30, allow_not_drained=True)
        assert calls == ["1"] and r.fence.policy_version == "1"


def test_a_resume_that_fails_reports_still_paused_and_a_retry_finishes_it(standin):
    c = client_of(standin)
    standin.fail_next["/inference/resume"] = 500
    with pytest.raises(FenceError) as e:
        c.weight_update("q", 4, lambda v: None)
    assert e.value.reason == "resume_failed" and e.value.still_paused
    assert c.fence_status("q").fence.paused
    assert c.resume("q", policy_version=4).fence.policy_version == "4"


def test_transient_failures_of_fence_routes_are_retried(standin):
    c = client_of(standin)
    standin.fail_next["/inference/pause"] = 503
    r = c.pause("q", timeout_seconds=10)
    assert r.fence.paused
    assert [p for m, p, _ in standin.requests].count("/v1/queues/q/inference/pause") == 2
