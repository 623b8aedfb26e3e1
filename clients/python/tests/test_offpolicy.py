"""Off-policy correction inputs (polar_trainer.offpolicy): per-token staleness, the rollout-vs-train
logprob gap, and the TIS / MIS / IcePop / CISPO weights. Pure units: every expected value is worked
out by hand in the comment next to it (exp(0.5) = 1.6487212707001282, …), never with the package's
own formula; the samples with versions come from the real calculator result."""

from __future__ import annotations

import math

import pytest
from results import result, with_turn_versions

from polar_trainer import offpolicy
from polar_trainer.export import read_jsonl, sample_row, write_jsonl
from polar_trainer.offpolicy import (
    batch_logprob_gap,
    cispo_weights,
    correction_weights,
    icepop_weights,
    logprob_gap,
    merge_logprob_gaps,
    mis_weights,
    staleness_stats,
    tis_weights,
    token_staleness,
)
from polar_trainer.samples import Sample, classify

E_05 = 1.6487212707001282  # exp(0.5)
E_03 = 1.3498588075760032  # exp(0.3)
E_04 = 1.4918246976412703  # exp(0.4)
E_01 = 1.1051709180756477  # exp(0.1)
E_15 = 4.4816890703380645  # exp(1.5)
E_M2 = 0.1353352832366127  # exp(-2)


def sample(mask, rollout, versions=None, removed=False) -> Sample:
    n = len(mask)
    return Sample(
        group_id="g", group_index=0, trajectory_index=0, trace_index=0, session_id="g.0.0", task_id="t",
        tokens=[1, 2] + list(range(10, 10 + n)), prompt_length=2, loss_mask=list(mask), rollout_logprobs=list(rollout),
        token_versions=list(versions if versions is not None else [None] * n), reward=1.0, status="completed", removed=removed,
    )


# --- staleness ------------------------------------------------------------------------------------


def test_token_staleness_is_policy_version_minus_each_tokens_version_unknown_stays_none():
    assert token_staleness([3, None, 4, 0], 4) == [1, None, 0, 4]
    assert token_staleness([3, None], "4") == [1, None]  # a decimal string, as on the wire
    assert token_staleness([], 7) == []
    assert token_staleness([5], 4) == [-1]  # newer than the trainer's version: reported, not hidden


@pytest.mark.parametrize("bad", ["default", -1, True, None, 2.5])
def test_token_staleness_refuses_a_bad_policy_version_naming_it(bad):
    with pytest.raises(ValueError, match="policy_version"):
        token_staleness([3], bad)


@pytest.mark.parametrize("bad", ["3", -1, True, 3.0])
def test_token_staleness_refuses_a_bad_token_version_naming_its_index(bad):
    with pytest.raises(ValueError, match=r"token_versions\[1\]"):
        token_staleness([3, bad], 4)


def test_staleness_stats_cover_trained_tokens_only():
    # Trained: versions 3, None, 4 (staleness 1, unknown, 0); the context token of version 2 does not count.
    assert staleness_stats([3, None, 4, 2], [1, 1, 1, 0], 4) == {"max": 1, "mean": 0.5, "known": 2, "unknown": 1}
    assert staleness_stats([None, None], [1, 1], 4) == {"max": None, "mean": None, "known": 0, "unknown": 2}
    assert staleness_stats([], [], 4) == {"max": None, "mean": None, "known": 0, "unknown": 0}
    with pytest.raises(ValueError, match="token_versions has 1 entries for 2"):
        staleness_stats([3], [1, 1], 4)


def test_samples_of_a_session_spanning_an_update_carry_their_staleness():
    # The real calculator result with its first turn under version 2 and the rest under 3.
    s = classify(with_turn_versions(result(), ["2", "3", "3", "3", "3"]), trajectory_index=0).samples[0]
    stale = s.token_staleness(4)
    trained = [(t, v) for t, v, m in zip(stale, s.token_versions, s.loss_mask) if m]
    assert {t for t, _ in trained} == {1, 2} and all(t == 4 - v for t, v in trained)
    # Context tokens (tool output, template glue) have no version, hence no staleness.
    assert all(t is None for t, m in zip(stale, s.loss_mask) if not m) and 0 in s.loss_mask
    first_turn = sum(1 for v, m in zip(s.token_versions, s.loss_mask) if m and v == 2)
    rest = sum(1 for v, m in zip(s.token_versions, s.loss_mask) if m and v == 3)
    assert first_turn > 0 and rest > 0
    assert s.max_staleness(4) == 2 == 4 - s.oldest_version
    assert s.mean_staleness(4) == pytest.approx((2 * first_turn + 1 * rest) / (first_turn + rest))
    assert s.max_staleness(3) == 1 and s.mean_staleness("3") == pytest.approx(first_turn / (first_turn + rest))


def test_a_removed_sample_has_no_trained_token_hence_no_staleness():
    s = sample([0, 0], [0.0, 0.0], versions=[3, 3], removed=True)
    assert s.token_staleness(4) == [1, 1]  # the versions are still there …
    assert s.max_staleness(4) is None and s.mean_staleness(4) is None  # … but nothing is trained


def test_export_rows_carry_token_and_sample_staleness_and_round_trip(tmp_path):
    s = classify(with_turn_versions(result(), ["2", "3", "3", "3", "3"]), trajectory_index=0).samples[0]
    row = sample_row(s, run_id="r", step=1, group_version=2, policy_version=4, staleness=2)
    assert row["token_staleness"] == [None if v is None else 4 - v for v in s.token_versions]
    assert row["sample_staleness"] == 2
    path = write_jsonl(str(tmp_path / "step.jsonl"), [row])
    assert list(read_jsonl(path)) == [row]
    # Without a policy version the columns are there, null.
    bare = sample_row(s, run_id="r")
    assert bare["token_staleness"] == [None] * s.response_length and bare["sample_staleness"] is None
    # A row written before the columns existed is still read; a wrong length is refused.
    old = {k: v for k, v in row.items() if k not in ("token_staleness", "sample_staleness")}
    write_jsonl(str(tmp_path / "old.jsonl"), [old])
    assert list(read_jsonl(str(tmp_path / "old.jsonl"))) == [old]
    write_jsonl(str(tmp_path / "bad.jsonl"), [dict(row, token_staleness=row["token_staleness"][:-1])])
    with pytest.raises(ValueError, match="token_staleness"):
        list(read_jsonl(str(tmp_path / "bad.jsonl")))
    # The per-token arrays every row has are still required.
    write_jsonl(str(tmp_path / "no-mask.jsonl"), [{k: v for k, v in row.items() if k != "loss_mask"}])
    with pytest.raises(KeyError, match="loss_mask"):
        list(read_jsonl(str(tmp_path / "no-mask.jsonl")))


# --- the logprob gap ------------------------------------------------------------------------------


def test_logprob_gap_by_hand():
    # d = train - rollout on the trained tokens: 0, 0.5, -0.0005; the fourth has no train logprob
    # (unchecked); the fifth is context (its gap of 6 must not count).
    train = [-1.0, -2.0, -0.5, None, -3.0]
    rollout = [-1.0, -2.5, -0.4995, -1.0, -9.0]
    g = logprob_gap(train, rollout, [1, 1, 1, 1, 0], threshold=1e-3)
    assert g["tokens"] == 3 and g["unchecked"] == 1 and g["threshold"] == 1e-3
    assert g["mean_abs"] == pytest.approx(0.5005 / 3, rel=1e-9)
    assert g["max_abs"] == pytest.approx(0.5, rel=1e-9)
    assert g["share_over_threshold"] == pytest.approx(1 / 3)  # only |0.5| > 1e-3
    # k3 = mean(exp(d) - 1 - d): 0, exp(0.5) - 1.5 = 0.1487212707001282, and for d = -0.0005
    # 1 - 0.0005 + 0.000000125 - … - 1 + 0.0005 = 1.2497916927e-7.
    assert g["kl_k3"] == pytest.approx((0.1487212707001282 + 1.2497916927e-7) / 3, rel=1e-9)
    assert g["kl_k1"] == pytest.approx((0 - 0.5 + 0.0005) / 3, rel=1e-9)  # mean(-d)


def test_k3_is_never_negative_and_k1_has_the_sign_of_rollout_minus_train():
    # The trainer MORE confident than the rollout on every token (d = +1): k1 = -1, k3 = e - 2.
    g = logprob_gap([-1.0, -1.0], [-2.0, -2.0], [1, 1])
    assert g["kl_k1"] == pytest.approx(-1.0) and g["kl_k3"] == pytest.approx(0.7182818284590451)
    # Less confident (d = -1): k1 = +1, k3 = exp(-1) - 1 + 1 = 0.36787944117144233.
    g = logprob_gap([-2.0], [-1.0], [1])
    assert g["kl_k1"] == pytest.approx(1.0) and g["kl_k3"] == pytest.approx(0.36787944117144233)


def test_the_threshold_is_strict_and_its_own_parameter():
    g = logprob_gap([-1.5, -1.25], [-1.0, -1.0], [1, 1], threshold=0.25)
    assert g["share_over_threshold"] == 0.5  # |-0.5| > 0.25; |-0.25| is not over 0.25
    assert logprob_gap([-1.0], [-1.0], [1])["threshold"] == 1e-3  # the default demo:rl reports


def test_a_sample_with_nothing_to_compare_gives_none_statistics_not_zeros():
    empty = logprob_gap([], [], [])
    assert empty == {"tokens": 0, "unchecked": 0, "threshold": 1e-3, "mean_abs": None, "max_abs": None, "share_over_threshold": None, "kl_k3": None, "kl_k1": None}
    assert logprob_gap([-1.0, -2.0], [-5.0, -5.0], [0, 0])["mean_abs"] is None
    assert logprob_gap([None], [-1.0], [1])["unchecked"] == 1


@pytest.mark.parametrize("bad", [-1e-3, math.nan, math.inf, "0.001", True])
def test_a_bad_threshold_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="threshold"):
        logprob_gap([-1.0], [-1.0], [1], threshold=bad)


def test_gap_inputs_are_checked_on_trained_tokens():
    with pytest.raises(ValueError, match="train_logprobs has 1 entries for 2"):
        logprob_gap([-1.0], [-1.0, -1.0], [1, 1])
    with pytest.raises(ValueError, match="rollout_logprobs has 3 entries for 2"):
        logprob_gap([-1.0, -1.0], [-1.0, -1.0, -1.0], [1, 1])
    with pytest.raises(ValueError, match=r"rollout_logprobs\[1\] must be finite"):
        logprob_gap([-1.0, -1.0], [-1.0, math.nan], [1, 1])
    with pytest.raises(ValueError, match=r"train_logprobs\[0\] must be finite"):
        logprob_gap([-math.inf], [-1.0], [1])
    with pytest.raises(ValueError, match=r"train_logprobs\[0\] must be a number, got '-1.0'"):
        logprob_gap(["-1.0"], [-1.0], [1])
    # On a context token anything goes: it is not compared.
    assert logprob_gap([math.nan, -1.0], [math.inf, -1.0], [0, 1])["tokens"] == 1


def test_batch_gap_counts_every_trained_token_once_and_merging_per_sample_metrics_agrees():
    a = sample([1, 1, 0], [-1.0, -2.5, -4.0])
    b = sample([1, 1], [-0.5, -1.0])
    removed = sample([0, 0], [-1.0, -1.0], removed=True)
    lps = {id(a): [-1.0, -2.0, -1.0], id(b): [-0.75, None], id(removed): [-9.0, -9.0]}
    g = batch_logprob_gap([(s, lps[id(s)]) for s in (a, b, removed)], threshold=0.3)
    # Compared: a's 0 and 0.5, b's -0.25; b's second token is unchecked; removed adds nothing.
    assert g["tokens"] == 3 and g["unchecked"] == 1
    assert g["mean_abs"] == pytest.approx(0.75 / 3) and g["max_abs"] == 0.5 and g["share_over_threshold"] == pytest.approx(1 / 3)
    assert g["kl_k1"] == pytest.approx((0 - 0.5 + 0.25) / 3)
    merged = merge_logprob_gaps(logprob_gap(lps[id(s)], s.rollout_logprobs, s.loss_mask, threshold=0.3) for s in (a, b, removed))
    assert merged == pytest.approx(g)
    assert merge_logprob_gaps([])["tokens"] == 0 and merge_logprob_gaps([])["mean_abs"] is None
    with pytest.raises(ValueError, match="threshold differs"):
        merge_logprob_gaps([logprob_gap([-1.0], [-1.0], [1], threshold=0.1), logprob_gap([-1.0], [-1.0], [1], threshold=0.2)])


# --- the weights -----------------------------------------------------------------------------------


def test_tis_truncates_the_ratio_at_the_cap_only_from_above():
    w = tis_weights([-1.0, -0.5, -3.0, -3.0], [-1.5, -1.5, -1.0, 0.0], [1, 1, 1, 0], cap=2.0)
    # exp(0.5); exp(1) = 2.718… truncated to 2; exp(-2) kept (no lower truncation); context: 0.
    assert w == pytest.approx([E_05, 2.0, E_M2, 0.0], rel=1e-12)
    # A ratio that would overflow exp() is the cap, not an error.
    assert tis_weights([0.0], [-800.0], [1], cap=5.0) == [5.0]


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, True, "2"])
def test_tis_refuses_a_bad_cap_naming_it(bad):
    with pytest.raises(ValueError, match="cap"):
        tis_weights([-1.0], [-1.0], [1], cap=bad)


def test_weights_need_a_train_logprob_on_every_trained_token_only():
    with pytest.raises(ValueError, match=r"train_logprobs\[1\] is None on a trained token"):
        tis_weights([-1.0, None], [-1.0, -1.0], [1, 1], cap=2.0)
    assert tis_weights([-1.0, None], [-1.0, -1.0], [1, 0], cap=2.0) == [1.0, 0.0]
    with pytest.raises(ValueError, match="rollout_logprobs has 1 entries for 2"):
        cispo_weights([-1.0, -1.0], [-1.0], [1, 1], eps_low=0.2, eps_high=0.2)
    assert tis_weights([], [], [], cap=2.0) == []


def test_mis_token_level_zeroes_ratios_outside_the_band_bounds_included():
    # exp(0.5) inside [0.5, 2]; exp(3) = 20.1 above; exp(-0.8) = 0.449 below; context: 0.
    w = mis_weights([-1.0, -1.0, -1.0, -1.0], [-1.5, -4.0, -0.2, -9.0], [1, 1, 1, 0], low=0.5, high=2.0, level="token")
    assert w == pytest.approx([E_05, 0.0, 0.0, 0.0], rel=1e-12)
    # Ratio exactly 1 is kept at either bound.
    assert mis_weights([-1.0], [-1.0], [1], low=1.0, high=2.0, level="token") == [1.0]
    assert mis_weights([-1.0], [-1.0], [1], low=0.5, high=1.0, level="token") == [1.0]


def test_mis_sequence_level_is_the_product_over_trained_tokens_all_or_nothing():
    # d = 0.5 and -0.2 on trained tokens → product exp(0.3) = 1.3499, inside [0.5, 2]; the context
    # token's d = 5 must not enter (it would make exp(5.3), outside).
    train, rollout, mask = [-1.0, -1.2, -1.0], [-1.5, -1.0, -6.0], [1, 1, 0]
    assert mis_weights(train, rollout, mask, low=0.5, high=2.0, level="sequence") == pytest.approx([E_03, E_03, 0.0], rel=1e-12)
    assert mis_weights(train, rollout, mask, low=0.5, high=1.2, level="sequence") == [0.0, 0.0, 0.0]
    assert mis_weights([-1.0, -1.0], [-5.0, -5.0], [0, 0], low=0.5, high=2.0, level="sequence") == [0.0, 0.0]


def test_mis_geometric_level_is_the_geometric_mean_ratio():
    # mean d = (0.5 - 0.2 + 0.9) / 3 = 0.4 → exp(0.4) = 1.4918 for every trained token.
    train, rollout, mask = [-1.0, -1.2, -0.1], [-1.5, -1.0, -1.0], [1, 1, 1]
    assert mis_weights(train, rollout, mask, low=0.5, high=2.0, level="geometric") == pytest.approx([E_04] * 3, rel=1e-12)
    assert mis_weights(train, rollout, mask, low=0.5, high=1.4, level="geometric") == [0.0] * 3
    # The product of the same tokens is exp(1.2) = 3.32: the sequence level rejects what geometric keeps.
    assert mis_weights(train, rollout, mask, low=0.5, high=2.0, level="sequence") == [0.0] * 3
    # A context token is not in the mean (with it, the mean would be 1.2 / 4 = 0.3).
    w = mis_weights(train + [-1.0], rollout + [-1.0], mask + [0], low=0.5, high=2.0, level="geometric")
    assert w == pytest.approx([E_04] * 3 + [0.0], rel=1e-12)


@pytest.mark.parametrize(
    "params,name",
    [
        ({"low": -0.1, "high": 2.0, "level": "token"}, "low"),
        ({"low": 1.5, "high": 2.0, "level": "token"}, "low"),
        ({"low": 0.5, "high": 0.9, "level": "token"}, "high"),
        ({"low": 0.5, "high": math.inf, "level": "token"}, "high"),
        ({"low": 1.0, "high": 1.0, "level": "token"}, "low must be below high"),
        ({"low": math.nan, "high": 2.0, "level": "token"}, "low"),
        ({"low": 0.5, "high": 2.0, "level": "seq"}, "level"),
    ],
)
def test_mis_refuses_bad_parameters_naming_them(params, name):
    with pytest.raises(ValueError, match=name):
        mis_weights([-1.0], [-1.0], [1], **params)


def test_icepop_masks_the_token_ratio_on_both_sides_and_equals_token_mis():
    # exp(0) = 1 kept; exp(2) = 7.39 > 5 masked; exp(-4) = 0.018 < 0.5 masked; exp(1.5) = 4.48 kept.
    train, rollout, mask = [-1.0, -1.0, -5.0, -0.5, -1.0], [-1.0, -3.0, -1.0, -2.0, -1.0], [1, 1, 1, 1, 0]
    w = icepop_weights(train, rollout, mask, alpha=0.5, beta=5.0)
    assert w == pytest.approx([1.0, 0.0, 0.0, E_15, 0.0], rel=1e-12)
    assert w == mis_weights(train, rollout, mask, low=0.5, high=5.0, level="token")


@pytest.mark.parametrize("params,name", [({"alpha": 1.5, "beta": 5.0}, "alpha"), ({"alpha": -0.5, "beta": 5.0}, "alpha"), ({"alpha": 0.5, "beta": 0.8}, "beta"), ({"alpha": 0.5, "beta": "5"}, "beta")])
def test_icepop_refuses_bad_parameters_naming_them(params, name):
    with pytest.raises(ValueError, match=name):
        icepop_weights([-1.0], [-1.0], [1], **params)


def test_cispo_clips_the_ratio_into_its_band_and_drops_no_token():
    # exp(1) clipped to 1.28; exp(-2) clipped up to 0.8; exp(0.1) kept; context 0.
    w = cispo_weights([-1.0, -3.0, -1.0, -1.0], [-2.0, -1.0, -1.1, -7.0], [1, 1, 1, 0], eps_low=0.2, eps_high=0.28)
    assert w == pytest.approx([1.28, 0.8, E_01, 0.0], rel=1e-12)
    # MiniMax's choice, no lower bound (eps_low = 1): exp(-2) stays 0.1353.
    assert cispo_weights([-3.0], [-1.0], [1], eps_low=1.0, eps_high=0.28) == pytest.approx([E_M2], rel=1e-12)
    assert cispo_weights([0.0], [-800.0], [1], eps_low=1.0, eps_high=4.0) == [5.0]  # no overflow


@pytest.mark.parametrize("params,name", [({"eps_low": 1.5, "eps_high": 0.2}, "eps_low"), ({"eps_low": -0.1, "eps_high": 0.2}, "eps_low"), ({"eps_low": 0.2, "eps_high": -0.1}, "eps_high"), ({"eps_low": 0.2, "eps_high": math.inf}, "eps_high"), ({"eps_low": None, "eps_high": 0.2}, "eps_low")])
def test_cispo_refuses_bad_parameters_naming_them(params, name):
    with pytest.raises(ValueError, match=name):
        cispo_weights([-1.0], [-1.0], [1], **params)


def test_correction_weights_dispatches_by_name_on_a_samples_own_arrays():
    s = sample([1, 1, 0], [-1.5, -4.0, -1.0])
    train = [-1.0, -1.0, -1.0]
    assert correction_weights(s, train, "tis", cap=2.0) == pytest.approx([E_05, 2.0, 0.0])
    assert correction_weights(s, train, "mis", low=0.5, high=2.0, level="token") == pytest.approx([E_05, 0.0, 0.0])
    assert correction_weights(s, train, "icepop", alpha=0.5, beta=5.0) == pytest.approx([E_05, 0.0, 0.0])
    assert correction_weights(s, train, "cispo", eps_low=1.0, eps_high=0.28) == pytest.approx([1.28, 1.28, 0.0])
    removed = sample([0, 0], [-1.0, -1.0], removed=True)
    assert correction_weights(removed, [-5.0, -5.0], "tis", cap=2.0) == [0.0, 0.0]
    with pytest.raises(ValueError, match="method must be one of tis, mis, icepop, cispo"):
        correction_weights(s, train, "ppo", cap=2.0)
    with pytest.raises(TypeError):
        correction_weights(s, train, "tis", alpha=0.5)
    assert offpolicy.CORRECTIONS == ("tis", "mis", "icepop", "cispo")


def test_weights_of_a_real_sample_are_one_where_train_and_rollout_agree():
    """The real calculator trace: with the train logprobs equal to the recorded ones every trained
    token's ratio is 1, and every context token's weight is 0 under each correction."""
    s = classify(result(), trajectory_index=0).samples[0]
    assert 0 < sum(s.loss_mask) < len(s.loss_mask)
    same = list(s.rollout_logprobs)
    for method, params in (("tis", {"cap": 2.0}), ("mis", {"low": 0.5, "high": 2.0, "level": "sequence"}), ("icepop", {"alpha": 0.5, "beta": 5.0}), ("cispo", {"eps_low": 0.2, "eps_high": 0.28})):
        w = correction_weights(s, same, method, **params)
        assert w == [1.0 if m else 0.0 for m in s.loss_mask], method
    g = logprob_gap(same, s.rollout_logprobs, s.loss_mask)
    assert g["tokens"] == sum(s.loss_mask) and g["max_abs"] == 0.0 and g["kl_k3"] == 0.0
