"""tools/extract_features.py: the original's input format and JSON layout,
values as an independent implementation computes them, and clear errors."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_bert_impl.checkpoints.original import save_original_checkpoint
from keras_bert_impl.data.text_pairs import (
    TextPairExample,
    convert_example_to_features,
    parse_text_pair_line,
    read_text_pair_examples,
)
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.tokenization import FullTokenizer
from tests.helpers import randomize, run_tool_here, tiny_config
from tools import extract_features

LINES = [
    "The quick brown fox jumps over the lazy dog.",
    "Who was Jim Henson? ||| Jim Henson was a puppeteer.",
    "Ünïcödé, café and 東京 — all here!",
    "a very long first sentence " * 6 + "||| and a shorter second one",
    "",
]


@pytest.fixture(scope="module")
def release(tmp_path_factory, bert_vocab_file):
    """A tiny original-format release (config, checkpoint, real vocab)."""
    directory = tmp_path_factory.mktemp("release")
    config = tiny_config(vocab_size=30522, max_position_embeddings=64)
    model = BertModel(config)
    randomize(model, seed=9, scale=0.1)
    save_original_checkpoint(model, str(directory / "bert_model.ckpt"))
    config.to_json_file(directory / "bert_config.json")
    (directory / "vocab.txt").write_bytes(bert_vocab_file.read_bytes())
    return directory, config


def flags(release_dir, input_file, out, **extra):
    values = {
        "input_file": input_file,
        "output_file": out,
        "vocab_file": release_dir / "vocab.txt",
        "bert_config_file": release_dir / "bert_config.json",
        "init_checkpoint": release_dir / "bert_model.ckpt",
        "max_seq_length": 20,
        "layers": "-1,-2",
        "batch_size": 2,
    }
    values.update(extra)
    return [f"--{k}={v}" for k, v in values.items()]


def test_features_match_tf_models_conversion(bert_vocab_file):
    from official.nlp.data import classifier_data_lib
    from official.nlp.tools import tokenization as orig

    ours = FullTokenizer(str(bert_vocab_file), do_lower_case=True)
    theirs = orig.FullTokenizer(str(bert_vocab_file), do_lower_case=True)
    for i, line in enumerate(LINES):
        text_a, text_b = parse_text_pair_line(line)
        got = convert_example_to_features(TextPairExample(i, text_a, text_b), ours, 20)
        ref = classifier_data_lib.convert_single_example(
            10, classifier_data_lib.InputExample(str(i), text_a, text_b, "0"), ["0"], 20, theirs
        )
        assert (got.input_ids, got.input_mask, got.segment_ids) == (ref.input_ids, ref.input_mask, ref.segment_ids)


@pytest.fixture(scope="module")
def float32_run(release, tmp_path_factory):
    """The tool on `LINES` at its default precision (float32): `(input file, records)`."""
    release_dir, _ = release
    directory = tmp_path_factory.mktemp("float32_run")
    input_file = directory / "input.txt"
    input_file.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    output_file = directory / "out" / "features.jsonl"
    assert extract_features.main(flags(release_dir, input_file, output_file)) is None
    return input_file, [json.loads(line) for line in output_file.read_text().splitlines()]


def test_output_matches_tf_models_encoder(release, float32_run, tmp_path):
    """Values as the original modeling code computes them, via tf-models'
    reader of original checkpoints and its encoder (tanh GELU, -10000 mask)."""
    import tensorflow as tf
    from official.legacy.bert import configs
    from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter

    release_dir, _ = release
    input_file, records = float32_run
    assert [r["linex_index"] for r in records] == list(range(len(LINES)))
    assert list(records[1]) == ["linex_index", "features"]
    assert list(records[1]["features"][0]) == ["token", "layers"]
    assert list(records[1]["features"][0]["layers"][0]) == ["index", "values"]
    tokens = [f["token"] for f in records[1]["features"]]
    assert tokens == ["[CLS]", "who", "was", "jim", "henson", "?", "[SEP]", "jim", "henson", "was", "a", "puppet", "##eer", ".", "[SEP]"]
    assert [f["token"] for f in records[4]["features"]] == ["[CLS]", "[SEP]"]
    assert len(records[3]["features"]) == 20  # truncated pair fills max_seq_length

    tf_config = configs.BertConfig.from_json_file(str(release_dir / "bert_config.json"))
    converted = str(tmp_path / "converted" / "ckpt")
    converter.convert_checkpoint(tf_config, converted, str(release_dir / "bert_model.ckpt"))
    encoder = converter._create_bert_model(tf_config)
    tf.train.Checkpoint(model=encoder).read(tf.train.latest_checkpoint(str(tmp_path / "converted"))).assert_existing_objects_matched()

    tokenizer = FullTokenizer(str(release_dir / "vocab.txt"))
    for record, example in zip(records, read_text_pair_examples(input_file)):
        features = convert_example_to_features(example, tokenizer, 20)
        ids = lambda key: np.array([getattr(features, key)], "int32")  # noqa: E731
        encoder_outputs = _all_layers(encoder, ids("input_ids"), ids("input_mask"), ids("segment_ids"))
        for position, token_record in enumerate(record["features"]):
            assert token_record["token"] == features.tokens[position]
            for layer in token_record["layers"]:
                expected = encoder_outputs[layer["index"]][0, position]
                np.testing.assert_allclose(layer["values"], expected, atol=1e-4)
                # Rounded to 6 decimals, as the original writes them.
                assert all(round(v, 6) == v for v in layer["values"])


def _all_layers(encoder, input_ids, input_mask, segment_ids):
    """Every transformer layer's output of a tf-models BertEncoder."""
    import tf_keras

    probe = tf_keras.Model(encoder.inputs, [encoder.get_layer(f"transformer/layer_{i}").output for i in range(len(encoder.transformer_layers))])
    return [np.asarray(x) for x in probe([input_ids, input_mask, segment_ids])]


def run_tool(args):
    """Runs the console script in a fresh process, as a user would."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, "-m", "tools.extract_features", *map(str, args)],
        capture_output=True, text=True, env=env, cwd=os.path.dirname(os.path.dirname(__file__)),
    )


def extract_here(args, capfd):
    """The tool in this process (`tests.helpers.run_tool_here`)."""
    return run_tool_here(extract_features.main, args, capfd, "extract_features")


def assert_one_line_error(result, *fragments):
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_non_utf8_input_names_file_and_line(release, tmp_path):
    """In a process of its own, as a user runs it: its whole stderr one line, a non-zero exit (the other bad
    input below runs the tool in this process)."""
    release_dir, _ = release
    input_file = tmp_path / "input.txt"
    input_file.write_bytes(b"fine line\nbad \xff\xfe bytes\n")
    output_file = tmp_path / "out.jsonl"
    result = run_tool(flags(release_dir, input_file, output_file))
    assert_one_line_error(result, f"{input_file}:2: not valid UTF-8")
    assert not output_file.exists() and os.listdir(tmp_path) == ["input.txt"]


@pytest.mark.parametrize(
    "change, fragments",
    [
        ({"layers": "-1,-3"}, ["--layers", "[-2, 1]"]),
        ({"max_seq_length": 100}, ["--max_seq_length 100 exceeds max_position_embeddings 64"]),
        ({"bert_config_file": "/nonexistent/bert_config.json"}, ["/nonexistent/bert_config.json: config file not found"]),
        ({"init_checkpoint": "/nonexistent/bert_model.ckpt"}, ["/nonexistent/bert_model.ckpt", "checkpoint not found"]),
        ({"output_file": "/proc/forbidden/out.jsonl"}, ["/proc/forbidden"]),
        ({"bogus_flag": 1}, ["Unknown command line flag 'bogus_flag'"]),
    ],
)
def test_bad_flags_and_files_are_one_line_errors(release, tmp_path, capfd, change, fragments):
    release_dir, _ = release
    input_file = tmp_path / "input.txt"
    input_file.write_text("hello world\n")
    args = flags(release_dir, input_file, tmp_path / "out.jsonl", **change)
    assert_one_line_error(extract_here(args, capfd), *fragments)
    assert not (tmp_path / "out.jsonl").exists()


def test_vocab_without_special_tokens(release, tmp_path, capfd):
    release_dir, _ = release
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(t for t in (release_dir / "vocab.txt").read_text().splitlines() if t != "[MASK]") + "\n")
    input_file = tmp_path / "input.txt"
    input_file.write_text("hello\n")
    result = extract_here(flags(release_dir, input_file, tmp_path / "o.jsonl", vocab_file=vocab), capfd)
    assert_one_line_error(result, str(vocab), "[MASK]")


def test_vocab_longer_than_vocab_size(release, tmp_path, capfd):
    """Two tokens past the embedding table: named before any text is read
    (was: an embedding-lookup traceback once a text reached them)."""
    release_dir, _ = release
    vocab = tmp_path / "vocab.txt"
    tokens = (release_dir / "vocab.txt").read_text().splitlines()
    vocab.write_text("\n".join(tokens + ["extra1", "extra2"]) + "\n")
    input_file = tmp_path / "input.txt"
    input_file.write_text("extra1 extra2\n")
    result = extract_here(flags(release_dir, input_file, tmp_path / "o.jsonl", vocab_file=vocab), capfd)
    vocab_size = json.loads((release_dir / "bert_config.json").read_text())["vocab_size"]
    assert vocab_size == len(tokens)
    assert_one_line_error(
        result, f"{vocab}: {len(tokens) + 2} tokens (ids up to {len(tokens) + 1}), more than vocab_size {vocab_size}"
    )
    assert not (tmp_path / "o.jsonl").exists()


def test_missing_input_file_is_reported(tmp_path):
    with pytest.raises(InputFileError, match="input file not found"):
        read_text_pair_examples(tmp_path / "absent.txt")


def test_bfloat16_values_are_within_bfloat16_rounding_of_float32(release, float32_run, tmp_path):
    """--precision=bfloat16: the same records, each value within bfloat16
    rounding of the float32 run's (the default, the original's values)."""
    release_dir, _ = release
    input_file, float32_records = float32_run
    output_file = tmp_path / "bfloat16" / "features.jsonl"
    assert extract_features.main(flags(release_dir, input_file, output_file, precision="bfloat16")) is None
    runs = {"float32": float32_records, "bfloat16": [json.loads(line) for line in output_file.read_text().splitlines()]}
    assert len(runs["bfloat16"]) == len(LINES)
    differences = []
    for full, half in zip(runs["float32"], runs["bfloat16"]):
        assert [f["token"] for f in half["features"]] == [f["token"] for f in full["features"]]
        for full_token, half_token in zip(full["features"], half["features"]):
            for full_layer, half_layer in zip(full_token["layers"], half_token["layers"]):
                assert full_layer["index"] == half_layer["index"]
                differences.append(np.abs(np.subtract(half_layer["values"], full_layer["values"])))
    differences = np.concatenate(differences)
    # LayerNorm outputs of order 1 after two layers: each bfloat16 rounding
    # moves a value by up to 2**-9 of itself, a few dozen of them by about 5e-2.
    assert differences.max() < 5e-2
    assert differences.max() > 1e-4  # really computed in bfloat16
