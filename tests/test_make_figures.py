"""jobs/make_figures.py: the scalars of TensorBoard event files, as written
by `tf.summary`; files cut short by a killed writer and non-scalar
summaries do not stop it."""

import os

import numpy as np
import tensorflow as tf

from keras_bert_impl.jobs.make_figures import read_scalars


def write_events(directory, losses, histogram=False):
    writer = tf.summary.create_file_writer(str(directory))
    with writer.as_default():
        for step, loss in enumerate(losses, start=1):
            tf.summary.scalar("train/loss", loss, step=step)
            if histogram:
                tf.summary.histogram("train/weights", np.arange(5.0) * step, step=step)
    writer.close()
    (path,) = [directory / name for name in os.listdir(directory) if name.startswith("events.out.tfevents.")]
    return path


def test_scalars_are_read_with_their_steps_and_histograms_passed_over(tmp_path):
    write_events(tmp_path / "run", [2.5, 1.25, 0.5], histogram=True)
    scalars = read_scalars(str(tmp_path / "run"), log=lambda message: None)
    assert scalars == {"train/loss": [(1, 2.5), (2, 1.25), (3, 0.5)]}


def test_an_event_file_cut_short_gives_the_points_before_the_cut(tmp_path):
    """As a kill -9 of the writer leaves it (was: a DataLossError traceback on every later call)."""
    path = write_events(tmp_path / "run", [3.0, 2.0, 1.0, 0.5])
    data = path.read_bytes()
    path.write_bytes(data[:-7])
    messages = []
    scalars = read_scalars(str(tmp_path / "run"), log=messages.append)
    assert scalars == {"train/loss": [(1, 3.0), (2, 2.0), (3, 1.0)]}
    assert len(messages) == 1 and str(path) in messages[0] and "cut short" in messages[0]
