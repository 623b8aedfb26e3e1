"""Group acceptance, selection, advantages and the JSONL export (pure units on real results)."""

from __future__ import annotations

import math

import pytest
from results import REAL, result, trace, with_turn_versions

from polar_trainer.advantages import apply, grpo, leave_one_out
from polar_trainer.export import read_jsonl, sample_row, write_jsonl
from polar_trainer.groups import Group, GroupConfig, SelectionTally, Verdict, group_version, judge
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


def test_required_usable_is_at_least_one_and_not_raised_by_float_noise():
    """``max(1, ceil(n·f))``: 50 × 0.14 is 7.000000000000001 in floats and needs 7 sessions, not 8;
    with f = 0 a group still needs one trainable session, so a group of infra failures is
    ``too_few_completed`` (not ``no_trainable_tokens``)."""
    assert GroupConfig(group_size=50, min_complete_fraction=0.14).required_usable == 7
    assert GroupConfig(group_size=25, min_complete_fraction=0.28).required_usable == 7
    assert GroupConfig(group_size=4).required_usable == 1
    v = judge(group_of(INFRA, INFRA), GroupConfig(group_size=2), SelectionTally())
    assert (v.accepted, v.outcome, v.reason) == (False, "rejected", "too_few_completed")


def test_all_equal_means_a_difference_of_at_most_1e_12_in_judge_and_in_grpo_alike():
    """The boundary is inclusive and shared: rewards 0 and 1e-12 are dropped as ``all_equal`` and
    get advantage exactly 0 from grpo; 0 and 2e-12 are accepted."""
    equal = GroupConfig(group_size=2, drop_all_equal_groups=True)
    at = group_of(0, 1e-12)
    v = judge(at, equal, SelectionTally())
    assert (v.accepted, v.outcome, v.reason) == (False, "dropped", "all_equal")
    assert grpo(at) == {"mean": 0.5e-12, "std": 0.0}
    assert [s.advantage for s in at.samples()] == [0.0, 0.0]
    assert judge(group_of(0, 2e-12), equal, SelectionTally()) == Verdict(True, "accepted")


def test_grpo_gives_exactly_zero_to_equal_rewards_whose_float_mean_is_not_them():
    """sum([0.1] * 3) / 3 is 0.10000000000000002, so r − mean is −1.4e-17, not 0: the all-equal
    rule still gives every sample 0.0 and reports std 0.0, normalised or not."""
    g = group_of(0.1, 0.1, 0.1)
    assert grpo(g) == {"mean": sum([0.1] * 3) / 3, "std": 0.0}
    assert [s.advantage for s in g.samples()] == [0.0, 0.0, 0.0]
    assert grpo(g, normalize_std=False)["std"] == 0.0
    assert [s.advantage for s in g.samples()] == [0.0, 0.0, 0.0]


def test_grpo_divides_by_the_std_of_trajectory_rewards_not_of_samples():
    """A 2-trace session rewarded 1 and a session rewarded 0: trajectory rewards [1, 0], std
    sqrt(0.5) (the samples' [1, 1, 0] would give sqrt(1/3)); every trace gets 0.5 / (sqrt(0.5) + 1e-6)."""
    g = group_of({"reward": 1, "traces": [trace(), trace()]}, 0)
    sd = math.sqrt(0.5)
    assert grpo(g) == {"mean": 0.5, "std": sd}
    a = 0.5 / (sd + 1e-6)
    assert [s.advantage for s in g.samples()] == [a, a, -a]


def test_each_trace_gets_its_own_reward_minus_the_baseline_not_its_trajectory_mean():
    """Per-trace rewards 1 and 0 in one session (trajectory reward 0.5) and a session rewarded 0:
    grpo's mean is 0.25, so the traces get 0.75, −0.25 and the other session −0.25; leave-one-out
    gives 1 − 0, 0 − 0 and 0 − 0.5."""
    g = group_of({"reward": 0, "traces": [trace(reward=1), trace(reward=0)]}, 0)
    assert g.trajectory_rewards() == [0.5, 0.0]
    assert grpo(g, normalize_std=False) == {"mean": 0.25, "std": math.sqrt(0.125)}
    assert [s.advantage for s in g.samples()] == [0.75, -0.25, -0.25]
    leave_one_out(g)
    assert [s.advantage for s in g.samples()] == [1.0, 0.0, -0.5]


def test_leave_one_out_with_normalize_std_divides_by_the_shared_group_std():
    """Rewards 1, 0, 1, 0: baselines 1/3 and 2/3, divided by std sqrt(1/3) + 1e-6 (the slime
    bridge's grpo with the loo baseline)."""
    g = group_of(1, 0, 1, 0)
    assert leave_one_out(g, normalize_std=True) == {"mean": 0.5, "std": math.sqrt(1.0 / 3)}
    up, down = (1.0 - (2.0 - 1.0) / 3) / (math.sqrt(1.0 / 3) + 1e-6), (0.0 - (2.0 - 0.0) / 3) / (math.sqrt(1.0 / 3) + 1e-6)
    assert [s.advantage for s in g.samples()] == [up, down, up, down]


def test_apply_passes_normalize_std_to_the_estimator_and_none_zeroes_every_advantage():
    """``apply`` defaults to normalize_std=True for both estimators and honours False; ``none``
    returns {} and sets every advantage, even one an estimator wrote before, to 0.0."""
    g = group_of(1, 0, 1, 0)
    sd = math.sqrt(1.0 / 3)
    assert apply(g, "loo") == {"mean": 0.5, "std": sd}
    up, down = (1.0 - (2.0 - 1.0) / 3) / (sd + 1e-6), (0.0 - (2.0 - 0.0) / 3) / (sd + 1e-6)
    assert [s.advantage for s in g.samples()] == [up, down, up, down]
    apply(g, "loo", normalize_std=False)
    assert [s.advantage for s in g.samples()] == [1.0 - (2.0 - 1.0) / 3, 0.0 - (2.0 - 0.0) / 3] * 2
    apply(g, "grpo", normalize_std=False)
    assert [s.advantage for s in g.samples()] == [0.5, -0.5, 0.5, -0.5]
    apply(g, "grpo")
    assert [s.advantage for s in g.samples()] == [0.5 / (sd + 1e-6), -0.5 / (sd + 1e-6)] * 2
    assert apply(g, "none") == {}
    assert [s.advantage for s in g.samples()] == [0.0, 0.0, 0.0, 0.0]


def test_only_trainable_sessions_get_advantages_even_when_another_kind_has_unremoved_samples():
    """``classify`` never builds such a session (a failed one's samples are removed, excluded and
    refused ones have none), so this pins the estimators' own guard: a session relabelled failed,
    excluded or refused keeps advantage 0.0 and is in no mean, std or baseline."""
    for kind in ("failed", "excluded", "refused"):
        g = group_of(1, 0, 1)
        g.sessions[2].kind = kind
        assert not g.sessions[2].samples[0].removed
        sd = math.sqrt(0.5)
        assert grpo(g) == {"mean": 0.5, "std": sd}
        assert [s.advantage for s in g.samples()] == [0.5 / (sd + 1e-6), -0.5 / (sd + 1e-6), 0.0]
        leave_one_out(g)
        assert [s.advantage for s in g.samples()] == [1.0, -1.0, 0.0]


def test_a_rerun_estimator_zeroes_the_stale_advantage_of_a_sample_removed_since():
    """Advantages are written in place, so a re-run must overwrite every one: after trajectory 3
    turns failed (removed, mask 0, as ``classify`` does to an unaligned timeout) grpo and
    leave-one-out give it 0.0 and use [1, 0, 1]; when one trajectory is left (all equal) every
    advantage the earlier run wrote is 0.0."""
    for estimator in (grpo, leave_one_out):
        g = group_of(1, 0, 1, 0)
        estimator(g)
        assert g.samples()[3].advantage != 0.0
        o = g.sessions[3]
        o.kind = "failed"
        for s in o.samples:
            s.removed, s.loss_mask = True, [0] * s.response_length
        estimator(g, normalize_std=False)
        expected = [1 - 2 / 3, 0 - 2 / 3, 1 - 2 / 3] if estimator is grpo else [1 - 0.5, 0 - 1.0, 1 - 0.5]
        assert [s.advantage for s in g.samples()] == expected + [0.0]
        for o in g.sessions[1:]:
            o.kind = "failed"
            for s in o.samples:
                s.removed = True
        estimator(g, normalize_std=True)
        assert [s.advantage for s in g.samples()] == [0.0, 0.0, 0.0, 0.0]


def test_a_removed_sample_never_makes_the_group_older():
    """A removed sample whose tokens ran under version 1 (mask left at 1: ``classify`` would also
    zero it) does not lower the group's version from 3, in ``Group.version`` and ``group_version``;
    with only that sample the version is the stamp (2)."""
    g = group_of(1, 0, stamp=2)
    old = classify(with_turn_versions(result(index=2), ["1"] * 5), trajectory_index=2)
    assert old.samples[0].oldest_version == 1 and sum(old.samples[0].loss_mask) > 0
    old.kind, old.samples[0].removed = "failed", True
    g.sessions.append(old)
    assert g.version == 3
    assert group_version(g.samples(), g.stamp) == 3
    assert group_version(g.samples()[2:], g.stamp) == 2
    old.samples[0].removed = False
    assert g.version == 1 and group_version(g.samples(), g.stamp) == 1


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
