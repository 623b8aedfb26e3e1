"""Routed experts (MoE routing replay) on samples, in the export and in slime's ``Sample``: pure
units on a real result whose trace gets routes in the gateway's wire form."""

from __future__ import annotations

import base64
import os
import struct
import sys

import pytest
from results import result, trace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "standins"))

from slime.utils.types import Sample as SlimeSample  # noqa: E402

from polar_trainer.export import sample_row  # noqa: E402
from polar_trainer.groups import Group  # noqa: E402
from polar_trainer.routed_experts import RoutedExperts  # noqa: E402
from polar_trainer.samples import classify, trace_sample  # noqa: E402
from polar_trainer.slime.adapter import to_slime_samples  # noqa: E402

LAYERS, TOP_K = 3, 2


def routes_for(t, layers=LAYERS, top_k=TOP_K):
    """Routes whose ids name their place: position * 100 + layer * 10 + slot."""
    rows = len(t["prompt_ids"]) + len(t["response_ids"]) - 1
    ids = [p * 100 + l * 10 + k for p in range(rows) for l in range(layers) for k in range(top_k)]
    data = base64.b64encode(struct.pack(f"<{len(ids)}i", *ids)).decode()
    return {"start": 0, "rows": rows, "layers": layers, "top_k": top_k, "data": data}


def routed_trace():
    t = trace()
    t["routed_experts"] = routes_for(t)
    return t


def test_a_trace_s_routes_reach_its_sample_one_row_per_position_but_the_last():
    t = routed_trace()
    o = classify(result(traces=[t]), trajectory_index=0, group_id="run-g000000", group_index=0)
    [s] = o.samples
    r = s.routed_experts
    assert (r.rows, r.layers, r.top_k) == (len(s.tokens) - 1, LAYERS, TOP_K)
    assert r.row(0) == [[0, 1], [10, 11], [20, 21]]
    assert r.row(r.rows - 1)[2] == [(r.rows - 1) * 100 + 20, (r.rows - 1) * 100 + 21]
    with pytest.raises(IndexError, match=r"position .* outside"):
        r.row(r.rows)


def test_no_routes_is_none_and_routes_that_do_not_cover_the_trace_are_refused():
    [s] = classify(result(), trajectory_index=0, group_id="g", group_index=0).samples
    assert s.routed_experts is None
    t = routed_trace()
    t["routed_experts"]["rows"] -= 1
    with pytest.raises(ValueError, match=r"covers \[0, \d+\), the trace has positions"):
        RoutedExperts.from_trace(t)
    t = routed_trace()
    t["routed_experts"]["data"] = t["routed_experts"]["data"][:-8]
    with pytest.raises(ValueError):
        RoutedExperts.from_trace(t)


def test_a_sample_cut_to_max_tokens_keeps_the_routes_of_what_it_keeps():
    t = routed_trace()
    cap = len(t["prompt_ids"]) + 5
    s = trace_sample(t, reward=1.0, status="completed", removed=False, where=dict(group_id="g", group_index=0, trajectory_index=0, trace_index=0, session_id="g.0.0", task_id="0"), max_tokens=cap)
    assert len(s.tokens) == cap and s.routed_experts.rows == cap - 1
    assert s.routed_experts.row(cap - 2) == RoutedExperts.from_trace(t).row(cap - 2)


def test_the_export_row_carries_the_wire_form_and_reads_back():
    [s] = classify(result(traces=[routed_trace()]), trajectory_index=0, group_id="g", group_index=0).samples
    row = sample_row(s, run_id="r", step=1)
    back = RoutedExperts.from_trace({"prompt_ids": row["tokens"][:-1], "response_ids": [0], "routed_experts": row["routed_experts"]})
    assert back == s.routed_experts


def test_slime_gets_rollout_routed_experts_shaped_tokens_minus_one_by_layers_by_top_k():
    np = pytest.importorskip("numpy")
    g = Group(group_id="run-g000005", index=5, stamp=2)
    g.sessions.append(classify(result(traces=[routed_trace()]), trajectory_index=0, group_id=g.group_id, group_index=5))
    [s] = to_slime_samples(g, _args(), rollout_id=1, cls=SlimeSample)
    assert isinstance(s.rollout_routed_experts, np.ndarray) and s.rollout_routed_experts.dtype == np.int32
    assert s.rollout_routed_experts.shape == (len(s.tokens) - 1, LAYERS, TOP_K)
    assert s.rollout_routed_experts[1, 2].tolist() == [120, 121]


def _args():
    from types import SimpleNamespace

    return SimpleNamespace(reward_key=None)
