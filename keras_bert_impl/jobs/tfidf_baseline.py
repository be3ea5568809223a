"""TF-IDF (word 1-2 grams) + logistic regression on a csv text/label task: the
baseline a fine-tuned BERT has to beat (`tools/tfidf_baseline.py`, console
`bert-tfidf-baseline`).

Example:
>>> import os, tempfile
>>> data_dir = tempfile.mkdtemp()
>>> rows = "text,label\\n" + "good fine great,pos\\nbad awful poor,neg\\n" * 10
>>> for name in ("train.csv", "dev.csv"):
...     _ = open(os.path.join(data_dir, name), "w").write(rows)
>>> tfidf_baseline(data_dir)
(1.0, 20, 20)
"""

import warnings

from keras_bert_impl import filesystem
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.extras import import_extra


def read_split(path, text_column="text", label_column="label"):
    """`(texts, labels)` of a CSV file with a header row naming the columns.

    Raises:
        InputFileError: naming the file (and line): missing, not UTF-8, a row
            of another width than the header, the columns not in the header.
    """
    from keras_bert_impl.data.column_files import delimited_rows

    if not filesystem.exists(path):
        raise InputFileError(f"{path}: not found")
    rows = list(delimited_rows(path, "csv"))
    if rows and (text_column not in rows[0][1] or label_column not in rows[0][1]):
        raise InputFileError(f"{path}:1: needs columns {text_column!r} and {label_column!r}")
    return [row[text_column] for _, row in rows], [row[label_column] for _, row in rows]


def tfidf_baseline(data_dir, text_column="text", label_column="label", seed=0):
    """Fits on `data_dir/train.csv`, scores on `data_dir/dev.csv`.

    Returns:
        `(dev_accuracy, train_examples, dev_examples)`.
    """
    text = import_extra("sklearn.feature_extraction.text", "demo", "bert-tfidf-baseline")
    linear_model = import_extra("sklearn.linear_model", "demo", "bert-tfidf-baseline")
    pipeline = import_extra("sklearn.pipeline", "demo", "bert-tfidf-baseline")

    train_path, dev_path = filesystem.join(data_dir, "train.csv"), filesystem.join(data_dir, "dev.csv")
    train_x, train_y = read_split(train_path, text_column, label_column)
    dev_x, dev_y = read_split(dev_path, text_column, label_column)
    for path, rows in ((train_path, train_x), (dev_path, dev_x)):
        if not rows:
            raise InputFileError(f"{path}: no rows after the header")
    if len(set(train_y)) < 2:
        raise InputFileError(f"{train_path}: every row has the label {train_y[0]!r}; a classifier needs two or more")
    model = pipeline.make_pipeline(
        text.TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
        linear_model.LogisticRegressionCV(Cs=10, cv=5, max_iter=2000, random_state=seed),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model.fit(train_x, train_y)
        except ValueError as error:  # e.g. no word of two letters: an empty vocabulary
            raise InputFileError(f"{train_path}: cannot fit the baseline: {error}") from None
    return float(model.score(dev_x, dev_y)), len(train_x), len(dev_x)
