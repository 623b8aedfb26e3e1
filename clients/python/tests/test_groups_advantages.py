"""Group acceptance, selection, advantages and the JSONL export (pure units on real results)."""

from __future__ import annotations

import math

import pytest
from results import REAL, result, trace, with_turn_versions

from polar_trainer.advantages import apply, grpo, leave_one_out
from polar_trainer.export import read_jsonl, sample_row, write_jsonl
from polar_trainer.groups import Group, GroupConfig, SelectionTally, judge
from polar_trainer.samples import classify

INFRA = {"status": "ERROR", "reward": None, "error": {"kind": "infra", "message": "runtime failed"}}
AGENT = {"status": "ERROR", "reward": 0, "error": {"kind": "agent", "message": "exit 1"}}


def group_of(*specs, stamp=0, max_tokens=None) -> Group:
    """specs: a reward (completed) or a dict of result() arguments, one per session."""
    g = Group(group_id="run-g000000", index=0, stamp=stamp)
    for i, spec in enumerate(specs):
        kw = spec if isinstance(spec, dict) else {"reward": spec}
        g.sessions.append(classify(result(index=i, **kw), trajectory_index=i, group_id=g.group_id, max_tokens=max_tokens))
    return g


def test_early_stop_threshold_is_upstreams_formula():
    assert GroupConfig(group_size=8, min_complete_fraction=0.5).early_stop_min_usable_sessions == 6
    assert GroupConfig(group_size=8, min_complete_fraction=0.5, early_stop_grace_sessions=0).early_stop_min_usable_sessions == 4
    assert GroupConfig(group_size=4, min_complete_fraction=0.75).early_stop_min_usable_sessions is None  # min(4, 3+2) = n
    assert GroupConfig(group_size=8).early_stop_min_usable_sessions is None
    assert GroupConfig(group_size=5, min_complete_fraction=0.5).required_usable == 3
    with pytest.raises(ValueError, match="min_complete_fraction"):
        GroupConfig(group_size=4, min_complete_fraction=1.5)


def test_too_few_completed_sessions_rejects_the_group_infra_failures_are_not_wrong():
    cfg = GroupConfig(group_size=4, min_complete_fraction=0.75)
    g = group_of(1, INFRA, 0, INFRA)
    assert judge(g, cfg, SelectionTally()) == judge(g, cfg, SelectionTally())
    v = judge(g, cfg, SelectionTally())
    assert (v.accepted, v.outcome, v.reason) == (False, "rejected", "too_few_completed")
    # With f = 0.5 the two usable sessions are enough; the infra failures are not zeros.
    tally = SelectionTally()
    assert judge(g, GroupConfig(group_size=4, min_complete_fraction=0.5), tally).accepted
    assert g.trajectory_rewards() == [1.0, 0.0] and tally.mixed == 1


def test_missing_logprobs_and_zero_trainable_tokens_reject_the_group():
    cfg = GroupConfig(group_size=2)
    v = judge(group_of(1, {"reward": 0, "traces": [trace(response_logprobs=None)]}), cfg, SelectionTally())
    assert (v.outcome, v.reason) == ("rejected", "missing_logprobs")
    n = len(REAL["trajectory"]["traces"][0]["response_ids"])
    masked = {"reward": 1, "traces": [trace(loss_mask=[0] * n)]}
    v = judge(group_of(masked, dict(masked)), cfg, SelectionTally())
    assert (v.outcome, v.reason) == ("rejected", "no_trainable_tokens")


def test_selection_drops_all_wrong_all_equal_and_balances_all_correct():
    tally = SelectionTally()
    all_on = GroupConfig(group_size=2, drop_all_wrong_groups=True, drop_all_equal_groups=True, balance_all_correct_groups=True)
    assert judge(group_of(0, 0), all_on, tally).reason == "all_wrong"
    equal = GroupConfig(group_size=2, drop_all_equal_groups=True)
    assert judge(group_of(0.5, 0.5), equal, tally).reason == "all_equal"
    assert judge(group_of(0, 0), GroupConfig(group_size=2), tally).accepted  # off: accepted
    # Balance: an all-correct group is accepted only while all-correct <= mixed so far.
    bal = GroupConfig(group_size=2, balance_all_correct_groups=True)
    t = SelectionTally()
    assert judge(group_of(1, 1), bal, t).reason == "balanced_all_correct"
    assert judge(group_of(1, 0), bal, t).accepted and t.mixed == 1
    assert judge(group_of(1, 1), bal, t).accepted and t.all_correct == 1
    assert judge(group_of(1, 1), bal, t).reason == "balanced_all_correct"
    # A failed session is not a wrong answer: [1, agent error] is all-correct, not mixed.
    assert group_of(1, AGENT).klass() == "all_correct"


def test_group_version_is_the_oldest_trained_token_else_the_stamp():
    g = group_of(1, 0, stamp=1)
    assert g.version == 3  # every turn of the fixture ran under policy version "3"
    g2 = Group(group_id="g", index=1, stamp=1)
    g2.sessions.append(classify(with_turn_versions(result(index=0), ["2", "3", "3", "3", "3"]), trajectory_index=0))
    g2.sessions.append(classify(result(index=1), trajectory_index=1))
    assert g2.version == 2
    unknown = Group(group_id="g", index=2, stamp=5)
    unknown.sessions.append(classify(with_turn_versions(result(), [None] * 5), trajectory_index=0))
    assert unknown.version == 5


def test_grpo_uses_one_shared_std_and_gives_zero_when_all_equal():
    g = group_of(1, 0, 1, 0)
    stats = grpo(g)
    sd = math.sqrt(4 * 0.25 / 3)
    assert stats["std"] == pytest.approx(sd)
    assert [s.advantage for s in g.samples()] == pytest.approx([0.5 / (sd + 1e-6), -0.5 / (sd + 1e-6)] * 2)
    equal = group_of(1, 1, 1)
    grpo(equal)
    assert [s.advantage for s in equal.samples()] == [0.0, 0.0, 0.0]
    grpo(g, normalize_std=False)
    assert [s.advantage for s in g.samples()] == pytest.approx([0.5, -0.5, 0.5, -0.5])


def test_leave_one_out_excludes_failed_trajectories_from_baselines():
    g = group_of(1, 0, 1, AGENT, INFRA)
    leave_one_out(g)
    adv = {s.trajectory_index: s.advantage for s in g.samples()}
    assert adv[0] == pytest.approx(1 - 0.5) and adv[1] == pytest.approx(0 - 1) and adv[2] == pytest.approx(0.5)
    assert adv[3] == 0.0 and 4 not in adv  # the failed one gets 0; the excluded one has no sample
    single = group_of(1)
    leave_one_out(single)
    assert single.samples()[0].advantage == 1.0  # no other trajectory: baseline 0 (upstream)
    leave_one_out(single, normalize_std=True)
    assert single.samples()[0].advantage == 0.0


def test_a_multi_trace_session_counts_as_one_trajectory():
    two = {"reward": 1, "traces": [trace(), trace()]}
    g = group_of(two, 0)
    assert g.trajectory_rewards() == [1.0, 0.0]
    grpo(g, normalize_std=False)
    assert [s.advantage for s in g.samples()] == [0.5, 0.5, -0.5]  # not a 2:1 mean of 2/3
    leave_one_out(g)
    assert [s.advantage for s in g.samples()] == [1.0, 1.0, -1.0]
    with pytest.raises(ValueError, match="estimator"):
        apply(g, "ppo")


def test_jsonl_rows_round_trip_with_per_token_arrays(tmp_path):
    g = group_of(1, 0)
    grpo(g)
    rows = [sample_row(s, run_id="r", step=1, group_version=g.version, policy_version=4, staleness=1) for s in g.samples()]
    path = write_jsonl(str(tmp_path / "out" / "step-000001.jsonl"), rows)
    back = list(read_jsonl(path))
    assert back == rows
    r = back[0]
    assert r["schema"] == "polar.sample.v1" and r["token_versions"][0] == 3
    assert len(r["loss_mask"]) == len(r["rollout_logprobs"]) == len(r["tokens"]) - r["prompt_length"]
    bad = dict(r, loss_mask=r["loss_mask"][:-1])
    write_jsonl(str(tmp_path / "bad.jsonl"), [bad])
    with pytest.raises(ValueError, match="loss_mask"):
        list(read_jsonl(str(tmp_path / "bad.jsonl")))
