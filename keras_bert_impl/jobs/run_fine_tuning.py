"""The fine-tuning job behind every fine-tuning tool (`run_classifier`,
`run_squad`, `run_ner`): the original scripts' `main`, written once.

A task supplies a `tasks.spec.FineTuningSpec` (how its data become features,
its loss and metrics, what evaluation and prediction write); the run's shared
options are a `training.fine_tuning.FineTuningRun`. The skeleton:

1. read and check the release and every input (before TensorFlow starts);
2. build the task model in the distribution strategy;
3. with `do_train`: load the release, fine-tune to the original's step count
   (resuming after an interruption), write the label list and the
   fine-tuned release; otherwise load fine-tuned weights;
4. with `do_eval` / `do_predict`: the task's evaluation and prediction files.

Example:
>>> from keras_bert_impl.tasks.registry import get_fine_tuning
>>> get_fine_tuning("squad").head_description
'SQuAD'
"""

from keras_bert_impl import filesystem
from keras_bert_impl.errors import VocabError
from keras_bert_impl.io import exclusive_output
from keras_bert_impl.training.fine_tuning import (
    build_in_strategy,
    compute_on_real_tokens,
    fine_tune,
    load_fine_tuned,
    read_release,
    save_release,
    write_label_list,
)


def run_fine_tuning(spec, run, log=print):
    """Fine-tunes, evaluates and predicts one task, as the original scripts do.

    Writes to `run.output_dir`: after training, `model.ckpt` with copies of
    the config and vocab (a release, with `label_list.txt` for a task with
    labels), `model.ckpt-<step>` training checkpoints, the recorded
    training settings and TensorBoard logs; then what the spec's
    `evaluate` and `predict` write.

    Args:
        spec: The task's `FineTuningSpec` (its data and options).
        run: `FineTuningRun`: the release, what to run, batch sizes, training settings.
        log: `log(message)` for progress.

    Returns:
        The evaluation results (`{}` when nothing was evaluated).

    Raises:
        BertError: bad input, named before any output is written where it can be.
        OutputPathError: another run is writing to `run.output_dir`.
        TrainingDivergedError: the loss or weights became NaN or infinite
            (the checkpoints before are kept; no release is written).
    """
    release = read_release(run.bert_config_file, run.vocab_file, run.do_lower_case, run.init_checkpoint,
                           run.max_seq_length)
    if not spec.variant_tokenizers and hasattr(release.tokenizer, "special_tokens"):
        raise VocabError(f"{run.vocab_file}: {spec.name} makes its features with WordPiece (vocab.txt: BERT, "
                         "DistilBERT); this release's byte-level BPE or SentencePiece tokenizer is not supported")
    inputs = spec.read_inputs(release, run, log)
    # One run at a time per output directory: a second would train over the
    # first one's checkpoints and replace its release.
    with exclusive_output(run.output_dir):
        filesystem.makedirs(run.output_dir)
        model, global_step = _fine_tuned_model(spec, run, release, inputs, log)
        result = {}
        if run.do_eval:
            result.update(spec.evaluate(model, inputs, release, global_step, run, log))
        if run.do_predict:
            result.update(spec.predict(model, inputs, release, global_step, run, log))
    return result


def _fine_tuned_model(spec, run, release, inputs, log):
    """`(model, global_step)`: the task model trained now, or loaded fine-tuned."""
    settings = run.training
    model, _ = build_in_strategy(
        lambda: inputs.model_spec.build_model(spec.model_config(release), inputs.num_labels), settings.strategy,
        settings.tpu_name, settings.seed, run.batch_sizes(),
    )
    compute_on_real_tokens(model, settings, enabled=spec.computes_on_real_tokens)
    if not run.do_train:
        return model, load_fine_tuned(model, run.output_dir, run.init_checkpoint, inputs.model_spec.head_variables,
                                      spec.head_description, log)
    spec.initialise(model, inputs, release, run, log)
    data = spec.training_data(inputs, release, run, log)
    with model.distribute_strategy.scope():
        trainer = spec.training_model(model, inputs)
    global_step = fine_tune(
        trainer, data, lambda: spec.compile_options(inputs), settings, run.output_dir,
        cut_padding=spec.computes_on_real_tokens, log=log, task_settings=spec.run_settings(release),
    )
    if inputs.labels is not None:  # Before the release: what its class ids mean.
        write_label_list(run.output_dir, inputs.labels)
    spec.release_files(run.output_dir, inputs, run)  # Before the release too: how it reads its inputs.
    save_release(model, run.output_dir, run.bert_config_file, run.vocab_file, global_step, log)
    return model, global_step
