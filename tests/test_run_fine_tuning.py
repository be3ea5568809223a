"""The one fine-tuning job, driven by a task spec written here (as a new task would be).

The three tools' own tests check the original's files and metrics end to end;
these check the job's contract with any spec: its steps in order, the
original's step count, the release and label list it writes, an eval-only
rerun on the weights it wrote, and bad input refused before any output.
"""

import dataclasses
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from helpers import tiny_config
from keras_bert_impl.checkpoints.original import list_original_variables, save_original_checkpoint
from keras_bert_impl.errors import InputFileError, OutputPathError, TrainingDivergedError
from keras_bert_impl.jobs.run_fine_tuning import run_fine_tuning
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.tasks.classifier import CLASSIFIER, compile_options
from keras_bert_impl.tasks.spec import FineTuningSpec, TaskInputs
from keras_bert_impl.training.fine_tuning import FineTuningRun, FineTuningSettings, TrainingData

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "odd", "even", "one", "two", "three"]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    directory = tmp_path_factory.mktemp("release")
    (directory / "vocab.txt").write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    config = tiny_config(vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=16)
    config.to_json_file(directory / "bert_config.json")
    save_original_checkpoint(BertModel(config), str(directory / "bert_model.ckpt"))
    return directory


def toy_features(num_examples, seed):
    """[CLS] word [SEP] rows of width 6 with one padded position; label 1 for "odd"."""
    rng = np.random.default_rng(seed)
    words = rng.integers(5, len(WORDS), size=num_examples)
    ids = np.zeros((num_examples, 6), np.int32)
    ids[:, :3] = np.stack([np.full(num_examples, 2), words, np.full(num_examples, 3)], axis=1)
    ids[:, 3:5] = rng.integers(7, len(WORDS), size=(num_examples, 2))
    mask = (ids > 0).astype(np.int32)
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
    return inputs, (words == 5).astype(np.int32)


@dataclasses.dataclass(frozen=True)
class ToyFineTuning(FineTuningSpec):
    """A classification task of its own: is the first word "odd"?"""

    num_examples: int = 20
    bad_input: bool = False
    nan_weight_rows: tuple = ()  # rows whose sample weight is NaN; the data then keep their order
    calls: list = dataclasses.field(default_factory=list)
    name = "toy"
    head_description = "toy classification"

    def read_inputs(self, release, run, log):
        self.calls.append("read_inputs")
        if self.bad_input:
            raise InputFileError("toy.txt:3: not a toy example")
        splits = {"train": toy_features(self.num_examples, seed=1), "eval": toy_features(12, seed=2)}
        return TaskInputs(CLASSIFIER, splits, num_labels=2, labels=("even", "odd"))

    def training_data(self, inputs, release, run, log):
        self.calls.append("training_data")
        features, labels = inputs.splits["train"]
        weights, in_order = None, {}
        if self.nan_weight_rows:
            weights = np.ones(len(labels), np.float32)
            weights[list(self.nan_weight_rows)] = np.nan
            in_order = {"shuffle_buffer": 1}
        return TrainingData(features, labels, num_examples=len(labels), unit="toy examples",
                            description=f"{len(labels)} toy examples", source="toy.txt", sample_weights=weights,
                            **in_order)

    def compile_options(self, inputs):
        self.calls.append("compile_options")
        return compile_options(is_regression=False)

    def evaluate(self, model, inputs, release, global_step, run, log):
        self.calls.append("evaluate")
        features, labels = inputs.splits["eval"]
        logits = model.predict(features, verbose=0)
        return {"global_step": global_step, "logits": logits.tolist(),
                "accuracy": float(np.mean(logits.argmax(-1) == labels))}

    def predict(self, model, inputs, release, global_step, run, log):
        self.calls.append("predict")
        return {}


def toy_run(release, output_dir, save_checkpoints_steps=3, learning_rate=1e-3, **options):
    return FineTuningRun(
        output_dir=str(output_dir), bert_config_file=str(release / "bert_config.json"),
        vocab_file=str(release / "vocab.txt"), init_checkpoint=str(release / "bert_model.ckpt"), max_seq_length=6,
        training=FineTuningSettings(train_batch_size=4, num_train_epochs=1.5, learning_rate=learning_rate,
                                    save_checkpoints_steps=save_checkpoints_steps),
        **options,
    )


def test_a_spec_of_its_own_trains_writes_a_release_and_evaluates_it_again(release, tmp_path):
    output_dir = tmp_path / "out"
    spec = ToyFineTuning()
    trained = run_fine_tuning(spec, toy_run(release, output_dir, do_train=True, do_eval=True), log=lambda m: None)
    assert spec.calls == ["read_inputs", "training_data", "compile_options", "evaluate"]
    # The original's step count: int(20 examples / 4 per batch * 1.5 epochs).
    assert trained["global_step"] == 7
    assert sorted(p.name for p in output_dir.glob("model.ckpt-*.index")) == [
        "model.ckpt-3.index", "model.ckpt-6.index", "model.ckpt-7.index"]
    recorded = json.loads((output_dir / "training_settings.json").read_text())
    assert (recorded["num_train_steps"], recorded["num_warmup_steps"], recorded["num_train_examples"]) == (7, 0, 20)
    assert (output_dir / "label_list.txt").read_text() == "even\nodd\n"
    names = list_original_variables(str(output_dir / "model.ckpt"))
    assert names["output_weights"] == [2, 16] and "bert/pooler/dense/kernel" in names

    # Eval only: the weights come from the release the run wrote, not from --init_checkpoint.
    again = ToyFineTuning()
    evaluated = run_fine_tuning(again, toy_run(release, output_dir, do_eval=True, do_predict=True),
                                log=lambda m: None)
    assert again.calls == ["read_inputs", "evaluate", "predict"]
    assert evaluated["global_step"] == 7
    np.testing.assert_allclose(evaluated["logits"], trained["logits"], rtol=1e-5, atol=1e-6)

    # A rerun of the finished run trains nothing more and gives the same answers.
    rerun = run_fine_tuning(ToyFineTuning(), toy_run(release, output_dir, do_train=True, do_eval=True),
                            log=lambda m: None)
    assert rerun["global_step"] == 7
    np.testing.assert_allclose(rerun["logits"], trained["logits"], rtol=1e-5, atol=1e-6)


def test_bad_input_stops_the_job_before_any_output(release, tmp_path):
    spec = ToyFineTuning(bad_input=True)
    with pytest.raises(InputFileError, match="toy.txt:3"):
        run_fine_tuning(spec, toy_run(release, tmp_path / "out", do_train=True), log=lambda m: None)
    assert spec.calls == ["read_inputs"] and not (tmp_path / "out").exists()


def test_too_little_data_for_one_step_is_named(release, tmp_path):
    with pytest.raises(InputFileError, match=r"toy.txt: 2 toy examples with --train_batch_size=4 and "
                                             r"--num_train_epochs=1.5 make 0 training steps"):
        run_fine_tuning(ToyFineTuning(num_examples=2), toy_run(release, tmp_path / "out", do_train=True),
                        log=lambda m: None)
    assert not list((tmp_path / "out").glob("model.ckpt*"))


def test_a_second_run_into_the_same_output_dir_is_refused_and_the_lock_dies_with_its_holder(release, tmp_path):
    """Another live process writing the directory (here: holding its lock) is named; killed
    with -9, it leaves no lock behind, and the same run then goes through."""
    output_dir = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom keras_bert_impl.io import exclusive_output\n"
         f"with exclusive_output({str(output_dir)!r}):\n    print('locked', flush=True)\n    time.sleep(300)\n"],
        stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(OutputPathError, match=rf"out: another run \(pid {holder.pid}\) is writing it"):
            run_fine_tuning(ToyFineTuning(), toy_run(release, output_dir, do_train=True), log=lambda m: None)
        assert not output_dir.exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    result = run_fine_tuning(ToyFineTuning(), toy_run(release, output_dir, do_train=True, do_eval=True),
                             log=lambda m: None)
    assert result["global_step"] == 7


def test_a_loss_turning_nan_stops_the_run_and_keeps_the_good_checkpoints(release, tmp_path):
    """Rows 8-11 (the third batch, the data in order) weigh NaN: steps 1 and 2 are
    saved, step 3 ends the run with one error, and nothing looks finished."""
    output_dir = tmp_path / "out"
    with pytest.raises(TrainingDivergedError, match=r"stopped at step 3: the loss is nan; the checkpoints in .*out"):
        run_fine_tuning(ToyFineTuning(nan_weight_rows=(8, 9, 10, 11)),
                        toy_run(release, output_dir, save_checkpoints_steps=1, do_train=True), log=lambda m: None)
    assert sorted(p.name for p in output_dir.glob("model.ckpt*.index")) == ["model.ckpt-1.index", "model.ckpt-2.index"]
    assert not (output_dir / "label_list.txt").exists() and not (output_dir / "bert_config.json").exists()
    for step in (1, 2):
        reader = tf.train.load_checkpoint(str(output_dir / f"model.ckpt-{step}"))
        assert np.isfinite(reader.get_tensor("output_weights")).all()


def test_weights_that_diverge_are_never_saved(release, tmp_path):
    """A learning rate of 1e39 sends the weights to infinity on the first step,
    whose loss was still finite: the checkpoint of that step is refused."""
    output_dir = tmp_path / "out"
    with pytest.raises(TrainingDivergedError, match=r"at step 1 the weight .* holds NaN or infinite values; not saved"):
        run_fine_tuning(ToyFineTuning(), toy_run(release, output_dir, save_checkpoints_steps=1, learning_rate=1e39,
                                                 do_train=True), log=lambda m: None)
    assert not list(output_dir.glob("model.ckpt*"))


def test_a_full_disk_while_a_checkpoint_is_written_is_one_line_and_no_release(release, tmp_path, monkeypatch, capsys):
    """TensorFlow's own write error (its code for ENOSPC), injected where the first checkpoint
    is written: one stderr line from the tool (was a 30-line traceback), and nothing that looks
    like a finished run in --output_dir."""
    from keras_bert_impl.cli import run_tool
    from keras_bert_impl.training import checkpointing
    from tools import run_classifier

    data = tmp_path / "data"
    data.mkdir()
    rows = ["text,label"] + [f"{'odd one' if i % 2 else 'even two'},{'odd' if i % 2 else 'even'}" for i in range(16)]
    (data / "train.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")

    def full_disk(tensors, prefix):
        raise tf.errors.ResourceExhaustedError(None, None, f"{prefix}.data-00000-of-00001.tempstate: No space left on "
                                               "device\nmore detail\non more lines")

    monkeypatch.setattr(checkpointing, "write_checkpoint_tensors", full_disk)
    out = tmp_path / "out"
    code = run_tool(run_classifier.main, [
        "--task_name=csv", f"--data_dir={data}", f"--vocab_file={release}/vocab.txt",
        f"--bert_config_file={release}/bert_config.json", f"--init_checkpoint={release}/bert_model.ckpt",
        "--max_seq_length=6", "--train_batch_size=4", "--save_checkpoints_steps=2", "--do_train",
        f"--output_dir={out}"], prog="run_classifier")
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("run_classifier: error")]
    assert code == 1 and errors == [
        f"run_classifier: error: {out}/model.ckpt-2.data-00000-of-00001.tempstate: No space left on device"]
    assert not (out / "bert_config.json").exists() and not (out / "model.ckpt.index").exists()
