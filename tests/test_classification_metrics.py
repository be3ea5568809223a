"""keras_bert_impl/data/classification_metrics.py: GLUE's metrics against
scikit-learn and SciPy."""

import numpy as np
import pytest

from keras_bert_impl.data.classification_metrics import (
    accuracy,
    average_ranks,
    f1_score,
    matthews_correlation,
    pearson_correlation,
    spearman_correlation,
)


@pytest.mark.parametrize("seed, size, classes", [(0, 50, 2), (1, 200, 2), (2, 120, 3), (3, 7, 2)])
def test_classification_metrics_match_sklearn(seed, size, classes):
    from sklearn import metrics

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size)
    predictions = np.where(rng.random(size) < 0.7, labels, rng.integers(0, classes, size))
    assert accuracy(labels, predictions) == pytest.approx(metrics.accuracy_score(labels, predictions), abs=1e-12)
    assert matthews_correlation(labels, predictions) == pytest.approx(metrics.matthews_corrcoef(labels, predictions), abs=1e-12)
    if classes == 2:
        assert f1_score(labels, predictions) == pytest.approx(metrics.f1_score(labels, predictions), abs=1e-12)


def test_degenerate_classification_metrics_match_sklearn():
    from sklearn import metrics

    labels, constant = np.array([0, 1, 1, 0, 1]), np.zeros(5, int)
    assert matthews_correlation(labels, constant) == metrics.matthews_corrcoef(labels, constant) == 0.0
    assert f1_score(labels, constant) == metrics.f1_score(labels, constant, zero_division=0) == 0.0
    assert f1_score(constant, constant) == metrics.f1_score(constant, constant, zero_division=0) == 0.0


@pytest.mark.parametrize("seed, size, ties", [(0, 40, False), (1, 300, True), (2, 9, True)])
def test_correlations_match_scipy(seed, size, ties):
    from scipy import stats

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, size).astype(float) if ties else rng.normal(size=size)
    y = x + rng.normal(scale=2.0, size=size)
    if ties:
        y = np.round(y)
    assert pearson_correlation(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert spearman_correlation(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    assert average_ranks(x).tolist() == stats.rankdata(x).tolist()
