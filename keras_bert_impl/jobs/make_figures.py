"""Pictures of a run: training curves from TensorBoard event files, and an
attention heatmap of one sentence through a BERT checkpoint
(`tools/make_figures.py`, console `bert-figures`).

Example:
>>> read_scalars("/nonexistent/run")
{}
"""

import sys

from keras_bert_impl import filesystem
from keras_bert_impl.data.pipeline_options import without_autotune_thread
from keras_bert_impl.extras import import_extra


def read_scalars(directory, log=None):
    """`{tag: [(step, value), ...]}` from every event file below `directory`.

    Only scalars: histograms and images are passed over. An event file cut
    short (its writer killed) gives the points before the cut, and `log`
    (a `log(message)`, default stderr) names it.
    """
    log = log or (lambda message: print(f"make_figures: {message}", file=sys.stderr))
    if not filesystem.isdir(directory):
        return {}
    import tensorflow as tf

    paths = sorted(
        filesystem.join(parent, name)
        for parent, _, names in tf.io.gfile.walk(directory)
        for name in names
        if name.startswith("events.out.tfevents.")
    )

    scalars = {}
    for path in paths:
        try:
            for record in without_autotune_thread(tf.data.TFRecordDataset(path)):
                event = tf.compat.v1.Event.FromString(record.numpy())
                for value in event.summary.value:
                    number = _scalar(value, tf)
                    if number is not None:
                        scalars.setdefault(value.tag, []).append((event.step, number))
        except tf.errors.DataLossError as error:
            log(f"{path}: cut short or damaged ({error.message.splitlines()[0]}); using the points before it")
    return scalars


def _scalar(value, tf):
    """A summary value as a float, or None where it is not a scalar."""
    if value.HasField("simple_value"):
        return value.simple_value
    if not value.HasField("tensor"):
        return None
    array = tf.make_ndarray(value.tensor)
    if array.size != 1 or array.dtype.kind not in "fiub":
        return None
    return float(array.reshape(()))


def _pyplot():
    matplotlib = import_extra("matplotlib", "demo", "bert-figures")
    matplotlib.use("Agg")
    return import_extra("matplotlib.pyplot", "demo", "bert-figures")


def save_png(figure, path):
    """Writes `figure` as a PNG at `path`, atomically (parent directories made)."""
    from keras_bert_impl.io import atomic_output

    parent = filesystem.dirname(path)
    if parent:
        filesystem.makedirs(parent)
    with atomic_output(path) as partial, filesystem.open_file(partial, "wb") as f:
        figure.savefig(f, format="png", dpi=110, bbox_inches="tight")


def plot_curves(event_dirs, path):
    """One panel per run and scalar tag with more than one point, as a PNG.

    Raises:
        FileNotFoundError: no such scalars under `event_dirs`.
    """
    runs = {filesystem.basename(d) or d: read_scalars(d) for d in event_dirs}
    panels = [(run, tag, points) for run, scalars in runs.items() for tag, points in sorted(scalars.items()) if len(points) > 1]
    if not panels:
        raise FileNotFoundError(f"no scalar summaries found under {', '.join(event_dirs)}")
    plt = _pyplot()
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


def plot_attention(bert_config_file, init_checkpoint, vocab_file, path, sentence, layer=-1, do_lower_case=True):
    """The heads' mean attention of `layer` over the tokens of `sentence`, as a PNG."""
    import numpy as np

    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.data.text_pairs import TextPairExample, convert_example_to_features
    from keras_bert_impl.models.bert_model import BertModel
    from keras_bert_impl.tokenization import FullTokenizer

    plt = _pyplot()
    config = BertConfig.from_json_file(bert_config_file)
    model = BertModel(config, output_attention_probs=True)
    load_original_checkpoint(model, init_checkpoint)
    tokenizer = FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    features = convert_example_to_features(TextPairExample(0, sentence, None), tokenizer, min(64, config.max_position_embeddings))
    length = sum(features.input_mask)
    inputs = {key: np.array([getattr(features, key)], "int32") for key in ("input_ids", "input_mask", "segment_ids")}
    probs = np.asarray(model(inputs)["attention_probs"][layer])[0, :, :length, :length].mean(axis=0)
    figure, axis = plt.subplots(figsize=(0.45 * length + 2, 0.45 * length + 1.5))
    image = axis.imshow(probs, cmap="viridis")
    axis.set_xticks(range(length), features.tokens[:length], rotation=90, fontsize=8)
    axis.set_yticks(range(length), features.tokens[:length], fontsize=8)
    shown = layer if layer >= 0 else config.num_hidden_layers + layer
    axis.set_title(f"attention, layer {shown}, mean over {config.num_attention_heads} heads", fontsize=9)
    figure.colorbar(image, ax=axis, fraction=0.04)
    save_png(figure, path)
    plt.close(figure)


def make_figures(
    *,
    event_dirs=None,
    curves_png=None,
    bert_config_file=None,
    init_checkpoint=None,
    vocab_file=None,
    do_lower_case=True,
    sentence="The weather is lovely today.",
    layer=-1,
    attention_png=None,
):
    """Writes `curves_png` from the comma list `event_dirs`, and/or
    `attention_png` of `sentence` through the checkpoint."""
    if curves_png:
        plot_curves([d for d in event_dirs.split(",") if d], curves_png)
        print(f"make_figures: wrote {curves_png}", file=sys.stderr)
    if attention_png:
        plot_attention(bert_config_file, init_checkpoint, vocab_file, attention_png, sentence, layer, do_lower_case)
        print(f"make_figures: wrote {attention_png}", file=sys.stderr)
