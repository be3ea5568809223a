"""The encoder's Dense layers with int8 kernels, their products on the CPU's int8 units, through stock TensorFlow ops.

Each encoder Dense kernel W [in, out] is held as int8 with one scale per
output channel (symmetric: `W[:, j] ~ kernel_scales[j] * Wq[:, j]`,
`Wq` in [-127, 127]). Its input x [rows, in] is quantized per tensor to
uint8 over a range [lo, hi] that holds 0: `x ~ lo + step * u8`, `step =
(hi - lo) / 255`. The range is either found as each batch comes (the
tensor's min and max: "dynamic") or calibrated once on the task's own texts
(`calibrate_input_ranges`: "static", between the 99.999th percentile of the
values seen and its complement, values beyond clipped; fewer ops per
product). Then

    x W[:, j] ~ kernel_scales[j] * (step * (u8 Wq)[:, j] + lo * sum_i Wq[i, j])

and the int32 product `u8 Wq` is oneDNN's u8 x s8 inner product, on VNNI
(or AMX-int8) where the CPU has it.

The ops, all in stock TensorFlow 2.20 (so in a SavedModel that TF Serving
loads, with no Python of ours):

- `QuantizeV2(x, lo, hi, quint8, mode="MIN_FIRST")`: u8 = round((x - lo) /
  step), clipped to [0, 255]. oneDNN's kernel rounds `x / step - lo / step`
  in float32 to nearest even; TensorFlow's own kernel rounds differently at
  the halves (`int8_reference` emulates oneDNN's). Up to
  `ELEMENTWISE_MAX_ROWS` rows (one request) the same codes come from
  element-wise ops (multiply, add, round, clip, cast, bitcast to quint8):
  oneDNN's quantize costs ~80 us of set-up a call there, twice theirs, and
  half of theirs on a batch (docs/BENCHMARKS.md, "int8").
- `QuantizedMatMulWithBiasAndDequantize(u8, Wq, bias, min_a=0,
  max_a=hi - lo, min_b=-127, max_b=127, input_quant_mode="SCALED",
  Toutput=float32)`: with oneDNN v3 it computes `src_scale * wei_scale *
  (u8 Wq) + bias`, `src_scale = max(|min_a|, |max_a|) / 255 = step`,
  `wei_scale = max(|min_b|, |max_b|) / 127 = 1`; the bias is taken as it is
  (float32). Its scales are scalars, so the per-channel scale comes after:
  the bias passed is `lo * colsum(Wq) + b / kernel_scales`, and one multiply
  by `kernel_scales` gives `x W + b`. (Its "MIN_FIRST" mode compensates the
  bias with `colsum * lo / step` instead of `colsum * lo * step`: wrong
  unless the weight scale is `1 / step`, which is why it is not used; with
  a uint8 input "SCALED" would clip negative activations, which is why the
  input is quantized MIN_FIRST and its offset carried in the bias.)
- Only oneDNN runs these: without TensorFlow's oneDNN rewrites
  (`TF_ENABLE_ONEDNN_OPTS=0`, or a build without oneDNN) the quantized
  product's registered kernel is a no-op. `hardware.onednn_graph_rewrites()`
  must be on where an int8 graph runs.

Queries, keys and values read the same input: it is quantized once, and
their product is one, on the three kernels side by side (`concatenated`;
per output channel, so exactly the three products), sliced after
(`Int8Kernels.scope`). Pooler and task heads stay float32 (a few
hundred multiply-adds per example).

Measured products, error and speed: docs/BENCHMARKS.md, "int8".

Example:
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> kernel = quantize_kernel(rng.normal(size=(8, 4)).astype("float32"))
>>> kernel.values.dtype.name, kernel.values.shape, kernel.scales.shape, int(np.abs(kernel.values).max())
('int8', (8, 4), (4,), 127)
"""

import contextlib
import dataclasses

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.inference.constant_kernels import dense_kernels

# A range never narrower than this (an all-zero input): the step stays positive.
_MIN_RANGE = 1e-6
# Inputs of up to this many rows are quantized by element-wise ops, larger ones by oneDNN's QuantizeV2.
ELEMENTWISE_MAX_ROWS = 256
# Calibrated ranges end at this percentile of the values seen (docs/BENCHMARKS.md, "int8": measured on real text).
DEFAULT_CALIBRATION_PERCENTILE = 99.999


@dataclasses.dataclass(frozen=True)
class QuantizedKernel:
    """A Dense kernel [in, out] as int8 with one float32 scale per output channel.

    Attributes:
        values: int8 [in, out], in [-127, 127].
        scales: float32 [out]: `kernel[:, j] ~ scales[j] * values[:, j]`.
        column_sums: float32 [out]: `values.sum(axis=0)`, exact (at most 127 * in).
    """

    values: np.ndarray
    scales: np.ndarray
    column_sums: np.ndarray


def quantize_kernel(kernel):
    """`kernel` [in, out] quantized per output channel, symmetric: the largest |weight| of each column to 127.

    Args:
        kernel: float array [in, out].

    Returns:
        A `QuantizedKernel`. A column of zeros gets scale 1 (its values are 0).
    """
    kernel = np.asarray(kernel, np.float32)
    scales = np.abs(kernel).max(axis=0) / np.float32(127)
    scales = np.where(scales > 0, scales, np.float32(1)).astype(np.float32)
    values = np.clip(np.rint(kernel / scales), -127, 127).astype(np.int8)
    return QuantizedKernel(values, scales, values.astype(np.int32).sum(axis=0).astype(np.float32))


def encoder_dense_layers(model):
    """Every Dense layer inside the transformer encoders of `model` (query, key, value and the three after).

    Args:
        model: A `BertModel` or a task model holding one.

    Returns:
        A list of `keras.layers.Dense`, in model order.
    """
    return [layer for encoder in _transformer_encoders(model)
            for layer in encoder._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, keras.layers.Dense)]


def _transformer_encoders(model):
    """The `TransformerEncoder` layers inside `model` (itself included), in model order."""
    from keras_bert_impl.layers.transformer import TransformerEncoder

    return [layer for layer in model._flatten_layers(include_self=True, recursive=True)
            if isinstance(layer, TransformerEncoder)]


def dynamic_input_range(x):
    """[lo, hi] of `x` as `QuantizeV2` takes it: holding 0, never narrower than `_MIN_RANGE`.

    Args:
        x: float32 tensor.

    Returns:
        Two float32 scalars.
    """
    lo = tf.minimum(tf.reduce_min(x), 0.0)
    hi = tf.maximum(tf.reduce_max(x), 0.0) + _MIN_RANGE
    return lo, hi


def quantize_input(x, lo, hi):
    """x [rows, in] float32 -> (u8 [rows, in] quint8, step): `x ~ lo + step * u8`.

    Up to `ELEMENTWISE_MAX_ROWS` rows by element-wise ops, beyond by
    oneDNN's `QuantizeV2` (a `tf.cond` on the row count where the graph does
    not know it): the same codes either way.

    Args:
        x: float32 [rows, in].
        lo, hi: float32 scalars (tensors or numbers), lo <= 0 < hi.

    Example:
    >>> u8, step = quantize_input(tf.constant([[-1.0, 0.0, 1.5]]), -1.0, 1.55)
    >>> tf.bitcast(u8, tf.uint8).numpy().tolist(), round(float(step), 4)
    ([[0, 100, 250]], 0.01)
    """
    lo, hi = tf.cast(lo, tf.float32), tf.cast(hi, tf.float32)
    inverse_step = 255.0 / (hi - lo)

    def by_elementwise_ops():
        # oneDNN's arithmetic: x * (1/step) + (-lo/step) in float32, rounded to nearest even.
        codes = tf.clip_by_value(tf.round(x * inverse_step + -lo * inverse_step), 0.0, 255.0)
        return tf.bitcast(tf.cast(codes, tf.uint8), tf.quint8)

    def by_onednn():
        return tf.raw_ops.QuantizeV2(input=x, min_range=lo, max_range=hi, T=tf.quint8, mode="MIN_FIRST",
                                     ensure_minimum_range=0.0).output

    rows = x.shape[0]
    if rows is not None:
        quantized = by_elementwise_ops() if rows <= ELEMENTWISE_MAX_ROWS else by_onednn()
    else:
        quantized = tf.cond(tf.shape(x)[0] <= ELEMENTWISE_MAX_ROWS, by_elementwise_ops, by_onednn)
    return quantized, (hi - lo) / 255.0


def int8_matmul(quantized_input, lo, step, kernel, bias=None):
    """`x W + b` from x quantized (`quantize_input`) and W quantized (`quantize_kernel`), as float32 [rows, out].

    Args:
        quantized_input: quint8 [rows, in].
        lo, step: The input's range start and step (float32 scalars).
        kernel: A `QuantizedKernel` [in, out]; made graph constants here.
        bias: float32 [out] or None.

    Returns:
        float32 [rows, out].
    """
    scales = tf.constant(kernel.scales)
    # The input's offset (lo), and the bias divided by the per-channel scale
    # that multiplies the whole sum afterwards: [out].
    shifted_bias = lo * tf.constant(kernel.column_sums)
    if bias is not None:
        shifted_bias = shifted_bias + tf.cast(bias, tf.float32) / scales
    # [rows, in] x [in, out] -> [rows, out]: step * (u8 Wq) + shifted_bias
    products = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
        a=quantized_input, b=tf.constant(kernel.values, tf.qint8), bias=shifted_bias,
        min_a=tf.constant(0.0), max_a=step * 255.0, min_b=tf.constant(-127.0), max_b=tf.constant(127.0),
        min_freezed_output=tf.constant(0.0), max_freezed_output=tf.constant(1.0),
        Toutput=tf.float32, input_quant_mode="SCALED",
    )
    return products * scales


def int8_reference(x, lo, hi, kernel, bias=None):
    """NumPy emulation of `quantize_input` + `int8_matmul` (oneDNN's rounding), in float64 after quantizing.

    Args:
        x: float32 [rows, in]; lo, hi: its range; kernel: a `QuantizedKernel`; bias: [out] or None.

    Returns:
        float64 [rows, out].
    """
    x = np.asarray(x, np.float32)
    inverse_step = np.float32(255) / (np.float32(hi) - np.float32(lo))
    # oneDNN's reorder: x * (1/step) + (-lo/step), in float32, rounded to nearest even.
    u8 = np.clip(np.rint(x * inverse_step + np.float32(-lo) * inverse_step), 0, 255)
    step = (np.float64(np.float32(hi) - np.float32(lo))) / 255.0
    products = (u8 @ kernel.values.astype(np.float64)) * step + float(lo) * kernel.column_sums
    products = products * kernel.scales
    return products if bias is None else products + np.asarray(bias, np.float64)


def concatenated(kernels):
    """`kernels` (each [in, out_i]) as one `QuantizedKernel` [in, sum out_i]: `quantize_kernel` of the concatenation.

    Per output channel, each column keeps its own scale and sum, so the
    product of the concatenation is the products side by side, exactly.
    """
    return QuantizedKernel(*(np.concatenate([getattr(kernel, field) for kernel in kernels], axis=-1)
                             for field in ("values", "scales", "column_sums")))


def query_key_value_groups(model):
    """`(query, key, value)` Dense layers of each self-attention layer inside the transformer encoders of `model`."""
    from keras_bert_impl.layers.attention import SelfAttention

    return [(layer.query, layer.key, layer.value) for encoder in _transformer_encoders(model)
            for layer in encoder._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, SelfAttention)]


def quantized_kernels(model):
    """`quantize_kernel` of each of `encoder_dense_layers(model)`, by layer path."""
    return {layer.path: quantize_kernel(layer.kernel.numpy()) for layer in encoder_dense_layers(model)}


@contextlib.contextmanager
def dense_calls_set_to(layers, make_call):
    """Within the block, each of `layers` computes `make_call(layer)(inputs, training=None)` when called.

    The layers' own `call` comes back afterwards. For tracing a graph (or an
    eager calibration pass) without changing the model.
    """
    for layer in layers:
        layer.call = make_call(layer)
    try:
        yield
    finally:
        for layer in layers:
            del layer.call


class Int8Kernels:
    """A model's encoder Dense layers as int8 products, for a traced function (`scope()`, as `ConstantKernels`).

    Within `scope()` each encoder Dense layer computes `int8_dense`: its
    int8 kernel and scales are constants of the traced graph, its input
    quantized over `input_ranges[layer.path]` (static) or over the batch's
    own min and max (dynamic, where `input_ranges` is None). Every other
    Dense kernel (pooler, task heads) is read as a float32 constant.

    Args:
        model: A float32 Keras model (a `BertModel` or a task model); its
            kernels are read now.
        input_ranges: Optional dict of layer path -> (lo, hi), from
            `calibrate_input_ranges`.

    Raises:
        ValueError: `model` does not compute in float32, or `input_ranges`
            leaves out an encoder Dense layer.
    """

    def __init__(self, model, input_ranges=None):
        self._layers = encoder_dense_layers(model)
        if any(layer.compute_dtype != "float32" for layer in self._layers):
            raise ValueError("int8 products are taken from a float32 model; build it with dtype='float32'")
        self._kernels = quantized_kernels(model)
        # Query, key and value read one input: one product on their concatenated kernels (one oneDNN call
        # in place of three, each mostly set-up at one request's rows), the three outputs sliced from it.
        self._fused = {}  # layer path -> (the group's layers, the concatenated kernel, index in the group)
        for group in query_key_value_groups(model):
            kernel = concatenated([self._kernels[layer.path] for layer in group])
            self._fused.update({layer.path: (group, kernel, index) for index, layer in enumerate(group)})
        if input_ranges is not None:
            missing = [layer.path for layer in self._layers if layer.path not in input_ranges]
            if missing:
                raise ValueError(f"no calibrated input range for {missing[0]}")
            input_ranges = {path: (float(lo), float(hi)) for path, (lo, hi) in input_ranges.items()}
        self.input_ranges = input_ranges
        quantized = {id(layer.kernel) for layer in self._layers}
        # The other Dense kernels (pooler, heads): float32 constants, as `ConstantKernels` holds them.
        self._float = [(variable, variable.numpy()) for variable in dense_kernels(model)
                       if id(variable) not in quantized]

    def __len__(self):
        return len(self._kernels) + len(self._float)

    @property
    def nbytes(self):
        """Bytes of the constants one traced graph holds (int8 kernels, their scales and sums, float kernels)."""
        quantized = sum(k.values.nbytes + k.scales.nbytes + k.column_sums.nbytes for k in self._kernels.values())
        return quantized + sum(value.nbytes for _, value in self._float)

    def holds(self, variable):
        """Whether `variable` is a kernel this graph holds as a constant (int8 or float32)."""
        return any(variable is kernel for kernel in [layer.kernel for layer in self._layers]
                   + [kernel for kernel, _ in self._float])

    @property
    def calibrated(self):
        """Whether the input ranges are fixed (static) rather than found per batch."""
        return self.input_ranges is not None

    @contextlib.contextmanager
    def scope(self):
        """Within it, while a `tf.function` is traced, the encoder Dense layers compute in int8.

        Enter it in the function whose graph holds the products, as
        `ConstantKernels.scope`.
        """
        if tf.executing_eagerly():
            raise RuntimeError("Int8Kernels.scope() is for tracing a tf.function, not eager calls")
        # One quantization of each input tensor, and one product of query, key and value on it.
        quantized_inputs, fused_outputs = {}, {}

        def make_call(layer):
            kernel = self._kernels[layer.path]
            group, fused_kernel, index = self._fused.get(layer.path, (None, None, None))

            def call(inputs, training=None):
                with tf.name_scope(layer.name):
                    x = tf.convert_to_tensor(inputs)
                    shape = tf.shape(x)
                    # [..., in] -> [rows, in]
                    rows = tf.reshape(x, [-1, kernel.values.shape[0]])
                    # Query, key and value read the same tensor (and have the same calibrated range).
                    key = id(x)
                    if key not in quantized_inputs:
                        lo, hi = (self.input_ranges[layer.path] if self.input_ranges
                                  else dynamic_input_range(rows))
                        quantized_inputs[key] = (x,) + (lo,) + quantize_input(rows, lo, hi)
                    _, lo, u8, step = quantized_inputs[key]
                    if group is None:
                        # [rows, out]
                        outputs = int8_matmul(u8, lo, step, kernel, layer.bias)
                    else:
                        if (key, id(group)) not in fused_outputs:
                            bias = tf.concat([tf.cast(member.bias, tf.float32) for member in group], axis=0)
                            # [rows, in] x [in, 3 * out] -> [rows, 3 * out]
                            fused_outputs[key, id(group)] = int8_matmul(u8, lo, step, fused_kernel, bias)
                        width = kernel.values.shape[1]
                        # [rows, 3 * out] -> [rows, out]
                        outputs = fused_outputs[key, id(group)][:, index * width:(index + 1) * width]
                    outputs = tf.reshape(outputs, tf.concat([shape[:-1], [kernel.values.shape[1]]], axis=0))
                    return layer.activation(outputs) if layer.activation is not None else outputs

            return call

        floats = keras.StatelessScope(
            state_mapping=[(variable, tf.constant(value, dtype=variable.dtype)) for variable, value in self._float])
        with floats, dense_calls_set_to(self._layers, make_call):
            yield


def calibrate_input_ranges(model, batches, percentile=DEFAULT_CALIBRATION_PERCENTILE):
    """Each encoder Dense layer's input range over `batches`, run through `model` in float32.

    At `percentile=100` the range runs from the smallest to the largest value
    seen. Below it, each end is the value at that percentile of all the
    values the layer read: `lo` the (100 - p)th, `hi` the p-th (with the
    values sorted, `v[k]` and `v[n - 1 - k]`, `k = floor(n (100 - p) / 100)`),
    so that a few outliers do not widen the step of every other value;
    served, values beyond an end are clipped to it. That takes two passes
    over `batches` (one to count, one to keep the `k + 1` values at each
    end), exact whatever their number.

    Args:
        model: A float32 Keras model (as for `Int8Kernels`).
        batches: An iterable of its inputs (dicts of arrays); read twice
            below 100.
        percentile: In (50, 100]; 100 keeps the smallest and largest value.

    Returns:
        Dict of layer path -> (lo, hi), lo at most 0 and hi at least 0 (as
        `QuantizeV2` takes them), hi widened by `_MIN_RANGE`.

    Example:
    >>> values = np.arange(1, 10001, dtype="float32") - 1000.0  # -999 .. 9000
    >>> ends = calibration_ends([values], percentile=99.9)
    >>> [float(v) for v in ends]
    [-989.0, 8990.0]
    """
    if not 50.0 < percentile <= 100.0:
        raise ValueError(f"the calibration percentile must be in (50, 100], not {percentile}")
    layers = encoder_dense_layers(model)
    batches = list(batches) if percentile < 100.0 else batches

    def run(observe):
        def make_call(layer):
            original = type(layer).call

            def call(inputs, training=None):
                observe(layer.path, np.asarray(inputs))
                return original(layer, inputs, training=training)

            return call

        with dense_calls_set_to(layers, make_call):
            for inputs in batches:
                model(inputs, training=False)

    counts = {layer.path: 0 for layer in layers}
    if percentile < 100.0:
        run(lambda path, values: counts.__setitem__(path, counts[path] + values.size))
    collectors = {layer.path: _EndsCollector(counts[layer.path], percentile) for layer in layers}
    run(lambda path, values: collectors[path].add(values))
    ranges = {}
    for path, collector in collectors.items():
        lo, hi = collector.ends()
        ranges[path] = (min(lo, 0.0), max(hi, 0.0) + _MIN_RANGE)
    return ranges


def _tail(count, percentile):
    """How many of `count` sorted values lie beyond each end of the `percentile` range: floor(count (100 - p) / 100).

    In integers (the percentile to 1e-7 of a point), so that no float
    rounding moves an exact boundary.
    """
    outside = round((100.0 - percentile) * 10**7)  # (100 - p) in units of 1e-7 of a point
    return count * outside // 10**9


class _EndsCollector:
    """The `k + 1` smallest and largest values seen (`k = _tail(count, percentile)`), kept as batches come."""

    def __init__(self, count, percentile):
        self.keep = _tail(count, percentile) + 1
        self.low = np.zeros([0], np.float32)
        self.high = np.zeros([0], np.float32)

    def add(self, values):
        values = values.reshape(-1).astype(np.float32)
        low, high = np.concatenate([self.low, values]), np.concatenate([self.high, values])
        if low.size > self.keep:
            low = np.partition(low, self.keep - 1)[:self.keep]
            high = np.partition(high, high.size - self.keep)[-self.keep:]
        self.low, self.high = low, high

    def ends(self):
        """(lo, hi): the k-th smallest and k-th largest values (0-based); (0, 0) when nothing was seen."""
        if self.low.size == 0:
            return 0.0, 0.0
        return float(self.low.max()), float(self.high.min())


def calibration_ends(batches_of_values, percentile=100.0):
    """`calibrate_input_ranges`' two ends for one layer, from its input values (arrays) directly.

    Args:
        batches_of_values: A list of arrays (one a batch).
        percentile: As `calibrate_input_ranges`.

    Returns:
        (lo, hi) as floats, before the range is made to hold 0.
    """
    collector = _EndsCollector(sum(values.size for values in batches_of_values), percentile)
    for values in batches_of_values:
        collector.add(np.asarray(values))
    return collector.ends()


def agreement(reference, quantized, labels):
    """How far int8 outputs are from float32's: a dict with one `summary` line.

    Args:
        reference, quantized: float arrays [examples, ...] (logits, or
            embeddings), the same inputs through float32 and int8.
        labels: Whether the last axis holds class scores: argmax agreement;
            else the cosine of each example's flattened output.

    Returns:
        For labels: `argmax_agreement` (fraction), `max_abs_difference`;
        else `mean_cosine`, `min_cosine`; and `summary`.

    Example:
    >>> agreement(np.array([[1.0, 2.0], [3.0, 0.0]]), np.array([[1.1, 2.0], [0.0, 3.0]]), labels=True)["summary"]
    'int8 vs float32 on 2 texts: argmax agrees on 50.0%, largest |difference| 3'
    """
    reference, quantized = np.asarray(reference, np.float64), np.asarray(quantized, np.float64)
    count = len(reference)
    if labels:
        agree = float(np.mean(np.argmax(reference, -1) == np.argmax(quantized, -1)))
        largest = float(np.abs(reference - quantized).max())
        return {"argmax_agreement": agree, "max_abs_difference": largest,
                "summary": f"int8 vs float32 on {count} texts: argmax agrees on {100 * agree:.1f}%, "
                           f"largest |difference| {largest:.3g}"}
    a, b = reference.reshape(count, -1), quantized.reshape(count, -1)
    cosine = np.sum(a * b, 1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-30)
    return {"mean_cosine": float(cosine.mean()), "min_cosine": float(cosine.min()),
            "summary": f"int8 vs float32 on {count} texts: cosine mean {cosine.mean():.4f}, min {cosine.min():.4f}"}


def read_calibration_texts(path):
    """The texts of a calibration file: one request's text a line, blank lines skipped.

    Args:
        path: A UTF-8 text file.

    Returns:
        A tuple of strings (each line without its line break and outer spaces).

    Raises:
        InputFileError: a missing file, invalid UTF-8 (naming `path:line`),
            or no text at all.
    """
    from keras_bert_impl.errors import InputFileError
    from keras_bert_impl.io import read_utf8_lines

    texts = tuple(text.strip() for _, text in read_utf8_lines(path, kind="calibration file") if text.strip())
    if not texts:
        raise InputFileError(f"{path}: the calibration file holds no text (one text a line)")
    return texts
