"""The Beam pipeline (DirectRunner) writes the very shards of the local sharded mode."""

import json
import os

import pytest

pytest.importorskip(
    "apache_beam",
    reason="apache-beam is not installed (pip install -e '.[beam]'; it pins protobuf < 7, see README)",
)

from keras_bert_impl.data.beam_pipeline import run_beam_pipeline  # noqa: E402
from keras_bert_impl.data.pretraining_instances import InstanceOptions  # noqa: E402
from keras_bert_impl.data.pretraining_pipeline import GenerationSettings, write_sharded  # noqa: E402
from keras_bert_impl.tokenization import load_vocab  # noqa: E402
from tests.test_pretraining_data import news_files  # noqa: E402, F401  (fixture)
from tools import create_pretraining_data  # noqa: E402


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
        assert open(a, "rb").read() == open(b, "rb").read()
    manifest = json.loads((tmp_path / "beam" / "data.manifest.json").read_text())
    assert sorted(manifest["shards"]) == [os.path.basename(p) for p in beam_paths]
    assert not [name for name in os.listdir(tmp_path / "beam") if "partial" in name]


def test_tool_passes_pipeline_options_to_beam(news_files, bert_vocab_file, tmp_path, capsys):  # noqa: F811
    create_pretraining_data.main([
        f"--input_file={news_files[0]}", f"--output_file={tmp_path / 'data'}", f"--vocab_file={bert_vocab_file}",
        "--beam", "--num_shards=2", "--dupe_factor=1", "--runner=DirectRunner", "--direct_num_workers=1",
    ])
    assert "wrote 2 file(s)" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["data-00000-of-00002", "data-00001-of-00002", "data.manifest.json"]
