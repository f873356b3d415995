"""vLLM classes of the OSCAR backend: AttentionBackend, metadata builder and impl (thin; the work is in core.py).

Imported only when the plugin is switched on (``OSCAR_KV_ROTATIONS`` set), from vLLM's plugin loader.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import ClassVar

import torch
from vllm.config import VllmConfig, get_current_vllm_config
from vllm.logger import init_logger
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
    MultipleOf,
)
from vllm.v1.kv_cache_interface import AttentionSpec, KVCacheLayout

from ...dims import text_config
from ...errors import InputError
from ...quant import storage_dtype
from .core import (
    OscarSettings,
    PageFormat,
    ShadowManager,
    StepPlan,
    build_step,
    check_file_for,
    default_shadow_cap,
    layer_compute_for,
)

logger = init_logger(__name__)

_lock = threading.Lock()
_ROTATIONS: dict[str, object] = {}


def settings() -> OscarSettings:
    return OscarSettings.from_env()


def load_rotations(path: str, hf_config=None):
    """The rotation file, loaded once per process and checked against the model."""
    from ...rotation import RotationSet

    with _lock:
        rs = _ROTATIONS.get(path)
        if rs is None:
            rs = RotationSet.load(path)
            _ROTATIONS[path] = rs
    if hf_config is not None:
        rs.check_model(text_config(hf_config))
    return rs


def _cell_bytes(spec_head: int, s: OscarSettings, dtype: torch.dtype) -> int:
    ng = spec_head // min(s.group_size, spec_head)
    return PageFormat(spec_head, s.mode, dtype, ng, storage_dtype(s.scale_dtype)).cell_bytes


class OscarAttentionBackend(AttentionBackend):
    """INT2 codes + scale/zero per token and KV head in vLLM's pages, BF16 windows in a shadow pool."""

    accept_output_buffer: bool = True
    forward_includes_kv_cache_update: bool = True  # K/V are rotated and quantized inside forward
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float16, torch.bfloat16, torch.float32]
    supported_kv_cache_dtypes: ClassVar[list] = ["auto"]

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec=None) -> list:
        return [MultipleOf(1)]

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        # any multiple of 4 works on the torch path; the GPU kernels take the powers of two
        return [16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256]

    @classmethod
    def supported_kv_cache_layouts(cls):
        return (KVCacheLayout.LBHNC,)

    @classmethod
    def customize_spec(cls, spec: AttentionSpec) -> AttentionSpec:
        s = settings()
        if s.mode == "exact" or spec.state_content_bytes is not None:
            return spec  # exact mode keeps vLLM's dense model-dtype K|V cell
        return replace(spec, state_content_bytes=_cell_bytes(spec.head_size, s, spec.dtype))

    @staticmethod
    def get_name() -> str:
        return "CUSTOM"

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER

    @classmethod
    def supports_sliding_window(cls) -> bool:
        return False

    @staticmethod
    def get_impl_cls():
        return OscarAttentionImpl

    @staticmethod
    def get_builder_cls():
        return OscarMetadataBuilder


class OscarCPUAttentionBackend(OscarAttentionBackend):
    """The same backend registered in place of CPU_ATTN (the CPU platform ignores --attention-backend)."""

    @staticmethod
    def get_name() -> str:
        return "CPU_ATTN"


class OscarMetadataBuilder(AttentionMetadataBuilder[StepPlan]):
    def __init__(self, kv_cache_spec, layer_names, vllm_config: VllmConfig, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.s = settings()
        self.block_size = kv_cache_spec.block_size
        if self.s.mode == "exact":
            self.mgr = None
        else:
            cap = self.s.shadow_pages or default_shadow_cap(
                vllm_config.scheduler_config.max_num_seqs, self.block_size, self.s
            )
            self.mgr = ShadowManager(cap)
        self.want_kernel = torch.device(device).type == "cuda" and self.s.kernels == "auto"

    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata, fast_build: bool = False):
        m = common_attn_metadata
        return build_step(self.mgr, self.s, self.block_size, m.query_start_loc_cpu, m.seq_lens,
                          m.block_table_tensor, m.slot_mapping, m.num_actual_tokens, self.want_kernel)


class OscarAttentionImpl(AttentionImpl):
    def __init__(self, num_heads, head_size, scale, num_kv_heads, alibi_slopes, sliding_window, kv_cache_dtype,
                 logits_soft_cap=None, attn_type=AttentionType.DECODER, kv_sharing_target_layer_name=None,
                 sinks=None, **kwargs):
        unsupported = []
        if alibi_slopes is not None:
            unsupported.append("ALiBi")
        if sliding_window is not None:
            unsupported.append("sliding-window layers")
        if logits_soft_cap:
            unsupported.append("logit soft-capping")
        if sinks is not None:
            unsupported.append("learned attention sinks")
        if kv_sharing_target_layer_name is not None:
            unsupported.append("cross-layer KV sharing")
        if kv_cache_dtype != "auto":
            unsupported.append(f"kv_cache_dtype={kv_cache_dtype!r}")
        if unsupported:
            raise InputError(f"the oscar-kv vLLM backend does not support {', '.join(unsupported)}; "
                             "unset OSCAR_KV_ROTATIONS to serve this model with vLLM's own backend")
        self.num_heads, self.head_size, self.scale = num_heads, head_size, float(scale)
        self.num_kv_heads = num_kv_heads
        self.kv_cache_dtype = kv_cache_dtype
        self.attn_type = attn_type
        self.kv_sharing_target_layer_name = None
        self.s = settings()
        cfg = get_current_vllm_config()
        self.dtype = cfg.model_config.dtype
        self.rotations = load_rotations(self.s.rotations, cfg.model_config.hf_config)
        check_file_for(self.s, self.rotations)
        self.compute = None  # per layer, made at the first forward (needs the layer's name)

    def _layer_compute(self, layer):
        if self.compute is None:
            from vllm.model_executor.models.utils import extract_layer_index

            idx = extract_layer_index(layer.layer_name)
            self.compute = layer_compute_for(idx, self.s, self.rotations, self.head_size, self.dtype, self.scale)
        return self.compute

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output, output_scale=None,
                output_block_scale=None):
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("fused output quantization is not supported by the oscar-kv backend")
        if attn_metadata is None:  # profiling / warm-up run
            return output
        return self._layer_compute(layer).forward(query, key, value, kv_cache, attn_metadata, output)
