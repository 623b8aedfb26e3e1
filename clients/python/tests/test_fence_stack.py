"""The fence client against the REAL control plane's routes (``/v1/queues/:queue/inference/*``) and
a real gateway: the answers' shapes, errors naming the field, the trainer token fencing its queue,
and a session that spans a weight update carrying both versions, token by token."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from polar_trainer import BadRequest, PolarClient, Unauthorized, engines
from polar_trainer.samples import classify

pytestmark = pytest.mark.stack

# Two model calls with a "tool" of a few seconds between them: the test updates the weights while
# the session sleeps, so its first turn is sampled under one version and its second under the next.
TWO_TURNS = r"""
const base = process.env.OPENAI_BASE_URL, key = process.env.OPENAI_API_KEY;
async function chat(messages) {
  const res = await fetch(`${base}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: "default", messages, max_tokens: 64 }),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  return (await res.json()).choices[0].message;
}
const messages = [{ role: "user", content: "What is 6 * 7?" }];
const first = await chat(messages);
await new Promise((r) => setTimeout(r, 6000));
messages.push({ role: "assistant", content: first.content }, { role: "user", content: "Are you sure?" });
await chat(messages);
"""


def sim_stats(stack):
    with urllib.request.urlopen(f"{stack.engine_url}/sim/stats", timeout=10) as r:
        return json.load(r)


def test_the_routes_answer_in_the_contracts_shapes_with_the_trainer_token(stack):
    c = stack.client()
    before = c.fence_status("default")
    assert before.queue == "default" and [n.node_id for n in before.nodes] == stack.default_gateways
    paused = c.pause("default", mode="abort", timeout_seconds=20)
    try:
        assert paused.ok and paused.fence.paused and paused.fence.mode == "abort"
        assert paused.fence.fence_seq == before.fence.fence_seq + 1 and paused.fence.paused_at
        assert all(n.ok and n.paused and n.inflight == 0 for n in paused.nodes)
        labelled = c.set_policy_version("default", 11)
        assert labelled.fence.paused and labelled.fence.policy_version == "11"  # a version does not resume
    finally:
        resumed = c.resume("default", policy_version=12)
    assert not resumed.fence.paused and resumed.fence.mode is None and resumed.fence.policy_version == "12"
    assert {n.policy_version for n in resumed.nodes} == {"12"} and not any(n.paused for n in resumed.nodes)
    assert c.fence_status("default").fence.fence_seq == before.fence.fence_seq + 3
    # Another queue has its own fence; a queue exists once named.
    assert c.fence_status("fence-elsewhere").fence.policy_version is None


def test_bad_bodies_name_the_field_and_a_wrong_token_is_refused(stack):
    c = stack.client()
    with pytest.raises(BadRequest) as e:
        c.transport.request("POST", "/v1/queues/default/inference/pause", {"mode": "drain", "timeout_seconds": 9999}, idempotent=True)
    assert e.value.code == "validation_failed" and "timeout_seconds" in e.value.message
    with pytest.raises(BadRequest) as e:
        c.transport.request("POST", "/v1/queues/default/policy_version", {}, idempotent=True)
    assert "policy_version" in e.value.message
    with pytest.raises(Unauthorized):
        PolarClient(stack.url, "not-a-token", retries=0).pause("default")
    assert not c.fence_status("default").fence.paused


def test_a_session_spanning_an_update_keeps_each_turns_version(stack, tmp_path, run_id):
    c = stack.client()
    c.weight_update("default", 20, stack.push_weights)
    script = tmp_path / "two_turns.mjs"
    script.write_text(TWO_TURNS)
    task = {
        "task_id": "span",
        "instruction": "two turns",
        "num_samples": 1,
        "timeout_seconds": 120,
        "runtime": {"backend": "local", "prepare": [{"type": "upload_file", "source": str(script), "target": "two_turns.mjs"}]},
        "agent": {"harness": "shell", "custom_shell": {"command": "node two_turns.mjs"}},
        "evaluator": {"strategy": "session_completed"},
    }
    batch = f"{run_id}-span"
    c.submit({"batch_id": batch, "tasks": [task]})
    [listed] = c.transport.request("GET", f"/v1/batches/{batch}/sessions")["sessions"]
    # The first turn is over (the "tool" now sleeps 6 s) once the engine lists a finished request of
    # this session: the proxy's request ids start with the session id. The engine serves the other
    # suites' sessions too, so a moving finished_total would not say whose call ended.
    deadline = time.monotonic() + 90
    while not any(rid.startswith(f"{listed['session_id']}-t") for rid in sim_stats(stack)["recent_finished_rids"]):
        assert time.monotonic() < deadline, "the session's first model call never finished"
        time.sleep(0.1)
    seen = []

    def push(version: str) -> None:
        seen.append(c.fence_status("default").fence.paused)
        stack.push_weights(version)

    c.weight_update("default", 21, push, mode="drain", timeout_seconds=30)
    assert seen == [True] and engines.weight_versions(stack.engine_url) == {stack.engine_url: "21"}
    [(_, result)] = list(c.iter_results(batch, wait=10, timeout=90))
    assert result["status"] == "COMPLETED", result.get("error")
    [trace] = result["trajectory"]["traces"]
    turns = [(t["policy_version"], t["weight_version_start"], t["weight_version"]) for t in trace["metadata"]["turns"]]
    assert turns == [("20", "20", "20"), ("21", "21", "21")]
    [sample] = classify(result, trajectory_index=0).samples
    sampled = [v for v, m in zip(sample.token_versions, sample.loss_mask) if m]
    assert set(sampled) == {20, 21} and sampled == sorted(sampled)
    # The rule: the session counts from its OLDEST sampled token.
    assert sample.oldest_version == 20
