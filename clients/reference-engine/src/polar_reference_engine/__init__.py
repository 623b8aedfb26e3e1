"""A small reference inference server for tests and demos: a tiny causal LM (torch + transformers)
behind the subset of SGLang's native HTTP API that Polar-TS uses. It is NOT a replacement for
SGLang: no KV cache, no GPU kernels, one process; its point is a real model whose sampled tokens and
logprobs a trainer can recompute exactly, on a machine without a GPU.

Example::

    python -m polar_reference_engine init --out .polar/tiny --tokenizer-dir TOKENIZER_DIR --favor red,blue,"<|im_end|>"
    python -m polar_reference_engine serve --model-path .polar/tiny --port 30000 --weight-version 0
"""

__version__ = "0.1.0"
