"""Texts longer than `max_seq_length`: cut, head + tail, or windows whose logits are pooled.

BERT reads at most `max_seq_length` positions, two of them `[CLS]` and
`[SEP]`: the original cuts a longer text after its first
`max_seq_length - 2` word pieces and the rest never reaches the model
(`cut`). Two ways keep it:

* `head_tail`: the first `head_tokens` and the last
  `max_seq_length - 2 - head_tokens` word pieces (Sun et al. 2019, "How to
  Fine-Tune BERT for Text Classification": 128 + 382 of a 512 window did best
  on IMDB). The default head is that share, a quarter of the room, rounded
  half up: `max_seq_length // 4`.
* `windows`: windows of `max_seq_length - 2` word pieces, each starting
  `window_stride` after the one before (default `max_seq_length // 2`, as
  the original SQuAD's `doc_stride` moves over a long paragraph), the last
  one ending where the text ends. Each window is one row for the model; the
  text's logits are the mean (or max) of its windows' (`window_pooling`).
  Training gives every window its text's label.

The same splitting is written three times, for the three places that need
it: on Python lists (`head_tail`, `window_spans`: the features of
`bert-run-classifier`, and the reference the tests hold the others to), on
ragged tensors of ids (`head_tail_ids`, `window_ids`: `TextClassifier`'s
preprocessing and the exported raw-text signature) and the pooling in
NumPy (`pool_window_logits`) and TF (`segment_pool`). TensorFlow is
imported only by the TF functions, so the options are checked before it
starts.

Example:
>>> options = LongTextOptions("windows").resolved(max_seq_length=8)
>>> options.window_stride, options.window_pooling
(4, 'mean')
>>> window_spans(10, window=6, stride=4)
[(0, 6), (4, 10)]
>>> head_tail(list("abcdefghij"), head_tokens=2, max_tokens=6)
['a', 'b', 'g', 'h', 'i', 'j']
"""

import dataclasses

import numpy as np

CUT = "cut"
HEAD_TAIL = "head_tail"
WINDOWS = "windows"
LONG_TEXT_MODES = (CUT, HEAD_TAIL, WINDOWS)
MEAN = "mean"
MAX = "max"
WINDOW_POOLINGS = (MEAN, MAX)
# [CLS] and [SEP] (RoBERTa's <s> and </s>) around one text.
SPECIAL_TOKENS_PER_TEXT = 2


def text_room(max_seq_length):
    """Word pieces of one text that fit in `max_seq_length` beside `[CLS]` and `[SEP]`.

    >>> text_room(512)
    510
    """
    return max_seq_length - SPECIAL_TOKENS_PER_TEXT


def default_head_tokens(max_seq_length):
    """Sun et al.'s head share, a quarter of the room, rounded half up: 128 of 510 at 512.

    >>> [default_head_tokens(n) for n in (512, 128, 64, 8)]
    [128, 32, 16, 2]
    """
    return (text_room(max_seq_length) + 2) // 4


def default_window_stride(max_seq_length):
    """Half of `max_seq_length`, as `doc_stride` 128 of SQuAD's 384.

    >>> default_window_stride(128)
    64
    """
    return max(1, max_seq_length // 2)


@dataclasses.dataclass(frozen=True)
class LongTextOptions:
    """How a text longer than `max_seq_length` is read (see the module's docstring).

    Attributes:
        mode: "cut" (the original: the first `max_seq_length - 2` word
            pieces), "head_tail" or "windows".
        head_tokens: With "head_tail": the word pieces kept from the start;
            the rest of the room is the tail. None: `default_head_tokens`.
        window_stride: With "windows": word pieces from one window's start
            to the next's, 1 to `max_seq_length - 2` (a longer stride would
            skip word pieces). None: `default_window_stride`.
        window_pooling: With "windows": "mean" or "max" of the windows'
            logits. None: "mean".
    """

    mode: str = CUT
    head_tokens: int = None
    window_stride: int = None
    window_pooling: str = None

    def resolved(self, max_seq_length, flag_prefix=""):
        """These options checked against `max_seq_length`, the mode's defaults filled in.

        Args:
            max_seq_length: The model inputs' length, `[CLS]` and `[SEP]` included.
            flag_prefix: Put before each option's name in errors ("--" for a tool's flags).

        Raises:
            ValueError: one line naming the option: an unknown mode or
                pooling, an option of another mode, a head outside
                [0, max_seq_length - 2], a stride outside [1, max_seq_length - 2].

        Example:
        >>> LongTextOptions("windows", window_stride=0).resolved(8)
        Traceback (most recent call last):
        ...
        ValueError: window_stride 0 must lie in [1, 6] (max_seq_length 8 less [CLS] and [SEP]): 0 or less never moves on, more than 6 skips word pieces
        """
        p = flag_prefix
        if self.mode not in LONG_TEXT_MODES:
            raise ValueError(f"{p}long_text {self.mode!r} is not one of {', '.join(LONG_TEXT_MODES)}")
        given = {name: getattr(self, name) for name in ("head_tokens", "window_stride", "window_pooling")
                 if getattr(self, name) is not None}
        belongs = {"head_tokens": HEAD_TAIL, "window_stride": WINDOWS, "window_pooling": WINDOWS}
        for name in given:
            if belongs[name] != self.mode:
                raise ValueError(f"{p}{name} applies with {p}long_text={belongs[name]}, not {self.mode}")
        room = text_room(max_seq_length)
        if room < 1:
            raise ValueError(f"{p}max_seq_length {max_seq_length} leaves no room for a text beside [CLS] and [SEP]")
        if self.mode == HEAD_TAIL:
            head = default_head_tokens(max_seq_length) if self.head_tokens is None else self.head_tokens
            if not _is_count(head) or not 0 <= head <= room:
                raise ValueError(f"{p}head_tokens {head!r} must lie in [0, {room}] (max_seq_length {max_seq_length} "
                                 f"less [CLS] and [SEP]); the tail is the rest")
            return LongTextOptions(HEAD_TAIL, head_tokens=int(head))
        if self.mode == WINDOWS:
            stride = default_window_stride(max_seq_length) if self.window_stride is None else self.window_stride
            if not _is_count(stride) or not 1 <= stride <= room:
                raise ValueError(f"{p}window_stride {stride!r} must lie in [1, {room}] (max_seq_length "
                                 f"{max_seq_length} less [CLS] and [SEP]): 0 or less never moves on, more than "
                                 f"{room} skips word pieces")
            pooling = self.window_pooling or MEAN
            if pooling not in WINDOW_POOLINGS:
                raise ValueError(f"{p}window_pooling {pooling!r} is not one of {', '.join(WINDOW_POOLINGS)}")
            return LongTextOptions(WINDOWS, window_stride=int(stride), window_pooling=pooling)
        return LongTextOptions(CUT)

    def to_json(self):
        """`{name: value}` of the options set (what `long_text.json` and export metadata hold).

        >>> LongTextOptions("head_tail", head_tokens=32).to_json()
        {'long_text': 'head_tail', 'head_tokens': 32}
        """
        values = {"long_text": self.mode}
        values.update({name: getattr(self, name) for name in ("head_tokens", "window_stride", "window_pooling")
                       if getattr(self, name) is not None})
        return values

    @classmethod
    def from_json(cls, values, source="long_text.json"):
        """The options of `to_json`'s dict.

        Raises:
            ValueError: naming `source` and the key that is not an option.
        """
        if not isinstance(values, dict) or "long_text" not in values:
            raise ValueError(f"{source}: not long-text options (a JSON object with 'long_text')")
        unknown = sorted(set(values) - {"long_text", "head_tokens", "window_stride", "window_pooling"})
        if unknown:
            raise ValueError(f"{source}: {unknown[0]!r} is not a long-text option")
        return cls(values["long_text"], values.get("head_tokens"), values.get("window_stride"),
                   values.get("window_pooling"))


def _is_count(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


# -- on Python lists ---------------------------------------------------------------


def head_tail(items, head_tokens, max_tokens):
    """The first `head_tokens` and the last `max_tokens - head_tokens` of `items`, where it is longer than `max_tokens`.

    Args:
        items: Word pieces (or their ids) of one text.
        head_tokens: How many to keep from the start (at most `max_tokens`).
        max_tokens: How many fit (`text_room(max_seq_length)`).

    Returns:
        A list of at most `max_tokens` items; `items` whole where they fit.

    Example:
    >>> head_tail([1, 2, 3], head_tokens=1, max_tokens=5)
    [1, 2, 3]
    >>> head_tail(list(range(10)), head_tokens=0, max_tokens=3)
    [7, 8, 9]
    >>> head_tail(list(range(10)), head_tokens=3, max_tokens=3)
    [0, 1, 2]
    """
    items = list(items)
    if len(items) <= max_tokens:
        return items
    tail = max_tokens - head_tokens
    return items[:head_tokens] + items[len(items) - tail:]


def window_spans(length, window, stride):
    """`[(start, end)]` of the windows over a text of `length` word pieces.

    The first starts at 0, each next `stride` later, until one reaches the
    end (as the original run_squad's `doc_spans`, whose last span may be
    shorter); a text that fits is one window, an empty text one empty
    window.

    Example:
    >>> window_spans(10, window=6, stride=3)
    [(0, 6), (3, 9), (6, 10)]
    >>> window_spans(6, window=6, stride=3)
    [(0, 6)]
    >>> window_spans(0, window=6, stride=3)
    [(0, 0)]
    """
    spans, start = [], 0
    while True:
        end = min(start + window, length)
        spans.append((start, end))
        if end >= length:
            return spans
        start += stride


def windows(items, window, stride):
    """`items` cut into `window_spans`' windows: a list of lists.

    >>> windows("abcdefg", window=4, stride=2)
    [['a', 'b', 'c', 'd'], ['c', 'd', 'e', 'f'], ['e', 'f', 'g']]
    """
    items = list(items)
    return [items[start:end] for start, end in window_spans(len(items), window, stride)]


def long_text_pieces(items, options, max_seq_length):
    """What of one text's word pieces the model reads, as a list of rows (each at most the room).

    Args:
        items: The text's word pieces (or ids).
        options: Resolved `LongTextOptions`.
        max_seq_length: Of the model's inputs.

    Returns:
        One row for "cut" and "head_tail", one per window for "windows".

    Example:
    >>> long_text_pieces(range(8), LongTextOptions("cut"), 6)
    [[0, 1, 2, 3]]
    """
    room = text_room(max_seq_length)
    if options.mode == HEAD_TAIL:
        return [head_tail(items, options.head_tokens, room)]
    if options.mode == WINDOWS:
        return windows(items, room, options.window_stride)
    return [list(items)[:room]]


def pool_window_logits(logits, text_index, num_texts, pooling=MEAN):
    """Each text's logits from its windows': their mean or their max, per class.

    Args:
        logits: [num_windows, ...] the model's logits of every window.
        text_index: [num_windows] the text of each window, 0..num_texts-1,
            every text at least once.
        num_texts: Texts.
        pooling: "mean" or "max".

    Returns:
        float64 [num_texts, ...].

    Example:
    >>> pool_window_logits([[1.0, 0.0], [3.0, -2.0], [5.0, 5.0]], [0, 0, 1], 2).tolist()
    [[2.0, -1.0], [5.0, 5.0]]
    >>> pool_window_logits([[1.0, 0.0], [3.0, -2.0], [5.0, 5.0]], [0, 0, 1], 2, "max").tolist()
    [[3.0, 0.0], [5.0, 5.0]]
    """
    logits = np.asarray(logits, np.float64)
    text_index = np.asarray(text_index, np.int64)
    counts = np.bincount(text_index, minlength=num_texts)
    if counts.size != num_texts or (counts == 0).any():
        raise ValueError(f"every one of the {num_texts} texts needs a window")
    if pooling == MAX:
        pooled = np.full((num_texts,) + logits.shape[1:], -np.inf)
        np.maximum.at(pooled, text_index, logits)
        return pooled
    pooled = np.zeros((num_texts,) + logits.shape[1:])
    np.add.at(pooled, text_index, logits)
    return pooled / counts.reshape((-1,) + (1,) * (logits.ndim - 1))


# -- on ragged tensors of ids ----------------------------------------------------------


def head_tail_ids(ids, head_tokens, max_tokens):
    """`head_tail` of every row: ragged [batch, (ids)] -> ragged [batch, (at most max_tokens)].

    Example:
    >>> import tensorflow as tf
    >>> ids = tf.ragged.constant([[0, 1, 2, 3, 4, 5, 6], [7, 8]])
    >>> head_tail_ids(ids, head_tokens=1, max_tokens=3).to_list()
    [[0, 5, 6], [7, 8]]
    """
    import tensorflow as tf

    lengths = ids.row_lengths()  # [batch]
    positions = tf.ragged.range(lengths)  # [batch, (ids)]
    fits = (lengths <= max_tokens)[:, None]
    tail_from = (lengths - (max_tokens - head_tokens))[:, None]  # [batch, 1]
    keep = fits | (positions < head_tokens) | (positions >= tail_from)
    return tf.ragged.boolean_mask(ids, keep)


def window_ids(ids, window, stride):
    """`window_spans`' windows of every row, each a row of their own.

    Args:
        ids: Ragged [batch, (ids)].
        window: Word pieces a window holds (`text_room(max_seq_length)`).
        stride: From one window's start to the next's, 1 to `window`.

    Returns:
        `(windows, text_index)`: ragged [num_windows, (at most window)] of
        `ids`' dtype, the windows of text 0 first; int32 [num_windows], the
        text of each window (sorted, every text at least once).

    Example:
    >>> import tensorflow as tf
    >>> rows, text_index = window_ids(tf.ragged.constant([list(range(10)), [], [1, 2]]), window=6, stride=3)
    >>> rows.to_list()
    [[0, 1, 2, 3, 4, 5], [3, 4, 5, 6, 7, 8], [6, 7, 8, 9], [], [1, 2]]
    >>> text_index.numpy().tolist()
    [0, 0, 0, 1, 2]
    """
    import tensorflow as tf

    lengths = ids.row_lengths()  # [batch] int64
    overflow = tf.maximum(lengths - window, 0)
    num_windows = 1 + (overflow + stride - 1) // stride  # [batch]: ceil((length - window) / stride) more
    text_index = tf.repeat(tf.range(tf.size(lengths, out_type=tf.int64)), num_windows)  # [num_windows]
    starts = tf.ragged.range(num_windows).flat_values * stride  # [num_windows], within each text
    ends = tf.minimum(starts + window, tf.gather(lengths, text_index))
    first = tf.gather(ids.row_splits[:-1], text_index)  # [num_windows]: where each text starts in flat_values
    positions = tf.ragged.range(first + starts, first + ends)  # [num_windows, (window)] into flat_values
    rows = tf.gather(ids.flat_values, positions)
    return rows, tf.cast(text_index, tf.int32)


def long_text_ids(ids, options, max_seq_length):
    """The rows the model reads for ragged [batch, (ids)] of single texts: `(rows, text_index)`.

    `text_index` is None where each text is one row (cut, head_tail); the
    rows are then still to be cut to the room by the packing (cut).
    """
    room = text_room(max_seq_length)
    if options.mode == HEAD_TAIL:
        return head_tail_ids(ids, options.head_tokens, room), None
    if options.mode == WINDOWS:
        return window_ids(ids, room, options.window_stride)
    return ids, None


def segment_pool(logits, text_index, num_texts, pooling=MEAN):
    """`pool_window_logits` in TF ops: float32 [num_texts, ...] from [num_windows, ...].

    Example:
    >>> import tensorflow as tf
    >>> segment_pool(tf.constant([[1.0], [3.0], [5.0]]), tf.constant([0, 0, 1]), 2, "max").numpy().tolist()
    [[3.0], [5.0]]
    """
    import tensorflow as tf

    logits = tf.cast(logits, tf.float32)
    del num_texts  # Every text has a window, so the segments are 0..num_texts-1, sorted.
    if pooling == MAX:
        return tf.math.segment_max(logits, text_index)
    return tf.math.segment_mean(logits, text_index)


def long_text_inputs(preprocessor, texts, options):
    """A preprocessor's model inputs for [batch] single texts, long ones read as `options` say.

    Args:
        preprocessor: A `BertPreprocessor` or `TextPreprocessor` (its
            `token_ids`, `max_seq_length`, `cls_id`, `sep_id`, `pad_id`).
        texts: [batch] string tensor.
        options: Resolved `LongTextOptions`.

    Returns:
        `(inputs, text_index)`: dict of int32 [rows, max_seq_length]
        `input_ids`, `input_mask`, `segment_ids`; int32 [rows], each row's
        text (`tf.range(batch)` where each text is one row).
    """
    import tensorflow as tf

    from keras_bert_impl.tokenization.preprocessor import pack_one_text

    max_seq_length = preprocessor.max_seq_length
    ids = preprocessor.token_ids(texts)
    rows, text_index = long_text_ids(ids, options, max_seq_length)
    if text_index is None:
        text_index = tf.range(rows.nrows(out_type=tf.int32))
    inputs = pack_one_text(rows, max_seq_length, preprocessor.cls_id, preprocessor.sep_id,
                           getattr(preprocessor, "pad_id", 0))
    return inputs, text_index
