"""Token tagging (NER) on CoNLL-2003-format files.

The `token_tagging` task spec, its serving outputs (a label per word piece),
and `run_ner`, the job behind `tools/run_ner.py`. A word's label is trained
and predicted on its first word piece; the other pieces are ignored by the
loss. Sentences longer than `max_seq_length` are split into windows at word
boundaries, so every word is predicted.

Example:
>>> TOKEN_TAGGING.head_variables
('output_weights', 'output_bias')
"""


from keras_bert_impl import filesystem
from keras_bert_impl.checkpoints.name_map import TOKEN_CLASSIFIER_VARIABLES
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import format_results, write_text_atomically
from keras_bert_impl.tasks.spec import TaskSpec
from keras_bert_impl.training.fine_tuning import (
    LABEL_LIST_FILE,
    FineTuningSettings,
    build_in_strategy,
    check_labels,
    compute_on_real_tokens,
    fit_for_steps,
    load_fine_tuned,
    load_initial_weights,
    on_real_tokens,
    predict_batches,
    read_release,
    recorded_labels,
    run_settings,
    save_release,
    training_steps,
    write_label_list,
)

_INPUTS = ("input_ids", "input_mask", "segment_ids")


def _build_tagger(config, num_labels, dtype=None):
    from keras_bert_impl.models.token_classifier import BertTokenClassifier

    return BertTokenClassifier(config, num_labels=num_labels, dtype=dtype)


def token_tagging_serving_outputs(serving, inputs, padded_length):
    """`probabilities` [batch, padded_length, num_labels], `label_ids` and
    `labels` [batch, padded_length]: 0, -1 and "" at every padding position
    of the row, so a row's answer does not depend on the rest of its batch."""
    import tensorflow as tf

    logits = tf.cast(serving.forward(inputs), tf.float32)  # [batch, seq, num_labels]
    real = inputs["input_mask"] > 0  # [batch, seq]
    probabilities = tf.where(real[:, :, None], tf.nn.softmax(logits, axis=-1), 0.0)
    label_ids = tf.where(real, tf.argmax(logits, axis=-1, output_type=tf.int32), -1)  # [batch, seq]
    labels = tf.where(real, serving.labels_table.lookup(tf.cast(tf.maximum(label_ids, 0), tf.int64)), "")
    extra = padded_length - tf.shape(label_ids)[1]
    outputs = {
        "probabilities": tf.pad(probabilities, [[0, 0], [0, extra], [0, 0]]),
        "label_ids": tf.pad(label_ids, [[0, 0], [0, extra]], constant_values=-1),
        "labels": tf.pad(labels, [[0, 0], [0, extra]], constant_values=""),
    }
    if isinstance(padded_length, int):  # a signature with a fixed length says so
        outputs = {name: tf.ensure_shape(value, [None, padded_length] + value.shape.as_list()[2:])
                   for name, value in outputs.items()}
    return outputs


TOKEN_TAGGING = TaskSpec(
    name="token_tagging",
    description="Token tagging (NER): a label for every word piece.",
    build_model=_build_tagger,
    head_variables=tuple(TOKEN_CLASSIFIER_VARIABLES),
    serving_outputs=token_tagging_serving_outputs,
    uses_labels=True,
)


def resolve_labels(labels, train_sentences, output_dir, init_checkpoint, dataset_labels=None):
    """The label list: `labels`, else the training data's, else the
    weights' `label_list.txt` (`recorded_labels`), else `dataset_labels`;
    checked against the weights' list (another order swaps the classes).

    The training data's labels are `dataset_labels` (a TFDS `ClassLabel`'s
    names) when given, else the train file's ("O" first, then sorted).
    """
    from keras_bert_impl.data.conll import label_list

    recorded, path = recorded_labels(output_dir, init_checkpoint, training=train_sentences is not None)
    if labels is not None:
        resolved = list(labels)
    elif train_sentences is not None:
        resolved = list(dataset_labels) if dataset_labels else label_list(train_sentences)
    elif recorded is not None:
        return recorded
    elif dataset_labels:
        resolved = list(dataset_labels)
    else:
        raise InputFileError(
            f"no label list: pass --labels, or train first (which writes {LABEL_LIST_FILE} to --output_dir)"
        )
    check_labels(resolved, recorded, path)
    return resolved


def encode(sentences, tokenizer, max_seq_length, label_map, path, log):
    """`(features, arrays)`: the windows and their int32 arrays (inputs, label ids, weights)."""
    import numpy as np

    from keras_bert_impl.data.conll import convert_sentences_to_features

    features, counts = convert_sentences_to_features(sentences, tokenizer, max_seq_length, label_map, path)
    notes = [
        f"{counts.split_sentences} sentences split into windows" if counts.split_sentences else "",
        f"{counts.empty_words} words without word pieces read as [UNK]" if counts.empty_words else "",
        f"{counts.cut_words} words cut to {max_seq_length - 2} pieces" if counts.cut_words else "",
    ]
    log(f"{path}: {len(sentences)} sentences, {counts.windows} windows" + "".join(f"; {n}" for n in notes if n))
    arrays = {
        key: np.array([getattr(f, key) for f in features], np.int32).reshape(len(features), max_seq_length)
        for key in (*_INPUTS, "label_ids", "label_weights")
    }
    return features, arrays


def fine_tune(model, arrays, settings, output_dir, train_file, log):
    """`model.fit` with the original optimizer; returns the global step."""
    import keras
    import tensorflow as tf

    from keras_bert_impl.models.token_classifier import token_classification_loss
    from keras_bert_impl.training.optimization import create_optimizer

    num_windows = len(arrays["input_ids"])
    batch_size = settings.train_batch_size
    num_train_steps, num_warmup_steps = training_steps(
        num_windows, batch_size, settings.num_train_epochs, settings.warmup_proportion
    )
    if num_train_steps < 1:
        raise InputFileError(
            f"{train_file}: {num_windows} windows with --train_batch_size={batch_size} "
            f"and --num_train_epochs={settings.num_train_epochs} make 0 training steps"
        )
    log(f"training: {num_train_steps} steps of {batch_size} ({num_warmup_steps} warmup)")
    with model.distribute_strategy.scope():
        model.compile(
            optimizer=create_optimizer(settings.learning_rate, num_train_steps, num_warmup_steps),
            loss=token_classification_loss(),
            weighted_metrics=[keras.metrics.SparseCategoricalAccuracy("accuracy")],
        )
    dataset = (
        tf.data.Dataset.from_tensor_slices(
            ({key: arrays[key] for key in _INPUTS}, arrays["label_ids"], arrays["label_weights"])
        )
        .shuffle(num_windows, seed=settings.seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(batch_size, drop_remainder=True)
    )
    dataset = on_real_tokens(dataset, settings, arrays["input_mask"].shape[1]).prefetch(tf.data.AUTOTUNE)
    return fit_for_steps(
        model, dataset, num_train_steps, settings.num_train_epochs, output_dir, settings.save_checkpoints_steps, log,
        settings=run_settings(
            settings, num_train_steps, num_warmup_steps, num_windows, arrays["input_mask"].shape[1],
            train_data=arrays,
        ),
        allow_changed_settings=settings.allow_changed_settings,
    )


def predict_labels(model, features, arrays, sentences, labels, batch_size, settings=FineTuningSettings(), log=print):
    """`(word_labels, logits)`: predicted labels per sentence and word, and the logits
    [windows, max_seq_length, num_labels] (zeros after each batch's cut, see `predict_batches`)."""
    from keras_bert_impl.data.conll import word_label_ids

    logits = predict_batches(model, {key: arrays[key] for key in _INPUTS}, batch_size, settings, log, "windows")
    word_ids = word_label_ids(features, logits.argmax(axis=-1), sentences)
    return [[labels[i] for i in ids] for ids in word_ids], logits


def weighted_loss(logits, label_ids, label_weights):
    """Mean cross-entropy over the labelled pieces (NumPy, float64)."""
    from keras_bert_impl.probabilities import per_example_cross_entropy

    losses = per_example_cross_entropy(logits, label_ids)
    return float((losses * label_weights).sum() / max(label_weights.sum(), 1))


def run_ner(
    output_dir, bert_config_file, vocab_file, init_checkpoint=None, do_lower_case=True, train_file=None,
    eval_file=None, predict_file=None, do_train=False, do_eval=False, do_predict=False, max_seq_length=128,
    eval_batch_size=8, predict_batch_size=8, labels=None, settings=FineTuningSettings(), log=print,
    tfds_name=None, data_dir=None, train_split="train", eval_split="dev", predict_split="test",
):
    """Fine-tunes, evaluates and predicts token tagging, as `tools/run_ner.py`.

    Writes to `output_dir`: `eval_results.txt` (entity-level precision,
    recall, f1 per type and overall, word accuracy, `eval_loss`,
    `global_step`), `eval_predictions.txt` / `test_predictions.txt` (every
    word line with the predicted label appended), and after training
    `model.ckpt`, the config, vocab and `label_list.txt`.

    The sentences come from `train_file`/`eval_file`/`predict_file`, or
    with `tfds_name` (`conll2003`) from the splits `train_split`,
    `eval_split`, `predict_split` of that TFDS dataset prepared in
    `data_dir` (never downloaded), whose `ClassLabel` names are then the
    label list unless `labels` or a checkpoint's `label_list.txt` say
    otherwise.

    Returns:
        The evaluation results (`{}` without `do_eval`).
    """
    from keras_bert_impl.data.conll import (
        entity_scores,
        format_predictions,
        read_conll,
        read_tfds_conll,
        tfds_label_names,
    )
    from keras_bert_impl.data.tfds_inputs import split_source

    # Everything about the input is checked before TensorFlow starts.
    release = read_release(bert_config_file, vocab_file, do_lower_case, init_checkpoint, max_seq_length)
    paths = {"train": train_file, "eval": eval_file, "predict": predict_file}
    tfds_splits = {"train": train_split, "eval": eval_split, "predict": predict_split}
    data = {}
    for split, wanted in (("train", do_train), ("eval", do_eval), ("predict", do_predict)):
        if wanted and tfds_name:
            paths[split] = split_source(tfds_name, tfds_splits[split])
            data[split] = read_tfds_conll(tfds_name, data_dir, tfds_splits[split])
        elif wanted:
            data[split] = read_conll(paths[split], require_labels=split != "predict")
    dataset_labels = tfds_label_names(tfds_name, data_dir) if tfds_name else None
    labels = resolve_labels(labels, data.get("train"), output_dir, init_checkpoint, dataset_labels)
    label_map = {label: index for index, label in enumerate(labels)}
    # A predict file's last column is not read as labels (it may be POS tags, or absent).
    encoded = {
        split: encode(sentences, release.tokenizer, max_seq_length, None if split == "predict" else label_map,
                      paths[split], log)
        for split, sentences in data.items()
    }

    batch_sizes = {
        flag: size for flag, size, used in (
            ("train_batch_size", settings.train_batch_size, do_train),
            ("eval_batch_size", eval_batch_size, do_eval),
            ("predict_batch_size", predict_batch_size, do_predict),
        ) if used
    }
    filesystem.makedirs(output_dir)
    model, _ = build_in_strategy(
        lambda: TOKEN_TAGGING.build_model(release.config, len(labels)), settings.strategy, settings.tpu_name,
        settings.seed, batch_sizes,
    )
    compute_on_real_tokens(model, settings)
    if do_train:
        load_initial_weights(model, init_checkpoint, TOKEN_TAGGING.head_variables, log)
        global_step = fine_tune(model, encoded["train"][1], settings, output_dir, paths["train"], log)
        write_label_list(output_dir, labels)  # Before the release: what its class ids mean.
        save_release(model, output_dir, bert_config_file, vocab_file, global_step, log)
    else:
        global_step = load_fine_tuned(model, output_dir, init_checkpoint, TOKEN_TAGGING.head_variables, "tagging", log)

    result = {}
    if do_eval:
        features, arrays = encoded["eval"]
        sentences = data["eval"]
        predicted, logits = predict_labels(
            model, features, arrays, sentences, labels, eval_batch_size, settings, log
        )
        result = entity_scores([s.labels for s in sentences], predicted)
        result["eval_loss"] = weighted_loss(logits, arrays["label_ids"], arrays["label_weights"])
        result["global_step"] = global_step
        write_text_atomically(filesystem.join(output_dir, "eval_results.txt"), format_results(result))
        write_text_atomically(
            filesystem.join(output_dir, "eval_predictions.txt"), format_predictions(sentences, predicted)
        )
        log(f"eval on {len(sentences)} sentences: precision {result['precision']:.4f}, "
            f"recall {result['recall']:.4f}, f1 {result['f1']:.4f}")
    if do_predict:
        features, arrays = encoded["predict"]
        sentences = data["predict"]
        predicted, _ = predict_labels(
            model, features, arrays, sentences, labels, predict_batch_size, settings, log
        )
        path = filesystem.join(output_dir, "test_predictions.txt")
        write_text_atomically(path, format_predictions(sentences, predicted))
        log(f"wrote predictions for {len(sentences)} sentences to {path}")
    return result
