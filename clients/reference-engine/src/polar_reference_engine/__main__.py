"""``python -m polar_reference_engine init|serve`` (see ``--help``)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading


def _serve(args: argparse.Namespace) -> int:
    import torch

    from .engine import Engine
    from .server import make_server

    torch.set_num_threads(args.threads)
    try:
        engine = Engine(
            args.model_path,
            weight_version=args.weight_version,
            context_length=args.context_length,
            max_batch=args.max_batch,
            seed=args.seed,
            enable_return_routed_experts=args.enable_return_routed_experts,
        )
    except (OSError, ValueError) as err:
        print(f"polar-reference-engine: --model-path {args.model_path}: {err}", file=sys.stderr)
        return 2
    engine.start()
    server = make_server(engine, args.host, args.port, args.served_model_name, quiet=not args.log_requests)
    host, port = server.server_address[:2]
    stop = threading.Event()

    def shutdown(*_: object) -> None:
        if not stop.is_set():
            stop.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    params = sum(p.numel() for p in engine.model.parameters())
    # One line on stdout that a launcher can wait for.
    print(
        json.dumps(
            {
                "ready": f"http://{host}:{port}",
                "model_path": args.model_path,
                "parameters": params,
                "context_length": engine.context_length,
                "weight_version": engine.weight_version,
            }
        ),
        flush=True,
    )
    server.serve_forever(poll_interval=0.2)
    engine.stop()
    server.server_close()
    return 0


def _init(args: argparse.Namespace) -> int:
    from .model import create_tiny_model

    favor = [w for w in args.favor.split(",") if w] if args.favor else []
    try:
        info = create_tiny_model(
            args.out,
            args.tokenizer_dir,
            favor=favor,
            family_name=args.family,
            hidden=args.hidden,
            layers=args.layers,
            heads=args.heads,
            kv_heads=args.kv_heads,
            context_length=args.context_length,
            seed=args.seed,
            embed_std=args.embed_std,
            favored_mass=args.favored_mass,
            moe_experts=args.moe_experts,
            moe_top_k=args.moe_top_k,
            moe_intermediate=args.moe_intermediate,
        )
    except ValueError as err:
        print(f"polar-reference-engine init: {err}", file=sys.stderr)
        return 2
    print(json.dumps(info))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m polar_reference_engine", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve a checkpoint over SGLang's /generate subset")
    s.add_argument("--model-path", required=True, help="checkpoint folder (config.json, weights, tokenizer.json)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=30000, help="0 = any free port (printed in the ready line)")
    s.add_argument("--weight-version", default="default", help="the version /generate and /model_info report")
    s.add_argument("--context-length", type=int, default=None, help="default: the model's max_position_embeddings")
    s.add_argument("--max-batch", type=int, default=32, help="requests decoded together per iteration")
    s.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    s.add_argument("--seed", type=int, default=None, help="seed of the sampler (requests may set sampling_seed)")
    s.add_argument("--served-model-name", default="polar-reference-tiny")
    s.add_argument("--log-requests", action="store_true")
    s.add_argument(
        "--enable-return-routed-experts",
        action="store_true",
        help="capture each position's expert routes (MoE checkpoints only) and return them to requests "
        "that ask with return_routed_experts, as SGLang's flag of the same name",
    )
    s.set_defaults(run=_serve)
    i = sub.add_parser("init", help="create a tiny randomly initialised checkpoint (see polar_reference_engine.model)")
    i.add_argument("--out", required=True)
    i.add_argument("--tokenizer-dir", required=True, help="folder with tokenizer.json and tokenizer_config.json")
    i.add_argument(
        "--family",
        default="qwen3",
        help="the model family the tokenizer folder is of: qwen3 (default) or deepseek_v3; it sets the "
        "vocabulary size, the stop ids and the probe prompt (see polar_reference_engine.model)",
    )
    i.add_argument("--favor", default="", help="comma-separated words the initial policy favours, one token each in the folder's tokenizer")
    i.add_argument("--hidden", type=int, default=32)
    i.add_argument("--layers", type=int, default=2)
    i.add_argument("--heads", type=int, default=4)
    i.add_argument("--kv-heads", type=int, default=2)
    i.add_argument("--context-length", type=int, default=512)
    i.add_argument("--seed", type=int, default=0)
    i.add_argument("--embed-std", type=float, default=0.2)
    i.add_argument("--favored-mass", type=float, default=0.9)
    i.add_argument("--moe-experts", type=int, default=0, help="experts per layer: a Qwen3-MoE checkpoint (0: dense, the default)")
    i.add_argument("--moe-top-k", type=int, default=0, help="experts each token is routed to (with --moe-experts)")
    i.add_argument("--moe-intermediate", type=int, default=None, help="width of each expert (default 2 x hidden)")
    i.set_defaults(run=_init)
    args = ap.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
