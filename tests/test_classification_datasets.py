"""keras_bert_impl/data/classification_datasets.py (with classification_examples,
column_files and tfds_text): GLUE/XNLI readers against independent readers of
the same files, the column and TFDS datasets, errors naming file:line.

The independent readers: tf-models-official's `classifier_data_lib`
processors. Its XNLI processor reads the TSV files itself; its GLUE processors
read TFDS `glue/*`, which we prepare here, offline, from our hand-written GLUE
files with TFDS's own GLUE builder (its download step pointed at them).
"""

import json
from unittest import mock

import numpy as np
import pytest

from keras_bert_impl.data.classification_datasets import (
    COLUMN_FORMATS,
    DATASET_NAMES,
    UnknownDatasetError,
    get_dataset,
    read_examples,
    xnli_dataset,
)
from keras_bert_impl.data.classification_examples import ClassifierExample, infer_labels, label_ids, with_labels
from keras_bert_impl.data.classification_metrics import dataset_metrics
from keras_bert_impl.errors import InputFileError

# ----------------------------------------------------------------------------
# Hand-written GLUE-format files: {dataset: {file: [rows]}} (first row a header
# where the real files have one), with quotes, Unicode and commas inside text.
# ----------------------------------------------------------------------------

MRPC_HEADER = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
MRPC_TRAIN = [
    ["1", "702876", "702977", 'Amrozi accused his brother , whom he called " the witness " .', "Referring to him as only \" the witness \" , Amrozi accused his brother ."],
    ["0", "2108705", "2108831", "Yucaipa owned Dominick 's before selling the chain to Safeway in 1998 .", "Yucaipa bought Dominick 's in 1995 for $ 693 million ."],
    ["1", "1330381", "1330521", "They had published an advertisement on the Internet on June 10 .", "On June 10 , the ship 's owners had published an advertisement ."],
]
MRPC_DEV = [
    ["1", "1355540", "1355592", "He said the foodservice pie business doesn 't fit .", "The foodservice pie business does not fit our long-term growth strategy ."],
    ["0", "2029631", "2029565", "Magnarelli said Racicot hated the Iraqi regime .", "His wife said he was \" 100 percent behind George Bush \" ."],
]
MRPC_TEST = [
    ["0", "1089874", "1089925", "PCCW 's chief operating officer , Mike Butcher , will report directly to him .", "Butcher will report to Alex Arena , the chief executive ."],
    ["1", "3019446", "3019327", "The world 's two largest automakers said U.S. sales fell .", "Domestic sales at both GM and No. 2 Ford Motor Co. declined ."],
]

MNLI_TRAIN_HEADER = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
                     "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label"]
MNLI_DEV_HEADER = MNLI_TRAIN_HEADER[:-1] + ["label2", "label3", "label4", "label5", "gold_label"]


def mnli_row(index, premise, hypothesis, labels):
    return [str(index), "31193", f"{index}n", "government", "( ( x ) )", "( y )", "(ROOT x)", "(ROOT y)", premise, hypothesis] + labels


GLUE_FILES = {
    "CoLA": {
        "train.tsv": [
            ["gj04", "1", "", "Our friends won't buy this analysis, let alone the next one we propose."],
            ["gj04", "0", "*", "They drank the pub."],
            ["cj99", "1", "", "Ça, c'est \"la vie\"."],
        ],
        "dev.tsv": [["gj04", "0", "*", "The more we study verbs, the crazier they get get."], ["bc01", "1", "", "Harry coughed."]],
        "test.tsv": [["index", "sentence"], ["0", "Bill whistled past the house."], ["1", "The car honked its way down the road."]],
    },
    "SST-2": {
        "train.tsv": [["sentence", "label"], ["hide new secretions from the parental units ", "0"], ["the greatest musicians ", "1"], ["\"i loved it\" , said no one ", "0"]],
        "dev.tsv": [["sentence", "label"], ["it 's a charming and often affecting journey . ", "1"], ["unflinchingly bleak and desperate ", "0"]],
        "test.tsv": [["index", "sentence"], ["0", "uneasy mishmash of styles and genres ."], ["1", "this film 's relationship to actual tension is ..."]],
    },
    "MRPC": {
        "train.tsv": [MRPC_HEADER] + MRPC_TRAIN,
        "dev.tsv": [MRPC_HEADER] + MRPC_DEV,
        "test.tsv": [["index"] + MRPC_HEADER[1:]] + [[str(i)] + row[1:] for i, row in enumerate(MRPC_TEST)],
    },
    "QQP": {
        "train.tsv": [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                      ["133273", "213221", "213222", "How is the life of a math student?", "Which level of prepration is enough for the exam jlpt5?", "0"],
                      ["402555", "536040", "536041", "How do I control my horny emotions?", "How do you control your horniness?", "1"]],
        "dev.tsv": [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                    ["201359", "303345", "303346", "Why are African-Americans so beautiful?", "Why are hispanics so beautiful?", "0"]],
        "test.tsv": [["id", "question1", "question2"], ["0", "Would the idea of Trump and Putin be bad?", "Would Trump and Putin be good?"]],
    },
    "QNLI": {
        "train.tsv": [["index", "question", "sentence", "label"],
                      ["0", "When did the third Digimon series begin?", "Unlike the two seasons before it, it was darker.", "not_entailment"],
                      ["1", "Which missile batteries often have individual launchers?", "When MANPADS is operated by specialists, batteries may have several dozen teams.", "entailment"]],
        "dev.tsv": [["index", "question", "sentence", "label"], ["0", "What came into force after the new constitution?", "As of that day, the new constitution heralding the Second Republic came into force.", "entailment"]],
        "test.tsv": [["index", "question", "sentence"], ["0", "What organization is devoted to Jihad?", "For some decades prior to the First Palestine Intifada in 1987, the Muslim Brotherhood took a quiescent stance."]],
    },
    "RTE": {
        "train.tsv": [["index", "sentence1", "sentence2", "label"],
                      ["0", "No Weapons of Mass Destruction Found in Iraq Yet.", "Weapons of Mass Destruction Found in Iraq.", "not_entailment"],
                      ["1", "A place of sorrow, after Pope John Paul II died, became a place of celebration.", "Pope Benedict XVI is the new leader.", "entailment"]],
        "dev.tsv": [["index", "sentence1", "sentence2", "label"], ["0", "Dana Reeve, the widow of Christopher Reeve, has died at 44.", "Christopher Reeve had an accident.", "not_entailment"]],
        "test.tsv": [["index", "sentence1", "sentence2"], ["0", "Mangla was summoned after Madhumita's sister Nidhi Shukla complained.", "Shukla is related to Mangla."]],
    },
    "WNLI": {
        "train.tsv": [["index", "sentence1", "sentence2", "label"],
                      ["0", "I stuck a pin through a carrot. When I pulled the pin out, it had a hole.", "The carrot had a hole.", "1"],
                      ["1", "John couldn't see the stage with Billy in front of him because he is so short.", "John is so short.", "1"],
                      ["2", "The police arrested all of the gang members.", "The police were trying to stop the drug trade.", "0"]],
        "dev.tsv": [["index", "sentence1", "sentence2", "label"], ["0", "The drain is clogged with hair. It has to be cleaned.", "The hair has to be cleaned.", "0"]],
        "test.tsv": [["index", "sentence1", "sentence2"], ["0", "Maude and Dora had seen the trains rushing across the prairie.", "Horses ran away when Maude and Dora came into sight."]],
    },
    "STS-B": {
        "train.tsv": [["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2", "score"],
                      ["0", "main-captions", "MSRvid", "2012test", "0001", "none", "none", "A plane is taking off.", "An air plane is taking off.", "5.000"],
                      ["1", "main-captions", "MSRvid", "2012test", "0004", "none", "none", "A man is playing a large flute.", "A man is playing a flute.", "3.800"]],
        "dev.tsv": [["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2", "score"],
                    ["0", "main-captions", "MSRvid", "2012test", "0000", "none", "none", "A man with a hard hat is dancing.", "A man wearing a hard hat is dancing.", "5.000"],
                    ["1", "main-captions", "MSRvid", "2012test", "0002", "none", "none", "A young child is riding a horse.", "A child is riding a horse.", "4.750"]],
        "test.tsv": [["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2"],
                     ["0", "main-captions", "MSRvid", "2012test", "0024", "none", "none", "A girl is styling her hair.", "A girl is brushing her hair."]],
    },
    "MNLI": {
        "train.tsv": [MNLI_TRAIN_HEADER,
                      mnli_row(0, "Conceptually cream skimming has two basic dimensions.", "Product and geography are what make cream skimming work. ", ["neutral", "neutral"]),
                      mnli_row(1, "you know during the season and i guess at at your level uh you lose them", "You lose the things to the following level if the people recall.", ["entailment", "entailment"]),
                      mnli_row(2, "One of our number will carry out your instructions minutely.", "A member of my team will execute your orders with immense precision.", ["contradiction", "contradiction"])],
        "dev_matched.tsv": [MNLI_DEV_HEADER,
                            mnli_row(0, "The new rights are nice enough", "Everyone really likes the newest benefits ", ["neutral"] * 6),
                            mnli_row(1, "This site includes a list of all award winners.", "The Government Executive articles housed on the website are not able to be searched.", ["contradiction"] * 6)],
        "dev_mismatched.tsv": [MNLI_DEV_HEADER, mnli_row(0, "Your contribution helped make it possible.", "Your contributions were of no help.", ["contradiction"] * 6)],
        "test_matched.tsv": [MNLI_TRAIN_HEADER[:-2], mnli_row(0, "Hierbas, ans seco, ans dulce, and frigola are just a few names.", "There are a lot of different names.", [])],
        "test_mismatched.tsv": [MNLI_TRAIN_HEADER[:-2], mnli_row(0, "What have you decided, what are you going to do?", "So what's your decision?", [])],
    },
}

# Our dataset name (--task_name), its GLUE directory, and its TFDS `glue/<config>`.
GLUE_DATASETS = [
    ("cola", "CoLA", "cola"),
    ("sst-2", "SST-2", "sst2"),
    ("mrpc", "MRPC", "mrpc"),
    ("qqp", "QQP", "qqp"),
    ("qnli", "QNLI", "qnli"),
    ("rte", "RTE", "rte"),
    ("wnli", "WNLI", "wnli"),
    ("sts-b", "STS-B", "stsb"),
    ("mnli", "MNLI", "mnli"),
]


def write_tsv(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue")
    for directory, files in GLUE_FILES.items():
        for name, rows in files.items():
            write_tsv(root / directory / name, rows)
    return root


def prepare_tfds_glue(config, glue_dir, tfds_dir, work_dir):
    """Builds TFDS `glue/<config>` offline from our GLUE files, with TFDS's GLUE builder."""
    import tensorflow_datasets as tfds

    mrpc_files = {}
    if config == "mrpc":
        # TFDS builds MRPC from the raw MSR files (train with a UTF-8 BOM) and a
        # list of the pairs that form dev.
        raw_train = work_dir / "msr_paraphrase_train.txt"
        raw_train.write_bytes(b"\xef\xbb\xbf" + "".join("\t".join(r) + "\n" for r in [MRPC_HEADER] + MRPC_TRAIN + MRPC_DEV).encode())
        write_tsv(work_dir / "mrpc_dev_ids.tsv", [row[1:3] for row in MRPC_DEV])
        write_tsv(work_dir / "msr_paraphrase_test.txt", [MRPC_HEADER] + MRPC_TEST)
        mrpc_files = {"train": str(raw_train), "dev_ids": str(work_dir / "mrpc_dev_ids.tsv"),
                      "test": str(work_dir / "msr_paraphrase_test.txt")}
    with mock.patch.object(tfds.download.DownloadManager, "download_and_extract", lambda self, url: str(glue_dir)), \
            mock.patch.object(tfds.download.DownloadManager, "download", lambda self, urls: mrpc_files):
        tfds.builder(f"glue/{config}", data_dir=str(tfds_dir)).download_and_prepare(
            download_config=tfds.download.DownloadConfig(try_download_gcs=False)
        )


@pytest.fixture(scope="module")
def tfds_dir(glue_dir, tmp_path_factory):
    import tensorflow_datasets as tfds

    tfds.disable_progress_bar()
    directory = tmp_path_factory.mktemp("tfds")
    work_dir = tmp_path_factory.mktemp("mrpc_raw")
    for _, _, config in GLUE_DATASETS:
        prepare_tfds_glue(config, glue_dir, directory, work_dir)
    return directory


def triples(examples):
    return [(e.text_a, e.text_b, e.label) for e in examples]


def tf_models_processor(task_name, tfds_dir, monkeypatch):
    """tf-models' processor for `task_name`, its `tfds.load` pointed at `tfds_dir` (offline)."""
    from official.nlp.data import classifier_data_lib as lib

    load = lib.tfds.load
    monkeypatch.setattr(
        lib.tfds, "load",
        lambda name, split=None, try_gcs=False: load(name, split=split, data_dir=str(tfds_dir), download=False),
    )
    processors = {
        "cola": lib.ColaProcessor, "sst-2": lib.SstProcessor, "mrpc": lib.MrpcProcessor,
        "qqp": lib.QqpProcessor, "qnli": lib.QnliProcessor, "rte": lib.RteProcessor,
        "wnli": lib.WnliProcessor, "sts-b": lib.StsBProcessor, "mnli": lib.MnliProcessor,
    }
    return processors[task_name]()


@pytest.mark.parametrize("task_name, directory, config", GLUE_DATASETS)
def test_glue_tsv_reading_matches_tf_models_and_tfds(task_name, directory, config, glue_dir, tfds_dir, monkeypatch):
    dataset = get_dataset(task_name)
    theirs = tf_models_processor(task_name, tfds_dir, monkeypatch)
    ours_tfds = get_dataset(f"glue/{config}")
    for split, get in (("train", theirs.get_train_examples), ("dev", theirs.get_dev_examples), ("test", theirs.get_test_examples)):
        ours = triples(read_examples(dataset, glue_dir / directory, split))
        if dataset.is_regression:
            # TFDS stores the scores as float32.
            ours = [(a, b, float(np.float32(label))) for a, b, label in ours]
        # Our own TFDS reader agrees with our TSV reader (and keeps MNLI's order and names).
        assert triples(read_examples(ours_tfds, tfds_dir, split)) == ours
        reference = [(e.text_a, e.text_b, e.label) for e in get(None)]
        if task_name == "mnli":
            # tf-models' TFDS MNLI reader puts the hypothesis first and names
            # TFDS class ids (entailment, neutral, contradiction) with its own,
            # differently ordered, label list; its test examples (split
            # "test_matched", not "test") get TFDS's -1 as an index into that
            # list. The original reads the premise first and the gold label by
            # name, and labels test examples "contradiction".
            renamed = dict(zip(("entailment", "neutral", "contradiction"), theirs.get_labels()))
            if split == "test":
                renamed = {"contradiction": theirs.get_labels()[-1]}
            ours = [(b, a, renamed[label]) for a, b, label in ours]
        assert ours == reference, split


def test_original_guids_and_test_placeholders(glue_dir):
    cola = get_dataset("cola")
    assert [e.guid for e in read_examples(cola, glue_dir / "CoLA", "train")] == ["train-0", "train-1", "train-2"]
    test = read_examples(cola, glue_dir / "CoLA", "test")
    assert [(e.guid, e.text_a, e.label) for e in test] == [("test-1", "Bill whistled past the house.", "0"), ("test-2", "The car honked its way down the road.", "0")]
    mrpc = read_examples(get_dataset("mrpc"), glue_dir / "MRPC", "train")
    assert [(e.guid, e.label, e.unique_id) for e in mrpc] == [("train-1", "1", 0), ("train-2", "0", 1), ("train-3", "1", 2)]
    assert mrpc[0].text_a == MRPC_TRAIN[0][3] and '" the witness "' in mrpc[0].text_a  # quotes kept, as the original
    assert mrpc[0].source == f"{glue_dir / 'MRPC' / 'train.tsv'}:2"
    assert {e.label for e in read_examples(get_dataset("mrpc"), glue_dir / "MRPC", "test")} == {"0"}
    mnli = read_examples(get_dataset("MNLI"), glue_dir / "MNLI", "dev")
    assert [(e.guid, e.label) for e in mnli] == [("dev_matched-0", "neutral"), ("dev_matched-1", "contradiction")]
    assert [e.label for e in read_examples(get_dataset("mnli"), glue_dir / "MNLI", "test")] == ["contradiction"]
    mismatched = read_examples(get_dataset("mnli_mismatched"), glue_dir / "MNLI", "dev")
    assert [(e.guid, e.text_b) for e in mismatched] == [("dev_mismatched-0", "Your contributions were of no help.")]
    stsb = read_examples(get_dataset("STS-B"), glue_dir / "STS-B", "train")
    assert [e.label for e in stsb] == [5.0, 3.8]
    assert isinstance(stsb[0], ClassifierExample)


XNLI_DEV_HEADER = ["language", "gold_label", "sentence1_binary_parse", "sentence2_binary_parse", "sentence1_parse",
                   "sentence2_parse", "sentence1", "sentence2", "promptID", "pairID", "genre"]
XNLI_DEV_ROWS = [
    ["en", "neutral", "", "", "", "", "He said, \"Mama, I'm home.\"", "He didn't say a word.", "1", "1", "facetoface"],
    ["zh", "contradiction", "", "", "", "", "他说，妈妈，我回来了。", "他一句话也没说。", "1", "1", "facetoface"],
    ["de", "entailment", "", "", "", "", "und er hat gesagt, Mama ich bin daheim.", "Er sagte zu seiner Mutter, er sei nach Hause gekommen.", "1", "2", "facetoface"],
    ["zh", "entailment", "", "", "", "", "他说，妈妈，我回来了。", "他告诉他的妈妈他已经回到家了。", "1", "2", "facetoface"],
]


def test_xnli_matches_tf_models(tmp_path):
    from official.nlp.data import classifier_data_lib as lib

    write_tsv(tmp_path / "multinli" / "multinli.train.zh.tsv", [
        ["premise", "hypo", "label"],
        ["从概念上看，奶油收入有两个基本方面产品和地理。", "产品和地理是使奶油抹霜工作的原因。", "neutral"],
        ["你知道在这个季节，我猜在你的水平你把他们带到下一个水平", "如果人们记得，你就会把东西弄丢了。", "entailment"],
        ["我们的一个号码会非常详细地执行你的指示。", "我团队的一个成员将以极大的精确度执行你的命令。", "contradictory"],
    ])
    write_tsv(tmp_path / "xnli.dev.tsv", [XNLI_DEV_HEADER] + XNLI_DEV_ROWS)
    theirs = lib.XnliProcessor(language="zh")
    dataset = get_dataset("xnli")
    train = read_examples(dataset, tmp_path, "train")
    assert triples(train) == [(e.text_a, e.text_b, e.label) for e in theirs.get_train_examples(str(tmp_path))]
    assert train[2].label == "contradiction"
    # The original counts the header in guids and keeps only its language's dev rows.
    assert [e.guid for e in train] == ["train-1", "train-2", "train-3"]
    dev = read_examples(dataset, tmp_path, "dev")
    zh_guids = {f"dev-{i}" for i, row in enumerate(XNLI_DEV_ROWS, start=1) if row[0] == "zh"}
    reference = [e for e in theirs.get_dev_examples(str(tmp_path)) if e.guid in zh_guids]
    assert [(e.guid,) + t for e, t in zip(dev, triples(dev))] == [(e.guid, e.text_a, e.text_b, e.label) for e in reference]
    assert [e.label for e in read_examples(xnli_dataset("de"), tmp_path, "dev")] == ["entailment"]


def test_column_datasets_read_what_pandas_reads(tmp_path):
    import pandas as pd

    (tmp_path / "train.csv").write_text(
        'review,other,sentiment\n"A film, truly ""great""",x,pos\nDull.,y,neg\n"two\nlines",z,pos\nOkay-ish,w,neutral\n',
        encoding="utf-8",
    )
    (tmp_path / "dev.csv").write_text("review,other,sentiment\nGreat.,a,pos\n", encoding="utf-8")
    (tmp_path / "test.csv").write_text("review,other\nMeh.,b\n", encoding="utf-8")
    dataset = get_dataset("CSV", text_a_column="review", label_column="sentiment")
    train = read_examples(dataset, tmp_path, "train")
    frame = pd.read_csv(tmp_path / "train.csv")
    assert [(e.text_a, e.label) for e in train] == list(zip(frame["review"], frame["sentiment"]))
    assert [e.source.rsplit(":", 1)[1] for e in train] == ["2", "3", "4", "6"]  # where each row starts
    dataset = with_labels(dataset, train)
    assert dataset.labels == ("neg", "neutral", "pos")
    assert [e.label for e in read_examples(dataset, tmp_path, "dev")] == ["pos"]
    assert [(e.text_a, e.label) for e in read_examples(dataset, tmp_path, "test")] == [("Meh.", "neg")]

    rows = [{"q": "Is it?", "a": "Yes.", "y": 1}, {"q": "Why \"not\"?", "a": "Because\tof tabs.", "y": 0}, {"q": "Ünï?", "a": "東京", "y": 2}]
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n\n", encoding="utf-8")
    dataset = get_dataset("jsonl", text_a_column="q", text_b_column="a", label_column="y", labels=("0", "1", "2"))
    frame = pd.read_json(tmp_path / "train.jsonl", lines=True)
    assert triples(read_examples(dataset, tmp_path, "train")) == [(q, a, str(y)) for q, a, y in zip(frame["q"], frame["a"], frame["y"])]

    write_tsv(tmp_path / "train.tsv", [["label", "text"], ["b", 'say "hi"'], ["a", "x"], ["b", "y"]])
    dataset = get_dataset("tsv")
    assert triples(read_examples(dataset, tmp_path, "train")) == [('say "hi"', None, "b"), ("x", None, "a"), ("y", None, "b")]
    assert infer_labels(read_examples(dataset, tmp_path, "train")) == ("a", "b")


def test_label_ids_and_numeric_label_order(tmp_path):
    (tmp_path / "train.csv").write_text("text,label\na,10\nb,9\nc,10\n", encoding="utf-8")
    dataset = with_labels(get_dataset("csv"), read_examples(get_dataset("csv"), tmp_path, "train"))
    assert dataset.labels == ("9", "10")
    assert label_ids(dataset, read_examples(dataset, tmp_path, "train")).tolist() == [1, 0, 1]


def test_inferred_labels_need_two_classes(tmp_path):
    (tmp_path / "train.csv").write_text("text,label\na,pos\nb,pos\n", encoding="utf-8")
    train = read_examples(get_dataset("csv"), tmp_path, "train")
    with pytest.raises(InputFileError, match=r"train.csv: 1 distinct label\(s\) 'pos'; a classifier needs two or more"):
        with_labels(get_dataset("csv"), train)


def error_message(dataset, data_dir, split):
    with pytest.raises(InputFileError) as info:
        read_examples(dataset, data_dir, split)
    return str(info.value)


@pytest.mark.parametrize(
    "directory, name, rows, task_name, split, expected",
    [
        ("MRPC", "train.tsv", [MRPC_HEADER, MRPC_TRAIN[0], MRPC_TRAIN[1][:4]], "mrpc", "train", "train.tsv:3: 4 columns, expected 5 (as the header)"),
        ("CoLA", "dev.tsv", [["gj04", "1", "", "Fine."], ["gj04", "1", "Too", "many", "columns"]], "cola", "dev", "dev.tsv:2: 5 columns, expected 4 (as dev.tsv of this task)"),
        ("CoLA", "train.tsv", [["gj04", "1", "", "Fine."], ["gj04", "2", "", "Two?"]], "cola", "train", "train.tsv:2: label '2' is not one of '0', '1' (task cola)"),
        ("RTE", "dev.tsv", [["index", "sentence1", "sentence2", "label"], ["0", "a", "b", "neutral"]], "rte", "dev", "dev.tsv:2: label 'neutral' is not one of 'entailment', 'not_entailment'"),
        ("STS-B", "train.tsv", [GLUE_FILES["STS-B"]["train.tsv"][0], ["0"] * 9 + ["high"]], "sts-b", "train", "train.tsv:2: label 'high' is not a number"),
        ("SST-2", "train.tsv", [["sentence"], ["x"]], "sst-2", "train", "train.tsv:1: header has 1 columns, expected at least 2"),
        ("SST-2", "train.tsv", [["sentence", "label"], ["good", "1"], []], "sst-2", "train", "train.tsv:3: 0 columns, expected 2"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path, directory, name, rows, task_name, split, expected):
    write_tsv(tmp_path / name, rows)
    assert expected in error_message(get_dataset(task_name), tmp_path, split)


def test_other_input_errors(tmp_path):
    assert error_message(get_dataset("mrpc"), tmp_path, "dev") == f"{tmp_path / 'dev.tsv'}: data file not found"
    (tmp_path / "train.tsv").write_bytes(b"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tcaf\xe9\tb\n")
    assert error_message(get_dataset("mrpc"), tmp_path, "train").endswith("train.tsv:2: not valid UTF-8 (byte 9: b'\\xe9')")
    (tmp_path / "train.csv").write_text("text,stars\ngood,5\n", encoding="utf-8")
    assert error_message(get_dataset("csv"), tmp_path, "train").endswith("train.csv:2: no column 'label' (has 'text', 'stars')")
    (tmp_path / "dev.csv").write_text("text,label\ngood,5,extra\n", encoding="utf-8")
    assert error_message(get_dataset("csv", labels=("1", "5")), tmp_path, "dev").endswith("dev.csv:2: 3 columns, expected 2 (as the header)")
    (tmp_path / "test.csv").write_text("", encoding="utf-8")
    assert error_message(get_dataset("csv"), tmp_path, "test").endswith("test.csv: empty file, expected a header line")
    (tmp_path / "train.jsonl").write_text('{"text": "a", "label": "x"}\n{"text": "b", label}\n', encoding="utf-8")
    assert "train.jsonl:2: not valid JSON" in error_message(get_dataset("jsonl"), tmp_path, "train")
    (tmp_path / "dev.jsonl").write_text('{"text": "a", "label": "z"}\n', encoding="utf-8")
    assert error_message(get_dataset("jsonl", labels=("x", "y")), tmp_path, "dev").endswith("dev.jsonl:1: label 'z' is not one of 'x', 'y' (task jsonl)")
    with pytest.raises(UnknownDatasetError, match=r"--task_name 'glue/imdb' is unknown; choose one of cola, .*jsonl"):
        get_dataset("glue/imdb")


def test_tfds_dataset_refuses_an_unprepared_dataset(tmp_path):
    message = error_message(get_dataset("glue/rte"), tmp_path, "train")
    assert message.startswith(f"{tmp_path}: TFDS dataset glue/rte is not prepared there (this tool never downloads")
    assert not any(tmp_path.iterdir())  # nothing was downloaded or written


def test_dataset_metrics_are_glues():
    assert get_dataset("cola").metrics == ("mcc",)
    assert get_dataset("mrpc").metrics == get_dataset("qqp").metrics == get_dataset("glue/qqp").metrics == ("f1",)
    assert get_dataset("sts-b").metrics == get_dataset("glue/stsb").metrics == ("pearson", "spearman")
    assert get_dataset("mnli").metrics == get_dataset("sst2").metrics == ()
    assert dataset_metrics(get_dataset("cola"), [0, 1, 1, 0], [0, 1, 0, 0]) == {"mcc": pytest.approx(0.5773502691896258)}
    names = [n for n in DATASET_NAMES if n not in COLUMN_FORMATS]
    assert [n for n in names if get_dataset(n).is_regression] == ["sts-b", "glue/stsb"]
