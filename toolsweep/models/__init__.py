"""Model clients: the OpenAI-compatible client, the vLLM launcher, transformers, scripted policies.

Heavy imports (vllm, torch, transformers) only inside functions."""
