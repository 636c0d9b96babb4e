"""Grouped key/value heads under a mask on CPU, for transformers' continuous batching.

Continuous batching packs every request of a forward step into one sequence and separates them with an
attention mask, so every step is masked. On CPU, transformers' SDPA attention then repeats each
key/value head for its query heads before calling torch (`repeat_kv`: it asks torch for grouped heads
only without a mask): a copy of every cached key and value a step reads, at every layer. Measured with
SmolLM2-135M (9 query heads over 3 key/value heads), one core, transformers 5.19, three concurrent
conversations of three turns over a ~1,950-token tool list: 66% of the generation thread's samples were
in attention, 28% in `repeat_kv` alone, and the packed step's masked attention also computed every
request against every other request's cache, which the mask then discarded. Read request by request
(`_per_request`, heads kept grouped with torch's `enable_gqa`), the same three conversations took 110 s
against 172 s with transformers' function, both run at once (load 1.4), with the same greedy replies.

`use_grouped_sdpa` registers `grouped_sdpa_forward` under transformers' own name "sdpa" (continuous
batching accepts no other name for SDPA). Every call it does not handle (no mask, another device, equal
head counts, a position bias, dropout while training) goes to the function it replaced, unchanged.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

_log = logging.getLogger(__name__)
_original: Any = None  # transformers' SDPA attention function, once replaced


def grouped_sdpa_forward(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, dropout: float = 0.0,
                         scaling: float | None = None, is_causal: bool | None = None, **kwargs: Any) -> tuple[Any, None]:
    """transformers' SDPA attention, except that a masked CPU call with grouped key/value heads keeps them
    grouped (torch reads each key/value head for its group of query heads) instead of copying them."""
    import torch

    grouped = getattr(module, "num_key_value_groups", 1) > 1
    plain = kwargs.get("position_bias") is None and not kwargs.get("output_attentions")
    if (attention_mask is None or not grouped or not plain or query.device.type != "cpu"
            or key.shape[-1] != value.shape[-1] or (module.training and dropout > 0)):
        return _original(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                         is_causal=is_causal, **kwargs)
    cache = kwargs.pop("cache", None)
    if cache is not None:  # the paged cache: this step's keys and values in, each request's whole cache out
        key, value = cache.update(key_states=key, value_states=value, layer_idx=module.layer_idx, kwargs=kwargs)
        bounds_q, bounds_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
        if (isinstance(bounds_q, torch.Tensor) and isinstance(bounds_k, torch.Tensor)
                and getattr(module, "sliding_window", None) is None):
            return _per_request(query, key, value, bounds_q.tolist(), bounds_k.tolist(), scaling), None
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=0.0, scale=scaling, is_causal=False, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def _per_request(query: Any, key: Any, value: Any, bounds_q: list[int], bounds_k: list[int],
                 scaling: float | None) -> Any:
    """Attention of a packed step request by request: each request's queries over its own keys, causal
    from the bottom right (its queries are its last positions). The packed step's mask is block-diagonal,
    so this is the same attention without computing the blocks the mask throws away (every request
    against every other's cache) or reading the mask; a decoding request needs no mask at all."""
    import torch

    sdpa = torch.nn.functional.scaled_dot_product_attention
    out = query.new_zeros(query.shape)
    for i in range(len(bounds_q) - 1):
        q0, q1, k0, k1 = bounds_q[i], bounds_q[i + 1], bounds_k[i], bounds_k[i + 1]
        n_q, n_k = q1 - q0, k1 - k0
        if n_q == 0:
            continue
        q, k, v = query[:, :, q0:q1], key[:, :, k0:k1], value[:, :, k0:k1]
        if n_q == 1:
            part = sdpa(q, k, v, scale=scaling, enable_gqa=True)
        elif n_q == n_k:
            part = sdpa(q, k, v, scale=scaling, is_causal=True, enable_gqa=True)
        else:
            mask = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril(n_k - n_q)
            part = sdpa(q, k, v, attn_mask=mask, scale=scaling, enable_gqa=True)
        out[:, :, q0:q1] = part
    return out.transpose(1, 2).contiguous()


def use_grouped_sdpa(model: Any) -> bool:
    """Serve `model`'s SDPA calls through `grouped_sdpa_forward` where it applies (CPU, SDPA, fewer key/value
    heads than query heads, a transformers whose SDPA function updates the paged cache itself). False, and
    nothing changed, anywhere else."""
    global _original
    config = model.config.get_text_config()
    heads = getattr(config, "num_attention_heads", None)
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    if (model.device.type != "cpu" or getattr(model.config, "_attn_implementation", None) != "sdpa"
            or not heads or kv_heads >= heads):
        return False
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if _original is None:
        if "cache" not in inspect.signature(sdpa_attention_forward).parameters:
            # before 5.19 the paged cache has its own attention function ("paged|sdpa"), left as it is
            _log.info("grouped SDPA not used: this transformers updates the paged cache outside SDPA")
            return False
        _original = sdpa_attention_forward
        AttentionInterface.register("sdpa", grouped_sdpa_forward)
    return True
