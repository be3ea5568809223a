"""A traced forward pass run as TF Serving runs an export: in a Session, each call's ops in the calling thread.

A TF2 function called from Python hands its ready ops to the process'
inter-op thread pool, and no setting of TensorFlow 2.20 runs them in the
caller's thread instead (the eager runtime's runner always schedules on the
pool; a negative inter-op count is read as the default there). TensorFlow's
`DirectSession` has that mode: with `inter_op_parallelism_threads` negative
it runs a request's ops synchronously in the thread that called `Run`, as a
TF Serving started with `--tensorflow_inter_op_parallelism=-1` does. One
short request then costs no thread hand-offs (17-18 a request through the
pool; docs/BENCHMARKS.md, "Each request's ops in the thread that sent it").

`SessionFunction` takes a `tf.function`'s graph, traced once with every
dimension open, turns each variable it reads into a variable of a new
graph (a `VarHandleOp` given the value it holds now, so a Session holds one
copy of it, as a SavedModel's restore gives TF Serving), and answers each
call with one run of a callable made once. Its graph runs on the CPU only:
one device, which the caller-thread mode needs. Each op's own threads
(oneDNN's products) are the process' intra-op pool: TensorFlow makes it
once, sized by whoever makes the first CPU device (the eager context, or a
Session made before anything else), and a later Session's
`intra_op_parallelism_threads` is not read (measured: docs/FINDINGS.md), so
the one place to size it is the process' start
(`tf.config.threading.set_intra_op_parallelism_threads`).

Example:
>>> import keras, numpy as np
>>> scale = keras.Variable(np.float32(3.0))
>>> double = tf.function(lambda inputs: {"y": tf.cast(inputs["x"], tf.float32) * scale})
>>> run = SessionFunction(double, {"x": tf.TensorSpec([None, None], tf.int32)})
>>> run({"x": np.array([[1, 2]])})["y"].tolist()
[[3.0, 6.0]]
>>> scale.assign(5.0) is not None, run({"x": np.array([[1, 2]])})["y"].tolist()  # its value taken when made
(True, [[3.0, 6.0]])
"""

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

# `DirectSession` runs each request's ops in the thread that called `Run` when its inter-op count is negative.
CALLING_THREAD = -1


def session_graph_def(concrete_function):
    """The graph of `concrete_function` with what it captures made part of it.

    Each captured variable handle becomes a `VarHandleOp` of the same name
    (the variable then lives in the Session that runs the graph), any other
    captured tensor a constant.

    Args:
        concrete_function: A `ConcreteFunction`.

    Returns:
        `(graph_def, variables)`: a `GraphDef`, and `[(handle_node_name,
        variable)]` for the variables to give their values.

    Raises:
        ValueError: a captured resource that is no variable of the function.
    """
    graph = concrete_function.graph
    variables = {id(variable.handle): variable for variable in graph.variables}
    captured = {internal.op.name: external for external, internal in graph.captures}
    graph_def = graph.as_graph_def()
    to_assign = []
    for node in graph_def.node:
        if node.name not in captured:
            continue
        value = captured[node.name]
        node.ClearField("attr")
        if value.dtype == tf.resource:
            variable = variables.get(id(value))
            if variable is None:
                raise ValueError(f"the function captures a resource that is no variable of it ({node.name}): "
                                 f"a Session cannot be given its value")
            node.op = "VarHandleOp"
            node.attr["dtype"].CopyFrom(attr_value_pb2.AttrValue(type=variable.dtype.as_datatype_enum))
            node.attr["shape"].CopyFrom(attr_value_pb2.AttrValue(shape=variable.shape.as_proto()))
            node.attr["shared_name"].CopyFrom(attr_value_pb2.AttrValue(s=node.name.encode()))
            node.attr["container"].CopyFrom(attr_value_pb2.AttrValue(s=b""))
            to_assign.append((node.name, variable))
        else:
            node.op = "Const"
            node.attr["dtype"].CopyFrom(attr_value_pb2.AttrValue(type=value.dtype.as_datatype_enum))
            node.attr["value"].CopyFrom(attr_value_pb2.AttrValue(tensor=tf.make_tensor_proto(value.numpy())))
    return graph_def, to_assign


def input_array(value, dtype):
    """`value` as an array of `dtype` to feed a Session, refused where the conversion would change a value.

    A Session takes what NumPy gives it: `astype` would cut 1.5 to 1 and
    wrap 2**32 + 5 to 5 in int32, a valid token id, silently.

    Args:
        value: An array, list or scalar.
        dtype: A NumPy dtype, or `object` for strings.

    Returns:
        The array (no copy where it already has `dtype`).

    Raises:
        TypeError: values of another kind (floats for integers).
        ValueError: an integer outside `dtype`'s range.

    Example:
    >>> input_array([[101, 2023]], np.int32).dtype
    dtype('int32')
    >>> input_array(np.array([2**32 + 5]), np.int32)
    Traceback (most recent call last):
    ...
    ValueError: a value outside int32 (4294967301..4294967301)
    """
    if dtype is object:  # strings
        return np.asarray(value, object)
    array = np.asarray(value)
    if array.dtype == dtype:
        return array
    if array.size and not np.can_cast(array.dtype, dtype, "same_kind"):
        raise TypeError(f"{array.dtype} values for a {np.dtype(dtype).name} input")
    if array.size and np.issubdtype(dtype, np.integer):
        bounds = np.iinfo(dtype)
        if array.min() < bounds.min or array.max() > bounds.max:
            raise ValueError(f"a value outside {np.dtype(dtype).name} ({array.min()}..{array.max()})")
    return array.astype(dtype)


class SessionFunction:
    """`function(inputs)` answered by a `tf.compat.v1.Session` whose ops run in the thread that calls.

    Made once: `function` is traced with `input_spec`, its graph and the
    current values of the variables it reads go into a Session of their own
    (later changes to the variables are not seen), and each call is one run
    of a callable. Calls from several threads at once are served side by
    side, each in its own thread. The outputs come back as NumPy arrays.

    Args:
        function: A `tf.function` of one dict of tensors, returning a nest
            of tensors.
        input_spec: `{name: tf.TensorSpec}` of its inputs; dimensions left
            `None` take any size.

    Raises:
        ValueError: on a call, an input missing, or an id outside int32.
        TypeError: on a call, floats for an integer input.
    """

    def __init__(self, function, input_spec):
        concrete = function.get_concrete_function(input_spec)
        graph_def, to_assign = session_graph_def(concrete)
        self._names = sorted(input_spec)
        self._dtypes = [input_spec[name].dtype.as_numpy_dtype for name in self._names]
        # The outputs' structure only: its tensors would keep the traced graph, and the variables it reads, alive.
        self._outputs = tf.nest.map_structure(lambda _: None, concrete.structured_outputs)
        graph = tf.Graph()
        with graph.as_default():
            tf.graph_util.import_graph_def(graph_def, name="")
            values = [tf.compat.v1.placeholder(variable.dtype, variable.shape) for _, variable in to_assign]
            assigns = [tf.raw_ops.AssignVariableOp(resource=graph.get_tensor_by_name(f"{name}:0"), value=value)
                       for (name, _), value in zip(to_assign, values)]
        config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=CALLING_THREAD,
                                          device_count={"GPU": 0, "TPU": 0})
        self._session = tf.compat.v1.Session(graph=graph, config=config)
        for assign, value, (_, variable) in zip(assigns, values, to_assign):
            self._session.run(assign, {value: variable.numpy()})  # one at a time: one extra copy at most
        # The function's inputs are its flattened input structure (a dict: sorted by name), then its captures.
        flat_inputs = concrete.inputs[:len(concrete.inputs) - len(concrete.captured_inputs)]
        self._call = self._session.make_callable([output.name for output in concrete.outputs],
                                                 feed_list=[tensor.name for tensor in flat_inputs])

    def __call__(self, inputs):
        missing = sorted(set(self._names) - set(inputs))
        if missing:
            raise ValueError(f"inputs {', '.join(missing)} missing; the function takes {', '.join(self._names)}")
        arrays = []
        for name, dtype in zip(self._names, self._dtypes):
            try:
                arrays.append(input_array(inputs[name], dtype))
            except TypeError:
                kind = "integers" if np.issubdtype(dtype, np.integer) else np.dtype(dtype).name
                raise TypeError(f"inputs[{name!r}]: {kind} expected, not {np.asarray(inputs[name]).dtype}") from None
            except ValueError as error:
                raise ValueError(f"inputs[{name!r}]: {error}") from None
        return tf.nest.pack_sequence_as(self._outputs, self._call(*arrays))
