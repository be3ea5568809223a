"""Training and evaluation on the real tokens: each batch cut after its longest row.

Examples are padded to `max_seq_length` (128 by default, as the original),
while real sentences are mostly far shorter. Every position of a model here
reads only real positions (the attention mask gives a padded key
exp(-10000) = 0 weight), and the losses of classification (from [CLS]) and
tagging (weighted by the labelled pieces) read only real positions, so the
padding columns that no row of a batch reaches can go before the model
runs: the same batches in the same order, the same loss and gradients
within float rounding, at a fraction of the work.

The cut width is rounded up to a multiple of a bucket, so a compiler that
builds one program per shape (XLA on a GPU, a TPU) sees a bounded number
of shapes.

Example:
>>> import numpy as np
>>> batch = ({"input_ids": np.array([[2, 5, 7, 0, 0, 0], [2, 9, 0, 0, 0, 0]]),
...           "input_mask": np.array([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]])},
...          np.array([[1, 2, 3, 0, 0, 0], [4, 5, 0, 0, 0, 0]]), np.array([0, 1]))
>>> x, tags, labels = cut_batch(batch, bucket_size=2)
>>> x["input_ids"].numpy().tolist(), tags.numpy().tolist(), labels.tolist()
([[2, 5, 7, 0], [2, 9, 0, 0]], [[1, 2, 3, 0], [4, 5, 0, 0]], [0, 1])
"""

import tensorflow as tf

from keras_bert_impl.inference.padding_free import used_length
from keras_bert_impl.inference.plan import cut_bucket_size


def default_bucket_size(max_seq_length):
    """The rounding of cut widths on this machine (`inference.plan.cut_bucket_size`).

    Example:
    >>> default_bucket_size(128) in (8, 16)
    True
    """
    return cut_bucket_size(max_seq_length)


def cut_batch(batch, bucket_size=8):
    """Cuts every [batch, seq] tensor of a batch after its longest row (rounded up).

    The width is that of `input_mask` (the first dict holding one); every
    tensor of rank 2 or more whose second dimension has that width is cut
    (token inputs, and per-token labels and weights), everything else
    passes through.

    Args:
        batch: A structure (dicts, tuples) of tensors with `input_mask`
            [batch, seq] in it.
        bucket_size: Round the width up to a multiple of this.

    Returns:
        The same structure, cut.
    """
    input_mask = _find_input_mask(batch)
    if input_mask is None:
        raise ValueError("cut_batch needs an input_mask in the batch")
    width = input_mask.shape[1]
    length = used_length(input_mask, bucket_size)

    def cut(value):
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) >= 2 and shape[1] is not None and shape[1] == width:
            return tf.convert_to_tensor(value)[:, :length]
        return value

    return tf.nest.map_structure(cut, batch)


def _find_input_mask(batch):
    if isinstance(batch, dict):
        if "input_mask" in batch:
            return tf.convert_to_tensor(batch["input_mask"])
        batch = list(batch.values())
    if isinstance(batch, (tuple, list)):
        for part in batch:
            found = _find_input_mask(part)
            if found is not None:
                return found
    return None


def cut_padding(dataset, bucket_size=8):
    """`dataset.map(cut_batch)`: a dataset of batches, each cut after its longest row.

    Args:
        dataset: A batched `tf.data.Dataset` with `input_mask` in its elements
            (a static width, as after `batch` of fixed-length features).
        bucket_size: See `cut_batch`.

    Returns:
        The cut dataset, in the same order.
    """
    return dataset.map(lambda *batch: cut_batch(batch[0] if len(batch) == 1 else batch, bucket_size))
