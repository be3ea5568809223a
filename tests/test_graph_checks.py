"""`layers.graph_checks`: each check one `Assert` that fails with its message and the ids that fail, eagerly and
traced, for int32 and int64 ids (an int64 id past int32 still fails, shown as int32's extreme)."""

import pytest
import tensorflow as tf

from keras_bert_impl.layers.graph_checks import check, ids_in_range


def checked(ids, size):
    with tf.control_dependencies(ids_in_range(ids, size, "negative id", f"id >= {size}")):
        return tf.identity(ids)


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64])
@pytest.mark.parametrize("traced", [False, True])
@pytest.mark.parametrize("ids, fragment", [
    ([[0, 4], [2, 3]], None),
    ([], None),
    ([[0, -7], [2, 3]], r"negative id\W+ids:\W+-7\]"),
    ([[0, 1], [5, 9]], r"id >= 5\W+ids:\W+5 9\]"),
])
def test_ids_in_range(dtype, traced, ids, fragment):
    function = tf.function(checked, autograph=False) if traced else checked
    ids = tf.constant(ids, dtype)
    if fragment is None:
        assert function(ids, 5).numpy().tolist() == ids.numpy().tolist()
    else:
        with pytest.raises(tf.errors.InvalidArgumentError, match=fragment):
            function(ids, 5)


def test_an_int64_id_past_int32_fails_and_shows_int32s_extreme():
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"^id >= 5 ids: \[2147483647\]$"):
        checked(tf.constant([2**40], tf.int64), 5)


def test_each_check_is_one_assert_on_one_reduction():
    graph = tf.function(lambda ids: checked(ids, 5), autograph=False).get_concrete_function(
        tf.TensorSpec([None, None], tf.int32)).graph
    types = [op.type for op in graph.get_operations()]
    assert types.count("Assert") == 2 and types.count("All") == 2
    assert not {"Min", "Max"} & set(types)  # an int8 graph holds no range reduction (test_int8_smoothing)
    assert "If" not in types and "StatelessIf" not in types  # int32 data: no tf.cond around an Assert
    with pytest.raises(tf.errors.InvalidArgumentError, match="shapes differ"):
        check(tf.constant([True, False]), "shapes differ")
