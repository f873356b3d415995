"""tests/vllm runs in the vLLM venv (`make test` builds .venv-vllm). In any environment without vLLM
(the main venv, the GPU machine) only the GPU test file is collected; it skips without CUDA."""

import importlib.util

collect_ignore_glob = []
if importlib.util.find_spec("vllm") is None:
    collect_ignore_glob = ["test_[!g]*.py"]
