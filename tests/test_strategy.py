"""`--strategy=tpu` (and `--use_tpu`) where no TPU answers: one line, in bounded time.

TensorFlow's own connect waits without end on a closed or a silent port, so
each case here is one that hung (or was a bare traceback) before the check.
"""

import socket
import threading
import time

import pytest

from keras_bert_impl.training.strategy import StrategyError, get_strategy
from tests.helpers import run_python


def free_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


@pytest.fixture
def silent_port():
    """A port that accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []

    def accept():
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:  # closed at teardown
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for connection in accepted:
        connection.close()


@pytest.mark.parametrize("kind", ["closed", "silent"])
def test_a_tpu_address_that_does_not_answer_is_one_line_in_bounded_time(kind, request):
    port = free_port() if kind == "closed" else request.getfixturevalue("silent_port")
    address = f"grpc://127.0.0.1:{port}"
    start = time.monotonic()
    with pytest.raises(StrategyError) as caught:
        get_strategy("tpu", address, connect_timeout=2)
    assert str(caught.value) == (f"--strategy=tpu (or --use_tpu): --tpu_name={address}: "
                                 "no gRPC server answered within 2 s")
    assert time.monotonic() - start < 30


def test_a_tensorflow_server_without_a_tpu_is_one_line():
    """A real TensorFlow gRPC server answers but has no TPU system. In a child
    process: connecting makes that process's eager context remote."""
    code = (
        "import tensorflow as tf\n"
        f"server = tf.distribute.Server({{'worker': ['localhost:{free_port()}']}}, job_name='worker', task_index=0)\n"
        "from keras_bert_impl.training.strategy import StrategyError, get_strategy\n"
        "try:\n"
        "    get_strategy('tpu', 'grpc://' + server.target[len('grpc://'):], connect_timeout=20)\n"
        "except StrategyError as e:\n"
        "    print('StrategyError:', e)\n"
    )
    (line,) = run_python(code, timeout=240)
    assert line.startswith("StrategyError: --strategy=tpu (or --use_tpu): no TPU to connect to with --tpu_name=grpc://")
    assert "TPUs not found in the cluster" in line


def test_a_tpu_name_that_cannot_be_looked_up_is_one_line():
    """A name (not an address) is looked up on the GCE metadata server, which
    does not exist here. Was: a bare URLError."""
    with pytest.raises(StrategyError, match=r"^--strategy=tpu \(or --use_tpu\): no TPU to connect to with --tpu_name=no-such-tpu: "):
        get_strategy("tpu", "no-such-tpu")
