"""Fill-mask: the top-k tokens for each `[MASK]`, from the `cls/predictions` head.

The SavedModel reads "[MASK]" written in a request as the mask token and
returns, for the first `max_masks` masks of each text, the `top_k` most
probable word pieces with their probabilities.

Example:
>>> FILL_MASK.masks_in_text, FILL_MASK.required_tokens[-1]
(True, '[MASK]')
"""

from keras_bert_impl.checkpoints.name_map import MASKED_LM_VARIABLES
from keras_bert_impl.tasks.pretraining import PRETRAINING
from keras_bert_impl.tasks.spec import EXPORTED_TASKS, TaskSpec


def mask_positions(input_ids, mask_id, max_masks):
    """`(positions, count)`: where the first `max_masks` masks of each row are.

    Args:
        input_ids: int32 [batch, seq].
        mask_id: The id of `[MASK]`.
        max_masks: Positions kept per row.

    Returns:
        `positions` int32 [batch, max_masks] (0 after the last mask) and
        `count` int32 [batch].
    """
    import tensorflow as tf

    is_mask = tf.equal(input_ids, mask_id)
    positions = tf.ragged.boolean_mask(tf.broadcast_to(tf.range(tf.shape(is_mask)[1]), tf.shape(is_mask)), is_mask)
    count = tf.minimum(tf.cast(positions.row_lengths(), tf.int32), max_masks)
    kept = tf.ragged.range(positions.row_lengths()) < tf.cast(count, tf.int64)[:, None]
    return tf.ragged.boolean_mask(positions, kept).to_tensor(0, shape=[None, max_masks]), count


def fill_mask_serving_outputs(serving, inputs, padded_length):
    """`mask_count` [batch]; `top_k_ids`, `top_k_tokens`, `top_k_scores` [batch, max_masks, top_k]."""
    import tensorflow as tf

    positions, mask_count = mask_positions(inputs["input_ids"], serving.mask_id, serving.max_masks)
    outputs = serving.forward({**inputs, "masked_lm_positions": positions})
    probabilities = tf.nn.softmax(tf.cast(outputs["masked_lm_logits"], tf.float32), axis=-1)
    scores, token_ids = tf.math.top_k(probabilities, k=serving.top_k)  # [batch, max_masks, k]
    valid = tf.sequence_mask(mask_count, serving.max_masks)[:, :, None]
    return {
        "mask_count": mask_count,
        "top_k_ids": tf.where(valid, token_ids, -1),
        "top_k_tokens": tf.where(valid, tf.gather(serving.id_to_token, token_ids), ""),
        "top_k_scores": tf.where(valid, scores, 0.0),
    }


FILL_MASK = TaskSpec(
    name="fill_mask",
    description=EXPORTED_TASKS["fill_mask"],
    build_model=PRETRAINING.build_model,
    head_variables=tuple(MASKED_LM_VARIABLES),
    export_optional=("cls/seq_relationship/",),
    serving_outputs=fill_mask_serving_outputs,
    masks_in_text=True,
)
