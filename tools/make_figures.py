#!/usr/bin/env python
"""Pictures of a run: training curves from TensorBoard event files, and an
attention heatmap of one sentence through a BERT checkpoint.

Examples:
    bert-figures --event_dirs=pretrain_out,classifier_out --curves_png=curves.png
    bert-figures --bert_config_file=release/bert_config.json \
      --init_checkpoint=release/bert_model.ckpt --vocab_file=release/vocab.txt \
      --sentence="The weather is lovely today." --attention_png=attention.png
"""

import glob
import os
import sys

if __package__ in (None, ""):  # run as `python tools/make_figures.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_impl.cli import FlagParser, quiet_tensorflow, run_tool  # noqa: E402


def build_parser():
    parser = FlagParser(prog="make_figures", description="Training curves and an attention heatmap as PNG.")
    add = parser.add_argument
    add("--event_dirs", help="Comma list of directories holding TensorBoard event files (searched recursively).")
    add("--curves_png", help="Where to write the training curves.")
    add("--bert_config_file", help="bert_config.json for the attention heatmap.")
    add("--init_checkpoint", help="Checkpoint for the attention heatmap.")
    add("--vocab_file", help="vocab.txt for the attention heatmap.")
    parser.add_bool("do_lower_case", True, "Lower-case the sentence")
    add("--sentence", default="The weather is lovely today.", help="Sentence for the heatmap (default: %(default)s).")
    add("--layer", type=int, default=-1, help="Encoder layer of the heatmap (default: %(default)s, the last).")
    add("--attention_png", help="Where to write the attention heatmap.")
    return parser


def read_scalars(directory):
    """`{tag: [(step, value), ...]}` from every event file below `directory`."""
    import tensorflow as tf

    scalars = {}
    for path in sorted(glob.glob(os.path.join(glob.escape(directory), "**", "events.out.tfevents.*"), recursive=True)):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                number = value.simple_value if value.HasField("simple_value") else float(tf.make_ndarray(value.tensor))
                scalars.setdefault(value.tag, []).append((event.step, number))
    return scalars


def save_png(figure, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    partial = f"{path}.partial-{os.getpid()}.png"
    figure.savefig(partial, dpi=110, bbox_inches="tight")
    os.replace(partial, path)


def plot_curves(event_dirs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {os.path.basename(d.rstrip("/")) or d: read_scalars(d) for d in event_dirs}
    panels = [(run, tag, points) for run, scalars in runs.items() for tag, points in sorted(scalars.items()) if len(points) > 1]
    if not panels:
        raise FileNotFoundError(f"no scalar summaries found under {', '.join(event_dirs)}")
    columns = 3
    rows = (len(panels) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.8 * rows), squeeze=False)
    for axis, (run, tag, points) in zip(axes.flat, panels):
        steps, values = zip(*sorted(points))
        axis.plot(steps, values, marker=".", linewidth=1)
        axis.set_title(f"{run}: {tag}", fontsize=9)
        axis.set_xlabel("step", fontsize=8)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(panels):]:
        axis.axis("off")
    figure.tight_layout()
    save_png(figure, path)
    plt.close(figure)


def plot_attention(args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.data.text_pairs import TextPairExample, convert_example_to_features
    from keras_bert_impl.models.bert_model import BertModel
    from keras_bert_impl.tokenization import FullTokenizer

    config = BertConfig.from_json_file(args.bert_config_file)
    model = BertModel(config, output_attention_probs=True)
    load_original_checkpoint(model, args.init_checkpoint)
    tokenizer = FullTokenizer(args.vocab_file, do_lower_case=args.do_lower_case)
    features = convert_example_to_features(TextPairExample(0, args.sentence, None), tokenizer, min(64, config.max_position_embeddings))
    length = sum(features.input_mask)
    inputs = {key: np.array([getattr(features, key)], "int32") for key in ("input_ids", "input_mask", "segment_ids")}
    probs = np.asarray(model(inputs)["attention_probs"][args.layer])[0, :, :length, :length].mean(axis=0)
    figure, axis = plt.subplots(figsize=(0.45 * length + 2, 0.45 * length + 1.5))
    image = axis.imshow(probs, cmap="viridis")
    axis.set_xticks(range(length), features.tokens[:length], rotation=90, fontsize=8)
    axis.set_yticks(range(length), features.tokens[:length], fontsize=8)
    layer = args.layer if args.layer >= 0 else config.num_hidden_layers + args.layer
    axis.set_title(f"attention, layer {layer}, mean over {config.num_attention_heads} heads", fontsize=9)
    figure.colorbar(image, ax=axis, fraction=0.04)
    save_png(figure, args.attention_png)
    plt.close(figure)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not (args.curves_png or args.attention_png):
        parser.error("give --curves_png and/or --attention_png")
    if args.curves_png:
        parser.require(args, "event_dirs")
    if args.attention_png:
        parser.require(args, "bert_config_file", "init_checkpoint", "vocab_file")
    quiet_tensorflow()
    if args.curves_png:
        plot_curves([d for d in args.event_dirs.split(",") if d], args.curves_png)
        print(f"make_figures: wrote {args.curves_png}", file=sys.stderr)
    if args.attention_png:
        plot_attention(args)
        print(f"make_figures: wrote {args.attention_png}", file=sys.stderr)


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
