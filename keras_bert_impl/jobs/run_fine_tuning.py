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
from keras_bert_impl.training.fine_tuning import (
    build_in_strategy,
    compute_on_real_tokens,
    fine_tune,
    load_fine_tuned,
    load_initial_weights,
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
    """
    release = read_release(run.bert_config_file, run.vocab_file, run.do_lower_case, run.init_checkpoint,
                           run.max_seq_length)
    inputs = spec.read_inputs(release, run, log)

    settings = run.training
    filesystem.makedirs(run.output_dir)
    model, _ = build_in_strategy(
        lambda: inputs.model_spec.build_model(release.config, inputs.num_labels), settings.strategy,
        settings.tpu_name, settings.seed, run.batch_sizes(),
    )
    compute_on_real_tokens(model, settings, enabled=spec.computes_on_real_tokens)
    head = inputs.model_spec.head_variables
    if run.do_train:
        load_initial_weights(model, run.init_checkpoint, head, log)
        global_step = fine_tune(
            model, spec.training_data(inputs, release, run, log), lambda: spec.compile_options(inputs), settings,
            run.output_dir, cut_padding=spec.computes_on_real_tokens, log=log,
        )
        if inputs.labels is not None:  # Before the release: what its class ids mean.
            write_label_list(run.output_dir, inputs.labels)
        save_release(model, run.output_dir, run.bert_config_file, run.vocab_file, global_step, log)
    else:
        global_step = load_fine_tuned(model, run.output_dir, run.init_checkpoint, head, spec.head_description, log)

    result = {}
    if run.do_eval:
        result.update(spec.evaluate(model, inputs, release, global_step, run, log))
    if run.do_predict:
        result.update(spec.predict(model, inputs, release, global_step, run, log))
    return result
