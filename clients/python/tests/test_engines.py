"""The engine calls of an update function, against the REAL simulated engine (SGLang's routes)."""

from __future__ import annotations

import socket

import pytest

from polar_trainer import EngineError, engines


def test_versions_must_be_decimal_integers_and_urls_given():
    with pytest.raises(ValueError, match="decimal integer"):
        engines.set_weight_version("http://127.0.0.1:9", "step-3")
    with pytest.raises(ValueError, match="decimal integer"):
        engines.update_weights_from_disk("http://127.0.0.1:9", "ckpt", "03")
    with pytest.raises(ValueError, match="engine_urls"):
        engines.weight_versions([])


def test_an_unreachable_engine_is_an_engine_error_with_status_0():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(EngineError) as e:
        engines.set_weight_version(f"http://127.0.0.1:{port}", 1, timeout=5)
    assert e.value.status == 0 and "/update_weight_version" in e.value.message


@pytest.mark.stack
def test_update_relabel_and_read_back_on_the_sim_engine(stack):
    url = stack.engine_url
    out = engines.update_weights_from_disk([url], "sim-checkpoints/7", 7)
    assert out[0]["success"] is True
    assert engines.weight_versions(url) == {url: "7"}
    engines.set_weight_version(url + "/", "8")
    assert engines.weight_versions([url]) == {url: "8"}
    # An engine that refuses the call (here: a route it does not have) names it.
    with pytest.raises(EngineError) as e:
        engines._call(url, "POST", "/no_such_route", {}, 10)
    assert e.value.status == 404
    engines.set_weight_version(url, 0)
