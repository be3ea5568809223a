"""Any TensorFlow file system: the whole chain on `ram://`, and `filesystem`'s contract.

The chain runs in one process (TensorFlow's `ram://` lives in the process's
memory) with no local output at all: text and vocab on `ram://` ->
create_pretraining_data (sharded, with its manifest) -> run_pretraining,
resumed from its `ram://` checkpoint -> run_classifier on a `ram://` TSV,
initialised from the pretraining checkpoint -> SavedModel export to `ram://`
-> `tf.saved_model.load` from `ram://`, whose probabilities must be the
fine-tuned model's. The other writers (every pretraining-data mode, Beam
included; keras-hub and HF conversions; extract_features) are checked on
`ram://` against what they write locally or read back, and `filesystem`'s
contract (rename without overwrite, the standard errors) on both kinds of
path.
"""

import json
import os
import random
import uuid

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl import filesystem
from keras_bert_impl.checkpoints.original import load_original_checkpoint, open_checkpoint
from keras_bert_impl.config import BertConfig
from keras_bert_impl.data.classification_datasets import get_dataset, read_examples
from keras_bert_impl.data.text_pairs import convert_example_to_features
from keras_bert_impl.io import write_text_atomically
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.tokenization import FullTokenizer
from keras_bert_impl.training.checkpointing import checkpoint_steps
from tests.helpers import tiny_config
from tools import create_pretraining_data, run_classifier, run_pretraining

WORDS = "the a cat dog sat ran on mat big small red blue good bad film plot was very".split()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SEQ, PREDICTIONS = 16, 3
MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"


@pytest.fixture
def ram_root():
    root = f"ram://chain-{uuid.uuid4().hex[:8]}"
    yield root
    filesystem.rmtree(root)
    assert not filesystem.exists(root)


def write_inputs(root, rng):
    """vocab.txt, a corpus of 12 documents, bert_config.json and MRPC-layout TSVs, all on `root`."""
    vocab = SPECIAL + WORDS
    for directory in ("corpus", "MRPC"):
        filesystem.makedirs(f"{root}/{directory}")
    write_text_atomically(f"{root}/vocab.txt", "".join(f"{token}\n" for token in vocab))
    documents = [
        "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 8))) + " ." for _ in range(5))
        for _ in range(12)
    ]
    write_text_atomically(f"{root}/corpus/news.txt", "\n\n".join(documents) + "\n")
    # One encoder layer: the chain is about file systems, not layers.
    config = tiny_config(
        vocab_size=len(vocab) + 1, max_position_embeddings=SEQ, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        num_hidden_layers=1,
    )
    config.to_json_file(f"{root}/bert_config.json")
    for split, size in (("train", 16), ("dev", 8)):
        lines = [MRPC_HEADER]
        for i in range(size):
            label = rng.randrange(2)
            first = " ".join(rng.choice(WORDS) for _ in range(4)) + (" good" if label else " bad")
            lines.append(f"{label}\t{i}\t{i + 1}\t{first}\t{' '.join(rng.choice(WORDS) for _ in range(4))}\n")
        write_text_atomically(f"{root}/MRPC/{split}.tsv", "".join(lines))


def pretraining_flags(root, steps):
    return [
        f"--input_file={root}/data/news-*-of-*", f"--output_dir={root}/pretraining",
        f"--bert_config_file={root}/bert_config.json", "--do_train", f"--num_train_steps={steps}",
        "--num_warmup_steps=1", "--save_checkpoints_steps=2", "--train_batch_size=4", "--eval_batch_size=4",
        f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}", "--summary_steps=1",
    ]


def test_pretrain_resume_fine_tune_export_and_load_on_ram(ram_root, capsys):
    from keras_bert_impl.serving.export import ExportOptions, export_checkpoint

    root = ram_root
    write_inputs(root, random.Random(0))

    # Pretraining data: the sharded mode, so its manifest is on ram:// too
    # (one worker: another process has its own ram://).
    data_flags = [
        f"--input_file={root}/corpus/*.txt", f"--output_file={root}/data/news", f"--vocab_file={root}/vocab.txt",
        "--scalable", "--num_shards=2", "--num_workers=1", f"--max_seq_length={SEQ}",
        f"--max_predictions_per_seq={PREDICTIONS}", "--dupe_factor=2", "--random_seed=3",
    ]
    create_pretraining_data.main(data_flags)
    assert filesystem.listdir(f"{root}/data") == ["news-00000-of-00002", "news-00001-of-00002", "news.manifest.json"]
    # A rerun keeps both finished shards: the manifest is read back from ram://.
    create_pretraining_data.main(data_flags)
    assert "kept 2 finished shard(s)" in capsys.readouterr().err

    # Pretraining to step 2, then a rerun to step 4 that resumes from ram://
    # (its settings, read back from ram://, allowed to change).
    pretraining = f"{root}/pretraining"
    run_pretraining.main(pretraining_flags(root, 2))
    assert checkpoint_steps(pretraining) == [2]
    run_pretraining.main(pretraining_flags(root, 4) + ["--do_eval", "--max_eval_steps=2", "--allow_changed_settings"])
    err = capsys.readouterr().err
    assert f"resuming from {pretraining}/model.ckpt-2 (step 2)" in err
    assert "changed settings: num_train_steps 2 (now 4)" in err
    assert checkpoint_steps(pretraining) == [2, 4]
    assert int(open_checkpoint(f"{pretraining}/model.ckpt-4")[1].get_tensor("global_step")) == 4
    with filesystem.open_file(f"{pretraining}/eval_results.txt") as f:
        assert "global_step = 4\n" in f.read()
    assert filesystem.glob(f"{pretraining}/train/events.out.tfevents.*")

    # Fine-tuning from the pretraining checkpoint, data and outputs on ram://.
    classifier = f"{root}/classifier"
    run_classifier.main([
        "--task_name=MRPC", f"--data_dir={root}/MRPC", f"--vocab_file={root}/vocab.txt",
        f"--bert_config_file={root}/bert_config.json", f"--init_checkpoint={pretraining}/model.ckpt-4",
        f"--output_dir={classifier}", f"--max_seq_length={SEQ}", "--train_batch_size=8", "--eval_batch_size=8",
        "--num_train_epochs=1", "--do_train", "--do_eval",
    ])
    with filesystem.open_file(f"{classifier}/eval_results.txt") as f:
        results = dict(line.rstrip("\n").split(" = ") for line in f)
    assert results["global_step"] == "2"
    assert {"model.ckpt.index", "bert_config.json", "vocab.txt"} <= set(filesystem.listdir(classifier))
    assert not [name for name in filesystem.listdir(classifier) if ".partial-" in name]

    # Export to ram://, load from ram://: the fine-tuned model's probabilities.
    path = export_checkpoint(
        "classifier", f"{classifier}/bert_config.json", f"{classifier}/model.ckpt", f"{classifier}/vocab.txt",
        f"{root}/export", ExportOptions(max_seq_length=SEQ, version=1,
                                        precision="float32"),  # compared with the float32 Keras model below
        num_labels=2, log=lambda message: None,
    )
    assert path == f"{root}/export/1"
    loaded = tf.saved_model.load(path)
    model = BertClassifier(BertConfig.from_json_file(f"{classifier}/bert_config.json"), num_labels=2)
    load_original_checkpoint(model, f"{classifier}/model.ckpt")
    tokenizer = FullTokenizer(f"{classifier}/vocab.txt", do_lower_case=True)
    # eval_accuracy is the fine-tuned weights' accuracy on the 8 dev pairs (MRPC labels "0"/"1").
    dev = read_examples(get_dataset("MRPC"), f"{root}/MRPC", "dev")
    features = [convert_example_to_features(example, tokenizer, SEQ) for example in dev]
    dev_inputs = {key: np.array([getattr(f, key) for f in features], np.int32)
                  for key in ("input_ids", "input_mask", "segment_ids")}
    predicted = np.argmax(model(dev_inputs, training=False).numpy(), axis=1)
    accuracy = np.mean(predicted == np.array([int(example.label) for example in dev]))
    assert float(results["eval_accuracy"]) == pytest.approx(accuracy, abs=1e-6)
    examples = read_examples(get_dataset("MRPC"), f"{root}/MRPC", "dev")[:4]
    ids, mask = np.zeros((4, SEQ), np.int32), np.zeros((4, SEQ), np.int32)
    for row, example in enumerate(examples):
        tokens = ["[CLS]"] + tokenizer.tokenize(example.text_a)[: SEQ - 2] + ["[SEP]"]
        ids[row, : len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
        mask[row, : len(tokens)] = 1
    segments = np.zeros_like(ids)
    served = loaded.signatures["serve_ids"](
        input_ids=tf.constant(ids), input_mask=tf.constant(mask), segment_ids=tf.constant(segments)
    )
    logits = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments}, training=False)
    np.testing.assert_allclose(served["probabilities"].numpy(), tf.nn.softmax(logits).numpy(), atol=1e-5)


def read_bytes(path):
    with filesystem.open_file(path, "rb") as f:
        return f.read()


def test_pretraining_data_on_ram_is_the_local_data(ram_root, tmp_path):
    """The original-order, sharded and Beam modes write the same bytes to
    `ram://` as to a local disk, and the sharded modes the same manifest."""
    from keras_bert_impl.data.beam_pipeline import run_beam_pipeline
    from keras_bert_impl.data.pretraining_instances import InstanceOptions
    from keras_bert_impl.data.pretraining_pipeline import GenerationSettings
    from keras_bert_impl.jobs.create_pretraining_data import create_pretraining_data as make_data
    from keras_bert_impl.tokenization import load_vocab

    outputs = {}
    for root in (str(tmp_path), ram_root):
        write_inputs(root, random.Random(0))
        vocab, corpus = f"{root}/vocab.txt", f"{root}/corpus/news.txt"
        common = dict(max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=2, verbose=False)
        make_data(corpus, f"{root}/original/a.tfrecord,{root}/original/b.tfrecord", vocab, **common)
        make_data(corpus, f"{root}/sharded/news", vocab, scalable=True, num_shards=2, num_workers=1, **common)
        settings = GenerationSettings(
            vocab=load_vocab(vocab), vocab_file=vocab, do_lower_case=True,
            options=InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=2),
        )
        run_beam_pipeline(corpus, f"{root}/beam/news", settings, 2, log=lambda message: None)
        outputs[root] = {
            directory: {name: read_bytes(f"{root}/{directory}/{name}") for name in filesystem.listdir(f"{root}/{directory}")}
            for directory in ("original", "sharded", "beam")
        }
    local, ram = outputs.values()
    assert sorted(ram["original"]) == ["a.tfrecord", "b.tfrecord"]
    assert sorted(ram["beam"]) == sorted(ram["sharded"]) == ["news-00000-of-00002", "news-00001-of-00002", "news.manifest.json"]
    for directory in ("original", "sharded", "beam"):
        for name in ram[directory]:
            if name.endswith(".json"):
                # The manifests name their input files: compare what they record of the shards.
                assert json.loads(ram[directory][name])["shards"] == json.loads(local[directory][name])["shards"]
            else:
                assert ram[directory][name] == local[directory][name], (directory, name)
    assert ram["beam"]["news-00000-of-00002"] == ram["sharded"]["news-00000-of-00002"]


def test_keras_hub_preset_round_trip_on_ram(ram_root):
    """A release on ram:// -> a keras-hub preset on ram:// -> a release on ram://, bit-identical."""
    from keras_bert_impl.checkpoints.release import write_release
    from keras_bert_impl.cli import run_tool
    from keras_bert_impl.models.pretraining import BertPretrainingModel
    from tests.helpers import randomize
    from tools.convert_keras_hub import main as convert_keras_hub

    vocab = SPECIAL + WORDS + [f"word{i}" for i in range(40)]
    config = tiny_config(vocab_size=len(vocab))
    model = BertPretrainingModel(config)
    randomize(model, seed=3)
    release, preset, again = f"{ram_root}/release", f"{ram_root}/preset", f"{ram_root}/again"
    prefix = write_release(model, release, config, vocab, global_step=11)
    assert run_tool(convert_keras_hub, [
        "--to_preset", f"--bert_config_file={release}/bert_config.json", f"--init_checkpoint={prefix}",
        f"--vocab_file={release}/vocab.txt", f"--preset_dir={preset}",
    ]) == 0
    assert {"config.json", "original"} <= set(filesystem.listdir(preset))
    assert run_tool(convert_keras_hub, ["--from_preset", f"--preset_dir={preset}", f"--output_dir={again}"]) == 0
    (_, reader), (_, back) = open_checkpoint(prefix), open_checkpoint(f"{again}/bert_model.ckpt")
    names = reader.get_variable_to_shape_map()
    assert names == back.get_variable_to_shape_map() and "global_step" in names
    for name in names:
        assert reader.get_tensor(name).tobytes() == back.get_tensor(name).tobytes(), name
    assert read_bytes(f"{release}/vocab.txt") == read_bytes(f"{again}/vocab.txt")


def test_hf_conversion_reads_and_writes_ram(ram_root, tmp_path):
    """An HF directory on ram:// (no memory map there) becomes a release on ram:// with the same weights."""
    from keras_bert_impl.checkpoints.hf import convert_hf_to_original
    from tests.test_faults_assets import write_tiny_hf_dir

    weights = write_tiny_hf_dir(tmp_path)
    hf_dir, release = f"{ram_root}/hf", f"{ram_root}/release"
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        filesystem.copy(str(tmp_path / name), f"{hf_dir}/{name}")
    _, prefix = convert_hf_to_original(hf_dir, release)
    assert prefix == f"{release}/bert_model.ckpt"
    assert filesystem.listdir(release) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index", "checkpoint", "vocab.txt",
    ]
    _, reader = open_checkpoint(prefix)
    for name, array in weights.items():
        assert reader.get_tensor(name).tobytes() == array.tobytes(), name


def test_extract_features_reads_and_writes_ram(ram_root):
    from keras_bert_impl.checkpoints.release import write_release
    from keras_bert_impl.jobs.extract_features import extract_features
    from keras_bert_impl.models.bert_model import BertModel

    vocab = SPECIAL + WORDS
    config = tiny_config(vocab_size=len(vocab), num_hidden_layers=1)
    prefix = write_release(BertModel(config), f"{ram_root}/release", config, vocab)
    write_text_atomically(f"{ram_root}/input.txt", "the cat sat\nthe dog ran ||| on the mat\n")
    count = extract_features(
        input_file=f"{ram_root}/input.txt", output_file=f"{ram_root}/features/out.jsonl",
        bert_config_file=f"{ram_root}/release/bert_config.json", init_checkpoint=prefix,
        vocab_file=f"{ram_root}/release/vocab.txt", layers="-1", max_seq_length=SEQ,
    )
    lines = read_bytes(f"{ram_root}/features/out.jsonl").decode("utf-8").splitlines()
    assert count == len(lines) == 2
    assert [token["token"] for token in json.loads(lines[1])["features"]][:3] == ["[CLS]", "the", "dog"]
    assert filesystem.listdir(f"{ram_root}/features") == ["out.jsonl"]


# ----------------------------------------------------------------------------
# filesystem.py on both kinds of path.
# ----------------------------------------------------------------------------


@pytest.fixture(params=["local", "ram"])
def directory(request, tmp_path):
    if request.param == "local":
        yield str(tmp_path)
        return
    root = f"ram://fs-{uuid.uuid4().hex[:8]}"
    filesystem.makedirs(root)
    yield root
    filesystem.rmtree(root)


def write(path, text):
    with filesystem.open_file(path, "w") as f:
        f.write(text)


def read(path):
    with filesystem.open_file(path) as f:
        return f.read()


def test_rename_without_overwrite_refuses_an_existing_file(directory):
    source, target = filesystem.join(directory, "new.txt"), filesystem.join(directory, "old.txt")
    write(source, "new\n")
    write(target, "old\n")
    with pytest.raises(FileExistsError):
        filesystem.rename(source, target, overwrite=False)
    assert read(target) == "old\n" and read(source) == "new\n"
    filesystem.rename(source, target)  # overwrite=True replaces it.
    assert read(target) == "new\n" and not filesystem.exists(source)


def test_missing_paths_raise_the_standard_errors(directory):
    missing = filesystem.join(directory, "missing", "file.txt")
    with pytest.raises(FileNotFoundError):
        filesystem.open_file(missing)
    with pytest.raises(FileNotFoundError):
        filesystem.getsize(missing)
    with pytest.raises(FileNotFoundError):
        filesystem.remove(missing)
    filesystem.remove(missing, missing_ok=True)
    with pytest.raises(IsADirectoryError):
        filesystem.open_file(directory)


def test_listing_globbing_and_sizes(directory):
    filesystem.makedirs(filesystem.join(directory, "d", "e"))
    for name in ("b.txt", "a.txt", "c[1].txt"):
        write(filesystem.join(directory, "d", name), "12345")
    assert filesystem.listdir(filesystem.join(directory, "d")) == ["a.txt", "b.txt", "c[1].txt", "e"]
    pattern = filesystem.join(filesystem.escape_glob(filesystem.join(directory, "d")), "*.txt")
    assert [filesystem.basename(p) for p in filesystem.glob(pattern)] == ["a.txt", "b.txt", "c[1].txt"]
    literal = filesystem.escape_glob(filesystem.join(directory, "d", "c[1].txt"))
    assert [filesystem.basename(p) for p in filesystem.glob(literal)] == ["c[1].txt"]
    assert filesystem.getsize(filesystem.join(directory, "d", "a.txt")) == 5
    assert filesystem.isdir(filesystem.join(directory, "d", "e")) and filesystem.isfile(filesystem.join(directory, "d", "a.txt"))
    filesystem.rmtree(filesystem.join(directory, "d"))
    assert not filesystem.exists(filesystem.join(directory, "d", "a.txt"))


def test_join_and_dirname_keep_remote_paths_posix():
    assert filesystem.join("gs://bucket/dir", "a", "b.txt") == "gs://bucket/dir/a/b.txt"
    assert filesystem.dirname("gs://bucket/dir/b.txt") == "gs://bucket/dir"
    assert filesystem.basename("gs://bucket/dir/") == "dir"
    assert filesystem.join("dir", "b.txt") == os.path.join("dir", "b.txt")


def test_local_paths_do_not_import_tensorflow(tmp_path):
    """The pretraining-data workers stay TF-free on a local disk."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from keras_bert_impl import filesystem\n"
        "from keras_bert_impl.data.tfrecord_files import TFRecordFileWriter, read_records\n"
        f"path = filesystem.join({str(tmp_path)!r}, 'sub', 'a.tfrecord')\n"
        "with TFRecordFileWriter(path) as writer:\n"
        "    writer.write(b'x')\n"
        "assert list(read_records(path)) == [b'x'] and filesystem.listdir(filesystem.dirname(path)) == ['a.tfrecord']\n"
        "assert 'tensorflow' not in sys.modules\n"
    )
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", script], check=True, cwd=repo)
