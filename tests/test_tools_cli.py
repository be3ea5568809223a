"""Every tool answers a wrong flag, a missing file or an unwritable output
directory with one clear stderr line and a non-zero exit, leaving nothing
that looks finished."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(tool, *flags):
    return subprocess.run(
        [sys.executable, os.path.join(REPO, "tools", tool), *flags],
        capture_output=True, text=True, cwd=REPO, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )


@pytest.mark.parametrize(
    "tool, flags, fragment",
    [
        ("demo.py", ["--no_such_flag"], "unrecognized arguments: --no_such_flag"),
        ("prepare_data.py", [], "missing required flag(s): --output_dir"),
        ("prepare_data.py", ["--output_dir=/proc/forbidden/data"], "/proc/forbidden"),
        ("prepare_data.py", ["--output_dir=/tmp/x", "--train_size=0"], "--train_size must be positive"),
        ("tfidf_baseline.py", ["--data_dir=/nonexistent/sentiment"], "/nonexistent/sentiment/train.csv: not found"),
        ("make_figures.py", ["--curves_png=/tmp/c.png"], "missing required flag(s): --event_dirs"),
        ("make_figures.py", ["--event_dirs=/nonexistent/run", "--curves_png=/tmp/never.png"], "no scalar summaries found under /nonexistent/run"),
        ("convert_hf_checkpoint.py", ["--hf_model_dir=/nonexistent/hf", "--output_dir=/tmp/never"], "/nonexistent/hf/config.json: config file not found"),
        ("export_saved_model.py", ["--task=classifier"], "missing required flag(s)"),
        ("run_pretraining.py", ["--bert_config_file=x", "--input_file=y", "--output_dir=z"], "at least one of --do_train or --do_eval"),
    ],
)
def test_one_line_errors(tool, flags, fragment):
    result = run(tool, *flags)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0]
    assert not os.path.exists("/tmp/never.png") and not os.path.exists("/tmp/never")
