"""``token_versions``: one policy version per response token, from the trace's metadata; a turn a
weight update cut and the proxy continued (a partial rollout) carries ``version_segments``, and
each stretch of its tokens gets its own version, so a group's staleness is its oldest token's."""

from __future__ import annotations

from polar_trainer.versions import oldest, token_versions

SEGMENTS = [
    {"len": 3, "policy_version": "4", "weight_version_start": "4", "weight_version": "4"},
    {"len": 2, "policy_version": "5", "weight_version_start": "5", "weight_version": "5"},
]


def test_a_continued_conversation_turn_gives_each_stretch_its_version():
    trace = {
        "response_ids": [1, 2, 3, 4, 5, 6, 7, 8],
        "loss_mask": [1, 1, 0, 1, 1, 1, 1, 1],
        "metadata": {
            "turns": [
                {"sampled_start": 0, "sampled_len": 2, "policy_version": "3"},
                {"sampled_start": 3, "sampled_len": 5, "policy_version": "4", "version_segments": SEGMENTS},
            ]
        },
    }
    versions = token_versions(trace)
    assert versions == [3, 3, None, 4, 4, 4, 5, 5]
    assert oldest(versions, trace["loss_mask"]) == 3


def test_a_continued_per_request_trace_too_and_segments_that_do_not_cover_the_turn_are_ignored():
    trace = {"response_ids": [1, 2, 3, 4, 5], "metadata": {"policy_version": "4", "version_segments": SEGMENTS}}
    assert token_versions(trace) == [4, 4, 4, 5, 5]
    short = {"response_ids": [1, 2, 3, 4, 5, 6], "metadata": {"policy_version": "4", "version_segments": SEGMENTS}}
    assert token_versions(short) == [4] * 6
