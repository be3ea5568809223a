"""bert-predict: every text's answer as the export gives it alone, each key once, in one process and on
Beam (DirectRunner, two worker processes), across a kill -9 and a rerun; bad input named by file:line.

The exports are tiny classifiers of test_faults_serving's fixtures, made with the export API.
"""

import collections
import glob
import json
import os
import signal
import subprocess
import sys
import time

import apache_beam  # noqa: F401  (a missing [beam] extra fails at collection, as test_pretraining_beam)
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.cli import run_tool
from tests.test_faults_serving import exported, release  # noqa: F401  (fixtures)
from tools import predict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MULTI_PROCESS = ["--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]
ONE_WORKER_PROCESS = ["--runner=DirectRunner", "--direct_num_workers=1", "--direct_running_mode=multi_processing"]
TEXTS = ["the weather is good .", "a film", "the film is bad", "bad bad weather", "good good good film .",
         "the the the", "is a film good ?", "weather"]


@pytest.fixture
def corpus(tmp_path):
    """A txt file (a blank line in it) and a jsonl file with a key column: `(input_file flag, {key: text})`."""
    txt, jsonl = tmp_path / "in" / "a.txt", tmp_path / "in" / "b.jsonl"
    txt.parent.mkdir()
    txt.write_text("\n".join(TEXTS[:2] + [""] + TEXTS[2:4]) + "\n", encoding="utf-8")
    jsonl.write_text("".join(json.dumps({"id": f"doc-{i}", "review": t}) + "\n" for i, t in enumerate(TEXTS[4:])),
                     encoding="utf-8")
    expected = {f"{txt}:1": TEXTS[0], f"{txt}:2": TEXTS[1], f"{txt}:4": TEXTS[2], f"{txt}:5": TEXTS[3]}
    return txt, jsonl, expected


def tool(argv, capsys):
    code = run_tool(predict.main, argv, prog="predict")
    return code, capsys.readouterr().err.strip().splitlines()


def read_rows(prefix):
    """The rows of a complete result (its manifest's shards), in shard order."""
    manifest = json.loads(open(f"{prefix}.manifest.json", encoding="utf-8").read())
    directory = os.path.dirname(prefix)
    rows = []
    for name in manifest["shards"]:
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            rows += [json.loads(line) for line in f]
    assert manifest["records"] == len(rows)
    return rows


def alone(loaded, text, text_b=None):
    """The export's answer for one text, called on its own."""
    if text_b is None:
        return loaded.signatures["serving_default"](text=tf.constant([text]))
    return loaded.signatures["serve_text_pair"](text=tf.constant([text]), text_b=tf.constant([text_b]))


def assert_answers_as_alone(rows, texts, loaded, pairs=None):
    keys = collections.Counter(row["key"] for row in rows)
    assert sorted(keys) == sorted(texts) and set(keys.values()) == {1}  # every text, each exactly once
    for row in rows:
        expected = alone(loaded, texts[row["key"]], pairs[row["key"]] if pairs else None)
        np.testing.assert_allclose(row["probabilities"], expected["probabilities"].numpy()[0], atol=1e-4, rtol=0)
        assert row["labels"] == expected["labels"].numpy()[0].decode() and row["label_ids"] == expected["label_ids"].numpy()[0]


def test_beam_on_two_worker_processes_and_one_process_answer_as_the_export_alone(
        exported, corpus, tmp_path, capsys, monkeypatch):  # noqa: F811
    path, loaded = exported
    txt, jsonl, texts = corpus
    common = [f"--input_file={tmp_path / 'in' / '*.txt'}", f"--saved_model_dir={os.path.dirname(path)}",
              "--batch_size=3", "--num_shards=3"]
    # Keys: file:line for the txt file (its model named by its base directory: the highest version);
    # the key column of the jsonl file, whose texts are in `review`.
    # On Beam, the txt file on two worker processes; the jsonl file on the DirectRunner in this process.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    jsonl_flags = ["--text_column=review", "--key_column=id"]
    for mode, extra in (("beam", ["--beam", *MULTI_PROCESS]), ("one", [])):
        jsonl_extra = ["--beam", "--runner=DirectRunner"] if mode == "beam" else []
        assert tool([f"--input_file={jsonl}", f"--saved_model_dir={path}", f"--output_prefix={tmp_path / mode / 'j'}",
                     *jsonl_flags, *jsonl_extra], capsys)[0] == 0
        assert tool(common + [f"--output_prefix={tmp_path / mode / 't'}", *extra], capsys)[0] == 0
    for mode in ("beam", "one"):
        assert sorted(os.listdir(tmp_path / mode)) == sorted(
            [f"t-0000{i}-of-00003.jsonl" for i in range(3)]
            + [f"j-0000{i}-of-00004.jsonl" for i in range(4)] + ["j.manifest.json", "t.manifest.json"])
        assert_answers_as_alone(read_rows(tmp_path / mode / "t"), texts, loaded)
        assert_answers_as_alone(read_rows(tmp_path / mode / "j"), {f"doc-{i}": t for i, t in enumerate(TEXTS[4:])},
                                loaded)


def test_pairs_and_tfrecord_outputs(exported, tmp_path, capsys):  # noqa: F811
    """A CSV of pairs runs serve_text_pair; TFRecord inputs and outputs hold the same values as JSON lines."""
    path, loaded = exported
    csv_file = tmp_path / "pairs.csv"
    csv_file.write_text("a,b\n" + "".join(f'"{t}",{TEXTS[-1 - i]}\n' for i, t in enumerate(TEXTS)), encoding="utf-8")
    out = tmp_path / "out" / "pairs"
    assert tool([f"--input_file={csv_file}", "--text_column=a", "--text_b_column=b", f"--saved_model_dir={path}",
                 f"--output_prefix={out}", "--num_shards=2"], capsys)[0] == 0
    keys = {f"{csv_file}:{i + 2}": t for i, t in enumerate(TEXTS)}
    assert_answers_as_alone(read_rows(out), keys, loaded, {f"{csv_file}:{i + 2}": TEXTS[-1 - i] for i in range(len(TEXTS))})

    records = tmp_path / "texts.tfrecord"
    with tf.io.TFRecordWriter(str(records)) as writer:
        for text in TEXTS:
            feature = {"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))}
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    out = tmp_path / "out" / "examples"
    assert tool([f"--input_file={records}", f"--saved_model_dir={path}", f"--output_prefix={out}",
                 "--output_format=tfrecord", "--num_shards=2", "--outputs=probabilities"], capsys)[0] == 0
    rows = []
    for name in json.loads((tmp_path / "out" / "examples.manifest.json").read_text())["shards"]:
        for record in tf.data.TFRecordDataset(str(tmp_path / "out" / name)).as_numpy_iterator():
            example = tf.train.Example.FromString(record)
            rows.append((example.features.feature["key"].bytes_list.value[0].decode(),
                         list(example.features.feature["probabilities"].float_list.value)))
    assert sorted(key for key, _ in rows) == sorted(f"{records}:{i + 1}" for i in range(len(TEXTS)))
    for key, probabilities in rows:
        expected = alone(loaded, TEXTS[int(key.rsplit(":", 1)[1]) - 1])["probabilities"].numpy()[0]
        np.testing.assert_allclose(probabilities, expected, atol=1e-6, rtol=0)


def test_parquet_rows_in_one_process_and_on_beam(exported, tmp_path, capsys):  # noqa: F811
    """Parquet shards (typed columns: the key a string, probabilities a list of float32) hold the export's answers."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path, loaded = exported
    corpus = tmp_path / "in.txt"
    corpus.write_text("".join(f"{t}\n" for t in TEXTS), encoding="utf-8")
    texts = {f"{corpus}:{i + 1}": t for i, t in enumerate(TEXTS)}
    for mode, extra in (("one", []), ("beam", ["--beam", "--runner=DirectRunner"])):
        prefix = tmp_path / mode / "rows"
        assert tool([f"--input_file={corpus}", f"--saved_model_dir={path}", f"--output_prefix={prefix}",
                     "--output_format=parquet", "--num_shards=2", "--batch_size=3", *extra], capsys)[0] == 0
        manifest = json.loads((tmp_path / mode / "rows.manifest.json").read_text())
        assert manifest["shards"] == ["rows-00000-of-00002.parquet", "rows-00001-of-00002.parquet"]
        tables = [pq.read_table(tmp_path / mode / name) for name in manifest["shards"]]
        assert tables[0].schema.field("probabilities").type == pa.list_(pa.float32())
        assert tables[0].schema.field("key").type == pa.string()
        assert_answers_as_alone([row for table in tables for row in table.to_pylist()], texts, loaded)


def test_the_model_handler_runs_where_keras_bert_impl_cannot_be_imported(exported, tmp_path):  # noqa: F811
    """What Beam sends a worker: the handler pickled as Beam pickles it, unpickled, loaded and run in a
    process where keras_bert_impl (and tests) cannot be imported, as on a worker with TensorFlow and TF Text only."""
    from apache_beam.internal import pickler

    from keras_bert_impl.serving.raw_text_inference import TEXT_SIGNATURE, beam_model_handler

    path, loaded = exported
    (tmp_path / "handler.pickle").write_bytes(pickler.dumps(beam_model_handler(path, TEXT_SIGNATURE, ["probabilities"], 4)))
    code = (
        "import json, sys\n"
        "for name in ('keras_bert_impl', 'tests', 'tools', 'keras_bert_impl_tools'): sys.modules[name] = None\n"
        "sys.path = [p for p in sys.path if p not in ('', '.')]\n"
        "from apache_beam.internal import pickler\n"
        f"handler = pickler.loads(open({str(tmp_path / 'handler.pickle')!r}, 'rb').read())\n"
        "model = handler.load_model()\n"
        "results = list(handler.run_inference([('k1', ('the film is bad', None)), ('k2', ('a film', None))], model))\n"
        "ours = sorted(name for name, module in sys.modules.items() if name.startswith('keras_bert_impl') and module)\n"
        "print(json.dumps({'ours': ours, 'results': [[key, r.inference] for key, r in results]}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=""))
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["ours"] == []
    assert [key for key, _ in answer["results"]] == ["k1", "k2"]
    for (_, row), text in zip(answer["results"], ["the film is bad", "a film"]):
        np.testing.assert_allclose(row["probabilities"], alone(loaded, text)["probabilities"].numpy()[0], atol=1e-5)


def test_a_beam_run_killed_mid_way_is_rerun_with_each_row_once(exported, tmp_path, capsys):  # noqa: F811
    """kill -9 (the whole process group: the runner and its worker process) once Beam has written rows: no
    manifest, nothing final-looking; a shard as a kill during the final renames would leave it (a stale row) is
    added; the rerun (on the DirectRunner in this process), without --overwrite, writes each key exactly once and
    leaves no temporary files. One worker process: what two do side by side is the test above's, and each is a
    TensorFlow start-up (~5 s of CPU)."""
    path, loaded = exported
    corpus = tmp_path / "corpus.txt"
    texts = {f"{corpus}:{i + 1}": f"{TEXTS[i % len(TEXTS)]} {i}" for i in range(400)}
    corpus.write_text("".join(f"{t}\n" for t in texts.values()), encoding="utf-8")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "tools.predict", "--beam", f"--input_file={corpus}", f"--saved_model_dir={path}",
               f"--output_prefix={out / 'rows'}", "--num_shards=2", "--batch_size=4", *ONE_WORKER_PROCESS]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.time() + 300
    while not glob.glob(str(out / "beam-temp-rows*" / "*")):
        assert process.poll() is None and time.time() < deadline, "the run wrote nothing before it ended"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert not (out / "rows.manifest.json").exists()
    stale = out / "rows-00000-of-00002.jsonl"
    stale.write_text(json.dumps({"key": f"{corpus}:1", "probabilities": [0.0, 1.0]}) + "\n", encoding="utf-8")

    rerun = [arg for arg in command[3:] if arg not in ONE_WORKER_PROCESS] + ["--runner=DirectRunner"]
    code, lines = tool(rerun, capsys)
    assert code == 0, lines[-20:]
    assert sorted(os.listdir(out)) == ["rows-00000-of-00002.jsonl", "rows-00001-of-00002.jsonl", "rows.manifest.json"]
    rows = read_rows(out / "rows")
    assert collections.Counter(row["key"] for row in rows) == collections.Counter(texts.keys())
    for row in rows[::37]:
        np.testing.assert_allclose(row["probabilities"], alone(loaded, texts[row["key"]])["probabilities"].numpy()[0],
                                   atol=1e-4, rtol=0)


# -- bad input: one line, naming what is wrong --------------------------------------------------------------


def test_bad_input_is_one_line_naming_file_and_line_and_leaves_no_output(exported, tmp_path, capsys):  # noqa: F811
    path, _ = exported
    bad_utf8, no_column = tmp_path / "bad.txt", tmp_path / "rows.jsonl"
    bad_utf8.write_bytes(b"a film\nthe \xff weather\n")
    no_column.write_text('{"text": "a film"}\n{"review": "bad"}\n', encoding="utf-8")
    records = tmp_path / "no_feature.tfrecord"
    with tf.io.TFRecordWriter(str(records)) as writer:
        writer.write(tf.train.Example().SerializeToString())
    cases = [
        (bad_utf8, [], f"{bad_utf8}:2: not valid UTF-8"),
        (no_column, [], f"{no_column}:2: no column 'text'"),
        (records, [], f"{records}:1: no feature 'text'"),
        (tmp_path / "missing.txt", [], "missing.txt: no such input file"),
        (bad_utf8, ["--beam", "--runner=DirectRunner"], f"{bad_utf8}:2: not valid UTF-8"),  # raised on a worker
    ]
    for number, (input_file, flags, message) in enumerate(cases):
        out = tmp_path / f"out{number}"
        code, lines = tool([f"--input_file={input_file}", f"--saved_model_dir={path}", f"--output_prefix={out / 'p'}",
                            *flags], capsys)
        assert code == 1 and len(lines) == 1 and message in lines[0], lines
        assert not out.exists() or os.listdir(out) == []


def test_an_export_without_a_raw_text_signature_is_refused(exported, tmp_path, capsys):  # noqa: F811
    path, _ = exported
    (tmp_path / "in.txt").write_text("a film\n")
    module = tf.Module()
    module.double = tf.function(lambda x: {"y": 2.0 * x}, input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    tf.saved_model.save(module, str(tmp_path / "other" / "1"), signatures={"serving_default": module.double})
    for saved_model_dir, flags, message in [
        (tmp_path / "other", [], "not an export that takes raw text (text, DT_STRING): its serving_default takes x"),
        (tmp_path / "other" / "1", ["--text_b_column=b"], "it has no serve_text_pair"),
        (tmp_path / "nothing", [], "no saved_model.pb here"),
        (path, ["--outputs=probabilities,logits"], "serving_default has no output logits"),
    ]:
        code, lines = tool([f"--input_file={tmp_path / 'in.txt'}", f"--saved_model_dir={saved_model_dir}",
                            f"--output_prefix={tmp_path / 'out' / 'p'}", *flags], capsys)
        assert code == 1 and len(lines) == 1 and message in lines[0], lines


def test_a_complete_result_is_refused_unless_overwrite(exported, tmp_path, capsys):  # noqa: F811
    path, _ = exported
    (tmp_path / "in.txt").write_text("a film\nthe weather\n")
    argv = [f"--input_file={tmp_path / 'in.txt'}", f"--saved_model_dir={path}", f"--output_prefix={tmp_path / 'out' / 'p'}",
            "--num_shards=1"]
    assert tool(argv, capsys)[0] == 0
    before = {name: (tmp_path / "out" / name).read_bytes() for name in os.listdir(tmp_path / "out")}
    code, lines = tool(argv, capsys)
    assert code == 1 and "p.manifest.json: a complete result is there already; give --overwrite" in lines[0]
    assert {name: (tmp_path / "out" / name).read_bytes() for name in os.listdir(tmp_path / "out")} == before
    (tmp_path / "in.txt").write_text("a film\n")
    assert tool(argv + ["--overwrite"], capsys)[0] == 0
    assert [row["key"] for row in read_rows(tmp_path / "out" / "p")] == [f"{tmp_path / 'in.txt'}:1"]


def test_a_new_run_removes_what_a_killed_one_left_and_nothing_else(tmp_path):
    """Shards of any count and format, their temporary names (one process) and Beam's temporary
    directories of this prefix go; another prefix's files, and the manifest check, stay."""
    from keras_bert_impl.data.pretraining_pipeline import OutputConflictError
    from keras_bert_impl.jobs.predict_corpus import prepare_output

    left = ["rows-00000-of-00002.jsonl", "rows-00001-of-00003.tfrecord.partial-41-0a1b2c3d",
            "rows-00001-of-00002.jsonl.partial-7-deadbeef", "beam-temp-rows-" + "0f" * 16]
    kept = ["rowsy-00000-of-00001.jsonl", "beam-temp-rowsy-" + "0f" * 16, "rows.txt", "notes-00000-of-00001.jsonl"]
    for name in left + kept:
        (tmp_path / name).mkdir() if name.startswith("beam-temp") else (tmp_path / name).write_text("x")
    prepare_output(str(tmp_path / "rows"), overwrite=False)
    assert sorted(os.listdir(tmp_path)) == sorted(kept)
    (tmp_path / "rows.manifest.json").write_text("{}")
    with pytest.raises(OutputConflictError, match="give --overwrite"):
        prepare_output(str(tmp_path / "rows"), overwrite=False)
    prepare_output(str(tmp_path / "rows"), overwrite=True)
    assert sorted(os.listdir(tmp_path)) == sorted(kept)
