"""Inference graphs whose Dense kernels are graph constants, so that oneDNN packs them once.

On a CPU with TensorFlow's oneDNN rewrites on, a Dense layer (MatMul, bias,
activation) runs as one oneDNN inner product. Where its kernel comes from a
variable, TensorFlow hands oneDNN the kernel in its plain layout, and oneDNN
takes its packed GEMM (`x64:gemm:jit`), which repacks the kernel on every
call and does not use Intel AMX's tiles. Where the kernel is a constant of
the graph, TensorFlow lets oneDNN choose the layout: it takes its blocked
kernels (`brgemm`, on AMX tiles where the CPU has them), repacks the kernel
once, on the first call, and keeps the packed copy in the op (what that
gains on a CPU with AMX: docs/BENCHMARKS.md, "Forward pass (inference), CPU").

Only the kernels become constants. A constant bias made grappler take the
bias add (and the GELU after it) out of the fused product again, which lost
more than the kernels gained; biases, LayerNorms and embedding tables are
still read from their variables.

A constant is a snapshot: the graph computes with the kernels as they were
when the snapshot was taken, whatever is assigned to the variables later.

Example:
>>> import numpy as np
>>> from keras_bert_impl.config import BertConfig
>>> from keras_bert_impl.models.bert_model import BertModel
>>> model = BertModel(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
...                              num_attention_heads=2, intermediate_size=16))
>>> kernels = ConstantKernels(model)
>>> len(kernels), kernels.nbytes
(7, 2304)
>>> inputs = {"input_ids": np.array([[2, 5, 7]]), "input_mask": np.ones((1, 3), "int32"),
...           "segment_ids": np.zeros((1, 3), "int32")}
>>> @tf.function
... def forward(inputs):
...     with kernels.scope():
...         return model(inputs, training=False)
>>> bool(np.allclose(forward(inputs)["pooled_output"], model(inputs)["pooled_output"], atol=1e-6))
True
"""

import contextlib

import keras
import numpy as np
import tensorflow as tf


def dense_kernels(model):
    """The kernel variable of every Dense layer in `model`, nested layers included.

    Args:
        model: A Keras model or layer.

    Returns:
        A list of Keras variables, in `model.weights` order.
    """
    kernels = {id(layer.kernel) for layer in model._flatten_layers() if isinstance(layer, keras.layers.Dense)}
    return [variable for variable in model.weights if id(variable) in kernels]


def dense_kernel_bytes(model, dtype=None):
    """Bytes the Dense kernels of `model` take: what a `ConstantKernels` of it holds.

    Args:
        model: A Keras model or layer.
        dtype: The dtype they are counted in; default each as it is stored.
    """
    return sum(int(np.prod(variable.shape)) * tf.as_dtype(dtype or variable.dtype).size
               for variable in dense_kernels(model))


def reading_as_constants(kernels):
    """`kernels.scope()`, or a scope that changes nothing where `kernels` is None.

    Args:
        kernels: A `ConstantKernels`, or None (the variables are read).
    """
    return kernels.scope() if kernels is not None else contextlib.nullcontext()


class ConstantKernels:
    """A snapshot of a model's Dense kernels that a traced function reads as graph constants.

    Args:
        model: A Keras model (a `BertModel` or a task model); its Dense
            kernels are read now, as they are stored (in a model built with
            `inference.precision.inference_dtype_policy`, already in the
            compute dtype, so the constant feeds the product directly).
    """

    def __init__(self, model):
        self._kernels = [(variable, variable.numpy()) for variable in dense_kernels(model)]

    def __len__(self):
        return len(self._kernels)

    def holds(self, variable):
        """Whether `variable` is one of the kernels read as constants."""
        return any(variable is kernel for kernel, _ in self._kernels)

    @property
    def nbytes(self):
        """Bytes of the constants one traced graph holds."""
        return sum(value.nbytes for _, value in self._kernels)

    def scope(self):
        """Within it, while a `tf.function` is traced, each kernel reads as a constant of that graph.

        Enter it in the function whose graph holds the products: a constant
        made in an outer function reaches an inner one (a `tf.cond` branch,
        a nested `tf.function`) as an input, not a constant.

        Returns:
            A `keras.StatelessScope`.

        Raises:
            RuntimeError: called eagerly, where there is no graph to hold them.
        """
        if tf.executing_eagerly():
            raise RuntimeError("ConstantKernels.scope() is for tracing a tf.function, not eager calls")
        return keras.StatelessScope(
            state_mapping=[(variable, tf.constant(value, dtype=variable.dtype)) for variable, value in self._kernels])
