"""The Beam pipeline (DirectRunner) writes the very shards of the local sharded mode.

apache-beam is in the test environment (`make test` installs the `[beam]`
extra), so these tests run everywhere the suite runs; a missing Beam is a
failure here, not a skip.
"""

import dataclasses
import json
import os

import apache_beam  # noqa: F401  (imported here so that a missing [beam] extra fails at collection)
import pytest

from keras_bert_impl.data.beam_pipeline import run_beam_pipeline
from keras_bert_impl.data.pretraining_instances import InstanceOptions
from keras_bert_impl.data.pretraining_pipeline import GenerationSettings, OutputConflictError, write_sharded
from keras_bert_impl.tokenization import load_vocab
from tests.test_pretraining_data import news_files  # noqa: F401  (fixture)
from tools import create_pretraining_data

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MULTI_PROCESS = ["--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def test_beam_writes_the_local_shards(news_files, bert_vocab_file, tmp_path):  # noqa: F811
    settings = GenerationSettings(
        vocab=load_vocab(bert_vocab_file), vocab_file=str(bert_vocab_file), do_lower_case=True,
        options=InstanceOptions(dupe_factor=2, do_whole_word_mask=True), random_seed=5, compression="GZIP",
    )
    local, local_paths, _ = write_sharded(news_files, str(tmp_path / "local" / "data"), settings, 3, chunk_bytes=20_000)
    beam, beam_paths = run_beam_pipeline(
        ",".join(news_files), str(tmp_path / "beam" / "data"), settings, 3, chunk_bytes=20_000,
        pipeline_args=["--runner=DirectRunner"],
    )
    assert beam == local and local.instances > 100
    for a, b in zip(local_paths, beam_paths):
        assert read_bytes(a) == read_bytes(b)
    manifest = json.loads((tmp_path / "beam" / "data.manifest.json").read_text())
    assert sorted(manifest["shards"]) == [os.path.basename(p) for p in beam_paths]
    assert not [name for name in os.listdir(tmp_path / "beam") if "partial" in name]
    # The same manifest as the local mode's, so either mode resumes the other's
    # output (the Beam one recorded no input mtimes, and each refused the other).
    assert manifest == json.loads((tmp_path / "local" / "data.manifest.json").read_text())
    assert write_sharded(news_files, str(tmp_path / "beam" / "data"), settings, 3, chunk_bytes=20_000)[2] == 3
    # A rerun with another --num_shards or other settings is refused before
    # anything is written: the finished output and its manifest stay as they are.
    before = {name: read_bytes(tmp_path / "beam" / name) for name in os.listdir(tmp_path / "beam")}
    for other_settings, other_shards, message in ((settings, 2, "another --num_shards"),
                                                  (dataclasses.replace(settings, random_seed=6), 3, "other settings")):
        with pytest.raises(OutputConflictError, match=message):
            run_beam_pipeline(",".join(news_files), str(tmp_path / "beam" / "data"), other_settings, other_shards,
                              chunk_bytes=20_000, pipeline_args=["--runner=DirectRunner"])
    assert {name: read_bytes(tmp_path / "beam" / name) for name in os.listdir(tmp_path / "beam")} == before


def test_tool_beam_on_worker_processes_writes_the_scalable_shards(
    news_files, bert_vocab_file, tmp_path, capsys, monkeypatch  # noqa: F811
):
    """`--beam` with the DirectRunner's two worker processes (options the tool
    does not know, handed to Beam) against `--scalable` with the same seed and
    layout: the same files, byte for byte, and the same manifest entries."""
    # The worker processes start a fresh Python and unpickle the DoFn there:
    # they import this checkout, whatever copy the environment has installed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    common = [
        f"--input_file={','.join(news_files)}", f"--vocab_file={bert_vocab_file}", "--random_seed=7",
        "--dupe_factor=2", "--do_whole_word_mask", "--gzip_compress", "--num_shards=3", "--chunk_mb=0.02",
    ]
    scalable, beam = tmp_path / "scalable", tmp_path / "beam"
    create_pretraining_data.main(common + [f"--output_file={scalable / 'data'}", "--scalable", "--num_workers=2"])
    create_pretraining_data.main(common + [f"--output_file={beam / 'data'}", "--beam", *MULTI_PROCESS])
    assert capsys.readouterr().err.count("wrote 3 file(s)") == 2
    names = [f"data-0000{i}-of-00003" for i in range(3)]
    assert sorted(os.listdir(beam)) == names + ["data.manifest.json"]
    for name in names:
        assert read_bytes(beam / name) == read_bytes(scalable / name)
    scalable_manifest, beam_manifest = (json.loads((d / "data.manifest.json").read_text()) for d in (scalable, beam))
    assert beam_manifest["shards"] == scalable_manifest["shards"]
    assert sum(shard["stats"]["instances"] for shard in beam_manifest["shards"].values()) > 100


def test_beam_on_blank_input_is_refused_as_the_local_mode(bert_vocab_file, tmp_path):
    """Was: exit 0 with empty shards and a manifest."""
    from keras_bert_impl.errors import InputFileError

    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n   \n\n")
    settings = GenerationSettings(vocab=load_vocab(bert_vocab_file), vocab_file=str(bert_vocab_file),
                                  do_lower_case=True, options=InstanceOptions())
    with pytest.raises(InputFileError, match="no text to make instances of"):
        run_beam_pipeline(str(blank), str(tmp_path / "out" / "data"), settings, 2, pipeline_args=["--runner=DirectRunner"])
    assert not os.path.exists(tmp_path / "out") or os.listdir(tmp_path / "out") == []
