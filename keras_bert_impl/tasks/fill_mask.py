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

    # Dense ops only: the `max_masks` smallest of each row's mask positions, every other column standing at
    # `seq` (past the row), with `max_masks` more such columns for rows of fewer masks. (Was: ragged masks and
    # a ragged comparison, ~540 graph nodes to trace and optimize in each fill-mask signature; this is ~40.)
    is_mask = tf.equal(input_ids, mask_id)
    seq = tf.shape(input_ids)[1]
    past = tf.cast(seq, tf.float32)  # positions are exact in float32 (below 2**24), which top_k takes anywhere
    candidates = tf.where(is_mask, tf.cast(tf.range(seq), tf.float32)[None, :], past)
    candidates = tf.concat([candidates, tf.fill([tf.shape(input_ids)[0], max_masks], past)], axis=1)
    smallest = -tf.math.top_k(-candidates, k=max_masks, sorted=True).values  # ascending
    positions = tf.where(smallest < past, tf.cast(smallest, tf.int32), 0)
    count = tf.minimum(tf.reduce_sum(tf.cast(is_mask, tf.int32), axis=1), max_masks)
    return positions, count


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
