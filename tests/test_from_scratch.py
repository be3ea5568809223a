"""A BERT from scratch at tiny scale, as docs/VOCABULARY.md's recipe runs it:
real news -> bert-build-vocab -> bert-create-pretraining-data -> bert-run-pretraining
from random weights (no --init_checkpoint); the masked-LM loss falls and its
accuracy rises from the untrained model's none; then fine-tuning starts from it."""

import shutil

import numpy as np
import pytest

from keras_bert_impl.checkpoints.pip_assets import NEWS_ARTICLES
from keras_bert_impl.data.real_corpora import write_news_pretraining_text
from keras_bert_impl.jobs.build_vocab import build_vocab
from keras_bert_impl.jobs.create_pretraining_data import create_pretraining_data
from keras_bert_impl.jobs.run_pretraining import run_pretraining
from keras_bert_impl.tasks.text_classifier import TextClassifier
from tests.assets import fetch_or_skip
from tests.helpers import tiny_config

SEQ, PREDICTIONS = 32, 5


def test_pretraining_from_scratch_with_a_learned_vocab(tmp_path):
    corpus = tmp_path / "news.txt"
    write_news_pretraining_text(fetch_or_skip(NEWS_ARTICLES) / "NewsArticles.zip", corpus, max_documents=150)
    vocab_file = tmp_path / "vocab.txt"
    stats = build_vocab(str(corpus), str(vocab_file), vocab_size=1000, num_unused=0, verbose=False)
    records = tmp_path / "train.tfrecord"
    create_pretraining_data(str(corpus), str(records), str(vocab_file), max_seq_length=SEQ,
                            max_predictions_per_seq=PREDICTIONS, dupe_factor=1, verbose=False)
    # One layer: what 150 steps learn here is which words are frequent (the same loss and accuracy as 2 layers).
    config = tiny_config(vocab_size=stats.tokens, num_hidden_layers=1, hidden_size=32, intermediate_size=64,
                         max_position_embeddings=SEQ, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config.to_json_file(tmp_path / "bert_config.json")
    common = dict(bert_config_file=str(tmp_path / "bert_config.json"), input_file=str(records),
                  max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, eval_batch_size=32, max_eval_steps=4,
                  seed=7)

    untrained = run_pretraining(output_dir=str(tmp_path / "untrained"), do_eval=True, **common)
    trained = run_pretraining(output_dir=str(tmp_path / "trained"), do_train=True, do_eval=True, train_batch_size=32,
                              learning_rate=2e-3, num_train_steps=150, num_warmup_steps=15,
                              save_checkpoints_steps=150, summary_steps=50, **common)

    assert untrained["global_step"] == 0 and trained["global_step"] == 150
    # Untrained: log(1000) = 6.91 and no hit; 150 steps of a 1-layer, 32-wide model learn what words are
    # frequent (measured with seeds 7, 8, 9: loss 6.04, accuracy 0.033; 2 layers: 6.06, 0.033), not yet much of
    # their context.
    assert untrained["masked_lm_loss"] == pytest.approx(6.91, abs=0.1) and untrained["masked_lm_accuracy"] < 0.01
    assert trained["masked_lm_loss"] < untrained["masked_lm_loss"] - 0.6
    assert trained["masked_lm_accuracy"] > 0.02

    # Fine-tuning from the run's directory as from any release: its latest checkpoint, the learned vocabulary.
    shutil.copy(vocab_file, tmp_path / "trained" / "vocab.txt")
    shutil.copy(tmp_path / "bert_config.json", tmp_path / "trained" / "bert_config.json")
    classifier = TextClassifier.from_release(tmp_path / "trained", num_classes=2, max_seq_length=SEQ, seed=3)
    report = classifier.load_report
    assert not report.unexpected or all(name.startswith("cls/") for name in report.unexpected), report.unexpected
    assert report.fresh and all(name.startswith(("output_", "bert/pooler")) for name in report.fresh), report.fresh
    sentences = [line for line in corpus.read_text().splitlines() if len(line.split()) >= 4][:64]
    labels = [int(any(ch.isdigit() for ch in line)) for line in sentences]  # a rule the words show
    classifier.compile()
    history = classifier.fit(sentences, labels, batch_size=16, epochs=3, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert history.history["loss"][-1] < history.history["loss"][0]
