"""`tf.distribute` strategies by name, for the tools' `--strategy` flag."""

import hashlib
import json
import os

import tensorflow as tf

from keras_bert_impl.errors import BertError

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker_mirrored", "tpu")


class StrategyError(BertError, ValueError):
    """An unknown strategy name, or a batch size the replicas cannot share."""


# Seconds a `grpc://` TPU address has to answer before TensorFlow is handed it
# (TensorFlow's own connect waits without end on a closed or silent port).
TPU_CONNECT_TIMEOUT_S = 30.0


def get_strategy(name="default", tpu_address=None, connect_timeout=TPU_CONNECT_TIMEOUT_S):
    """Builds the named distribution strategy.

    Args:
        name: `default` (no distribution), `one_device`, `mirrored` (all local
            devices), `multi_worker_mirrored` (cluster from `TF_CONFIG`), or
            `tpu`.
        tpu_address: TPU name or grpc address for `tpu` (optional on a TPU VM).
        connect_timeout: Seconds a `grpc://` address has to answer.

    Returns:
        A `tf.distribute.Strategy`.

    Raises:
        StrategyError: unknown name, a malformed `TF_CONFIG`, or no TPU to
            connect to.

    Example:
    >>> get_strategy("default").num_replicas_in_sync
    1
    """
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "one_device":
        device = "/gpu:0" if tf.config.list_logical_devices("GPU") else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker_mirrored":
        raw = os.environ.get("TF_CONFIG")
        if not raw:
            raise StrategyError("--strategy=multi_worker_mirrored needs TF_CONFIG (cluster and task) in the environment")
        try:
            json.loads(raw)
        except json.JSONDecodeError as e:
            raise StrategyError(f"TF_CONFIG is not valid JSON ({e.msg})") from None
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        for address in (tpu_address or "").split(","):
            if address.startswith("grpc://"):
                _check_grpc_answers(address, connect_timeout)
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address or "")
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except (ValueError, OSError, tf.errors.OpError) as error:  # OSError: a name the metadata server cannot look up
            where = f"--tpu_name={tpu_address}" if tpu_address else "no --tpu_name (and not on a TPU VM)"
            raise StrategyError(f"--strategy=tpu (or --use_tpu): no TPU to connect to with {where}: "
                                f"{str(error).splitlines()[0] if str(error) else type(error).__name__}") from None
        return tf.distribute.TPUStrategy(resolver)
    raise StrategyError(f"--strategy {name!r} is unknown; choose one of {', '.join(STRATEGIES)}")


def _check_grpc_answers(address, timeout):
    """Raises `StrategyError` unless a gRPC server answers at `address`
    (`grpc://host:port`) within `timeout` seconds."""
    import grpc  # The TF Serving client's dependency; only a TPU run needs it here.

    channel = grpc.insecure_channel(address[len("grpc://"):])
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        raise StrategyError(f"--strategy=tpu (or --use_tpu): --tpu_name={address}: "
                            f"no gRPC server answered within {timeout:g} s") from None
    finally:
        channel.close()


def check_batch_size(batch_size, strategy, flag="--train_batch_size"):
    """Raises `StrategyError` unless `batch_size` splits evenly over the replicas."""
    replicas = strategy.num_replicas_in_sync
    if batch_size % replicas:
        raise StrategyError(
            f"{flag}={batch_size} is not divisible by the {replicas} replicas of the strategy"
        )


def adapt_model_to_multi_worker(model, strategy):
    """Works around Keras 3.15's `fit`/`evaluate` under multi-worker mirroring.

    Two things in Keras 3.15 fail under a `MultiWorkerMirroredStrategy` that
    spans more than one worker:

    - After each step it averages the logs across workers with
      `strategy.reduce("MEAN", value, axis=0)`, which rejects the scalar logs
      every model returns ("Invalid reduction dimension 0"). The steps here
      return each log as a one-element vector instead, so the mean over axis
      0 is the mean over workers, a scalar again.
    - `fit` peeks at one batch to build the model and averages it with
      `strategy.reduce`, which fails for dict batches. Callers build the
      model and optimizer before `fit`, so the peek is skipped.

    Does nothing under any other strategy.

    Args:
        model: A compiled Keras model whose variables and optimizer are built.
        strategy: The strategy it was built under.
    """
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return

    def as_vectors(step):
        def step_with_vector_logs(data):
            logs = step(data)
            return tf.nest.map_structure(
                lambda value: tf.reshape(value, [1]) if value.shape.rank == 0 else value, logs
            )

        return step_with_vector_logs

    model.train_step = as_vectors(model.train_step)
    model.test_step = as_vectors(model.test_step)
    model._maybe_symbolic_build = lambda *args, **kwargs: None


def weights_digest(variables):
    """SHA-256 of the values of `variables` (this worker's copies), in order.

    Synchronous multi-worker training leaves every worker with the same
    weights; each worker printing this at the end shows that they agree,
    without writing a checkpoint per worker.

    Example:
    >>> import numpy as np
    >>> a = [tf.Variable(np.ones(2, np.float32)), tf.Variable([3])]
    >>> weights_digest(a) == weights_digest([tf.Variable(np.ones(2, np.float32)), tf.Variable([3])])
    True
    >>> weights_digest(a) == weights_digest(a[::-1])
    False
    """
    digest = hashlib.sha256()
    for variable in variables:
        value = tf.convert_to_tensor(variable).numpy()
        digest.update(f"{value.dtype}{value.shape}".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()
