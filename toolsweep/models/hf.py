"""The transformers backend: a model in this process, behind the same async chat interface.

Concurrent episodes call `HFClient.chat`; a single generation thread collects the waiting requests
into batches (up to `max_batch_size`, after waiting `batch_wait_ms` for company), pads them on the
left, generates once and hands each reply back to its episode's event loop. That is the batching a
vLLM server does continuously, done here per batch: fine for small models and machines without
vLLM. Tool calls are read from the generated text in the Hermes convention
(`<tool_call>{"name": ..., "arguments": ...}</tool_call>`), as vLLM's `hermes` parser does, so the
same model gives the same messages through both backends.

Prompts already computed are kept (`prefix_cache_mib`, toolsweep.models.prefix_cache): an episode's
next turn and every episode over the same tool list compute only the tokens after the part they share
with a stored prompt, as vLLM's prefix caching does. Without it a ~6,400-token ToolMaze prompt cost
about a minute of a CPU core every turn.

Sampled decoding (temperature > 0) draws from one torch generator per batch seeded from the batch's
request seeds: reproducible for a given batch composition; greedy decoding does not depend on it.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import queue
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolsweep.evaluator.episode import deadline_credit, deadline_paused
from toolsweep.evaluator.protocols import ContextExceeded, InfraError
from toolsweep.evaluator.types import FunctionCall, Message, Sampling, ToolCall, stable_seed
from toolsweep.models.client import ChatResponse
from toolsweep.models.config import HFModelConfig
from toolsweep.models.prefix_cache import PrefixStore, common_prefix

_log = logging.getLogger(__name__)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


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


@dataclass
class _Request:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    sampling: Sampling
    seed: int | None
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    started: asyncio.Future  # set when its batch begins to generate (or it is answered without one)
    credit: Callable[[float], None] | None = None  # gives its episode's wall-clock guard seconds back
    submitted: float = field(default_factory=time.monotonic)

    def abandoned(self) -> bool:
        """Nobody waits for this reply any more: its episode timed out or was cancelled (read from the
        generation thread; a stale read only costs one more decoding step)."""
        return self.future.done() or self.loop.is_closed()

    def begin(self) -> None:
        """From the generation thread: this request's batch starts now."""
        def mark() -> None:
            if not self.started.done():
                self.started.set_result(None)

        try:
            self.loop.call_soon_threadsafe(mark)
        except RuntimeError:  # the episode's loop is gone
            pass

    def give_back(self, seconds: float) -> None:
        """From the generation thread: `seconds` of this request's generation were not its episode's."""
        if self.credit is not None:
            try:
                self.loop.call_soon_threadsafe(self.credit, seconds)
            except RuntimeError:
                pass


class _NotItsOwn:
    """The part of a batch's wall-clock time that is not any one episode's own work, handed back to each
    episode of the batch about every `every_s` from the decoding loop, so an episode's guard
    (`episode_timeout_s`) counts what generating its own reply cost, whatever else the machine does:

    - the time the generation thread was not running (the CPU was another process's, or another
      thread's of this one): on a saturated machine that grew with every other process, and counted,
      it expired episodes that were being served;
    - of the time it ran, the other rows' share: a batch of n rows computes n replies, so one episode's
      reply is 1/n of it (a batch of 8 ToolMaze prompts costs about 8 times one).

    A generation that stalls without a decoding step in between hands nothing back, so the guard still
    catches a hang."""

    def __init__(self, requests: list[_Request], every_s: float = 1.0) -> None:
        self.requests, self.every_s = requests, every_s
        self.wall, self.cpu = time.monotonic(), time.thread_time()
        self.preempted = 0.0
        self.shared = 0.0

    def tick(self, final: bool = False) -> None:
        wall = time.monotonic()
        if not final and wall - self.wall < self.every_s:
            return
        cpu = time.thread_time()
        ran = min(cpu - self.cpu, wall - self.wall)
        preempted = (wall - self.wall) - ran
        shared = ran * (1 - 1 / len(self.requests))
        self.wall, self.cpu = wall, cpu
        self.preempted += preempted
        self.shared += shared
        if preempted + shared > 0:
            for req in self.requests:
                req.give_back(preempted + shared)


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
                    # Joined before the interpreter tears down: a generation thread still inside torch
                    # at exit aborts the process (SIGABRT, exit 134) after the work was done.
                    atexit.register(cls.close_all)
                cls._shared[key] = cls(cfg)
            return cls._shared[key]

    def __init__(self, config: HFModelConfig) -> None:
        self.config = config
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None
        self._load_error: BaseException | None = None
        self.max_model_len = config.max_model_len
        self._closing = threading.Event()
        self.batches: list[int] = []  # sizes of the batches generated (for tests and benchmarks)
        self.batch_steps: list[int] = []  # decoding steps each of those batches ran
        self.dropped = 0  # requests abandoned before or during their generation
        self.preempted_s = 0.0  # generation time the thread was not running (handed back to episodes)
        self.shared_s = 0.0  # generation time of other rows of a batch (handed back to each episode)
        self._prefix = (PrefixStore(int(config.prefix_cache_mib * 2**20)) if config.prefix_cache_mib > 0 else None)
        self._bytes_per_token = 0  # of the model's key/value cache, learnt from the first prompt kept
        self.prompt_tokens = 0  # prompt tokens of every generated request
        self.reused_tokens = 0  # of those, taken from the prefix store instead of computed

    # -- loading (in the generation thread: heavy imports never at module import) --------------
    def _load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        cfg = self.config
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        kwargs: dict[str, Any] = {"gguf_file": cfg.gguf_file} if cfg.gguf_file else {}
        tokenizer = AutoTokenizer.from_pretrained(cfg.path, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(cfg.path, dtype=getattr(torch, cfg.dtype), **kwargs)
        model.to(cfg.device).eval()
        if cfg.chat_template:
            with open(cfg.chat_template) as f:
                tokenizer.chat_template = f.read()
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._eos_ids = self._stop_ids(model, tokenizer)
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

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=f"hf-{self.config.name}", daemon=True)
                self._thread.start()

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop the generation thread: a generation under way ends at its next decoding step, every
        waiting request gets an InfraError, and the thread has ended when this returns (a thread still
        inside torch at interpreter exit aborts the process)."""
        self._closing.set()
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout_s)
        while True:
            try:
                req = self._queue.get_nowait()
            except queue.Empty:
                break
            if req is not None:
                self._deliver(req, InfraError(f"hf model {self.config.name!r} was shut down"))
        if self._prefix is not None:
            self._prefix.clear()

    @classmethod
    def close_all(cls) -> None:
        """Close every shared client of this process (at exit, and when a worker or preflight ends)."""
        with cls._shared_lock:
            clients = list(cls._shared.values())
            cls._shared.clear()
        for client in clients:
            client.close()

    # -- the async interface ------------------------------------------------------------------
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
        self._ensure_thread()
        loop = asyncio.get_running_loop()
        request = _Request(messages, tools or None, sampling or Sampling(), seed, loop, loop.create_future(),
                           loop.create_future(), deadline_credit())
        self._queue.put(request)
        try:
            # Waiting in the queue (behind other episodes' batches, or the model's loading) is not this
            # episode's working time: on a saturated machine it grows with everything else in flight,
            # and counted against `episode_timeout_s` it expired every episode before its turn came.
            with deadline_paused():
                await request.started
            return await request.future
        finally:
            if not request.future.done():  # cancelled or expired: the generation thread drops it
                request.future.cancel()

    # -- the generation thread ----------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._load()
        except BaseException as exc:  # noqa: BLE001 - reported to every waiting request
            self._load_error = exc
        pending: list[tuple[_Request, list[int]]] = []  # tokenized, waiting for their generation
        while True:
            stop = self._gather(pending)
            if stop or self._closing.is_set():
                for req, _ in pending:
                    self._deliver(req, InfraError(f"hf model {self.config.name!r} was shut down"))
                return
            # an episode that timed out must not cost a generation: under load, generating for expired
            # episodes starved the live ones until none finished
            live = [(req, ids) for req, ids in pending if not req.abandoned()]
            self.dropped += len(pending) - len(live)
            pending[:] = live
            if pending:
                self._serve_next(pending)

    def _gather(self, pending: list[tuple[_Request, list[int]]]) -> bool:
        """Take every request queued into `pending` (tokenized); when nothing waits, block for the next
        one and give it `batch_wait_ms` to find company. True when the client is closing."""
        if not pending:
            first = self._queue.get()
            if first is None:
                return True
            self._take(first, pending)
            deadline = time.monotonic() + self.config.batch_wait_ms / 1000
            while len(pending) < self.config.max_batch_size:
                remaining = deadline - time.monotonic()
                try:
                    item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    return True
                self._take(item, pending)
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return False
            if item is None:
                return True
            self._take(item, pending)

    def _take(self, req: _Request, pending: list[tuple[_Request, list[int]]]) -> None:
        """Tokenize a request into `pending`, or answer it at once: the model failed to load, the chat
        template cannot render it, or it cannot fit the context window."""
        if req.abandoned():
            self.dropped += 1
            return
        if self._load_error is not None:
            self._deliver(req, InfraError(
                f"hf model {self.config.name!r} failed to load from {self.config.path}: {self._load_error!r}"))
            return
        try:
            ids = self._tokenizer(self.render(req.messages, req.tools), add_special_tokens=False)["input_ids"]
        except Exception as exc:  # noqa: BLE001 - a template that cannot render this conversation
            self._deliver(req, InfraError(f"chat template failed: {exc!r}"))
            return
        if len(ids) + req.sampling.max_tokens > self.max_model_len:
            self._deliver(req, ContextExceeded(
                f"prompt of {len(ids)} tokens + max_tokens {req.sampling.max_tokens} exceeds the "
                f"context window of {self.max_model_len} tokens"))
            return
        pending.append((req, ids))

    def _serve_next(self, pending: list[tuple[_Request, list[int]]]) -> None:
        """Generate the next piece of work and take it out of `pending`.

        With the prefix store: a prompt that a stored one covers for at least half its tokens (an
        episode's next turn) goes first, alone, on a copy of that cache: cheap, and it finishes episodes
        already under way before new ones start. Otherwise the oldest prompts are batched (one sampling
        mode, the cap on new tokens per request), leaving out any that shares half its prompt with one
        already in the batch (it will reuse that one), no more than the store can keep for their next
        turns (a batch whose caches evicted each other would compute every next turn whole), and no more
        than `max_batch_tokens` of prompt (the first always goes)."""
        store = self._prefix
        if store is not None:
            for i, (req, ids) in enumerate(pending):
                entry, n = store.lookup(ids)
                if entry is not None and 2 * n >= len(ids):
                    del pending[i]
                    self._guarded([(req, ids)], lambda: self._generate_batch([(req, ids)], reuse=(entry.cache, n)))
                    return
        mode = (pending[0][0].sampling.temperature, pending[0][0].sampling.top_p)
        chosen: list[tuple[_Request, list[int]]] = []
        room = self._keepable(pending[0])
        tokens = 0
        for req, ids in pending:
            if len(chosen) >= min(self.config.max_batch_size, room):
                break
            if (req.sampling.temperature, req.sampling.top_p) != mode:
                continue
            if chosen and tokens + len(ids) > self.config.max_batch_tokens:
                continue
            if store is not None and any(2 * common_prefix(ids, other) >= len(ids) for _, other in chosen):
                continue
            chosen.append((req, ids))
            tokens += len(ids)
        taken = {id(req) for req, _ in chosen}
        pending[:] = [(req, ids) for req, ids in pending if id(req) not in taken]
        self._guarded(chosen, lambda: self._generate_by_length(chosen))

    def _keepable(self, first: tuple[_Request, list[int]]) -> int:
        """How many conversations like `first` (prompt and reply) the prefix store holds at once; no
        limit without a store or before the model's cache size per token is known."""
        if self._prefix is None or not self._bytes_per_token:
            return self.config.max_batch_size
        req, ids = first
        per_row = self._bytes_per_token * (len(ids) + req.sampling.max_tokens)
        return max(1, int(self._prefix.budget_bytes // per_row))

    def _guarded(self, requests: list[tuple[_Request, list[int]]], generate: Callable[[], None]) -> None:
        try:
            generate()
        except BaseException as exc:  # noqa: BLE001 - the requests' failure, never the thread's end
            for req, _ in requests:
                self._deliver(req, InfraError(f"hf generation failed: {exc!r}"))

    @staticmethod
    def _deliver(req: _Request, outcome: Any) -> None:
        def settle() -> None:
            if not req.started.done():
                req.started.set_result(None)
            if req.future.done():
                return
            if isinstance(outcome, BaseException):
                req.future.set_exception(outcome)
            else:
                req.future.set_result(outcome)

        try:
            req.loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the episode's loop is gone (cancelled sweep)
            pass

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        """The prompt text the chat template makes of a conversation (tools shown when given)."""
        return self._tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)

    def _generate_by_length(self, live: list[tuple[_Request, list[int]]]) -> None:
        """Batches of prompts of similar length. Left padding makes every row as long as the longest
        prompt: prompts of very different lengths (a 200-token chat next to a 6k-token tool list) go in
        separate batches."""
        live = sorted(live, key=lambda item: len(item[1]))
        group_start = 0
        for i in range(1, len(live) + 1):
            if i == len(live) or len(live[i][1]) > 2 * len(live[group_start][1]) + 64:
                batch = [(req, ids) for req, ids in live[group_start:i] if not req.abandoned()]
                self.dropped += i - group_start - len(batch)
                if batch:
                    self._generate_batch(batch)
                group_start = i

    # -- the key/value caches the prefix store holds -------------------------------------------
    def _cache_rows(self, cache: Any, row: int, start: int, stop: int) -> tuple[Any, int]:
        """A new single-row cache holding positions [start, stop) of `row` of `cache`, and its size."""
        from transformers import DynamicCache

        data = [(layer.keys[row:row + 1, :, start:stop].clone(), layer.values[row:row + 1, :, start:stop].clone())
                for layer in cache.layers]
        nbytes = sum(k.nbytes + v.nbytes for k, v in data)
        return DynamicCache(ddp_cache_data=data, config=self._model.config), nbytes

    def _reusable(self, cache: Any) -> bool:
        """Only full-attention key/value layers can be cut at any position and reused; a sliding-window,
        linear-attention or recurrent layer cannot (such models compute every prompt whole)."""
        try:
            from transformers.cache_utils import DynamicCache, DynamicLayer
        except ImportError:
            return False
        return (type(cache) is DynamicCache and bool(getattr(cache, "layers", None))
                and all(type(layer) is DynamicLayer for layer in cache.layers))

    def _keep(self, cache: Any, live: list[tuple[_Request, list[int]]], width: int,
              replies: list[list[int]]) -> None:
        """Store each row's prompt and reply tokens with their cache (the next turn's prompt starts so)."""
        store = self._prefix
        if store is None:
            return
        if not self._reusable(cache):
            self._prefix = None  # once: this model's cache layout does not allow reuse
            _log.info("hf model %r: its key/value cache (%s) cannot be cut and reused; every prompt is "
                      "computed whole", self.config.name, type(cache).__name__)
            return
        length = cache.get_seq_length()
        for row, ((_, ids), new) in enumerate(zip(live, replies)):
            pad = width - len(ids)
            tokens = list(ids) + new
            stop = min(len(tokens) - 1, length - pad)  # the last token was sampled, never fed back
            if stop < store.min_prefix:
                continue
            rows, nbytes = self._cache_rows(cache, row, pad, pad + stop)
            self._bytes_per_token = self._bytes_per_token or -(-nbytes // stop)
            store.put(tokens[:stop], rows, nbytes)

    def _generate_batch(self, live: list[tuple[_Request, list[int]]], reuse: tuple[Any, int] | None = None) -> None:
        """Generate one batch and deliver its replies. `reuse` = (a stored cache, n): a single prompt whose
        first n tokens are that cache's; only the rest is computed."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        closing, requests = self._closing, [req for req, _ in live]
        not_its_own = _NotItsOwn(requests)

        class StopAbandoned(StoppingCriteria):
            """Ends a row whose episode no longer waits (and every row once the client closes); called at
            every decoding step, it also hands what was not an episode's own time back to it."""

            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                not_its_own.tick()
                stop = closing.is_set()
                return torch.tensor([stop or req.abandoned() for req in requests], device=input_ids.device)

        tok, model = self._tokenizer, self._model
        for req in requests:
            req.begin()
        self.batches.append(len(live))
        width = max(len(ids) for _, ids in live)
        pad = tok.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for _, ids in live], device=model.device)
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for _, ids in live], device=model.device)
        sampling = live[0][0].sampling
        max_new = max(req.sampling.max_tokens for req, _ in live)
        kwargs: dict[str, Any] = {"max_new_tokens": max_new, "eos_token_id": self._eos_ids, "pad_token_id": pad,
                                  "stopping_criteria": StoppingCriteriaList([StopAbandoned()]),
                                  "return_dict_in_generate": True}
        reused = 0
        if reuse is not None:
            cache, reused = reuse
            kwargs["past_key_values"], _ = self._cache_rows(cache, 0, 0, reused)  # a copy: the store's stays
        self.prompt_tokens += sum(len(ids) for _, ids in live)
        self.reused_tokens += reused
        if sampling.temperature > 0:
            torch.manual_seed(stable_seed(*(req.seed for req, _ in live)) & 0xFFFFFFFF)
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with torch.inference_mode():
            out = model.generate(input_ids=input_ids, attention_mask=attention, **kwargs)
        not_its_own.tick(final=True)  # queued on each episode's loop before its reply
        self.preempted_s += not_its_own.preempted
        self.shared_s += not_its_own.shared
        sequences = out.sequences
        self.batch_steps.append(int(sequences.shape[1]) - width)
        replies = [self._reply_tokens(sequences[row, width:].tolist(), req) for row, (req, _) in enumerate(live)]
        now = time.monotonic()
        for (req, ids), (new, finish) in zip(live, replies):
            if self._closing.is_set():
                self._deliver(req, InfraError(f"hf model {self.config.name!r} was shut down"))
                continue
            if req.abandoned():
                self.dropped += 1
                continue
            text = tok.decode(new, skip_special_tokens=True)
            cut = min((i for i in (text.find(s) for s in req.sampling.stop) if i >= 0), default=-1)
            if cut >= 0:  # a stop sequence, as an OpenAI server applies it: excluded from the reply
                text, finish = text[:cut], "stop"
            content, calls = parse_hermes(text) if (req.tools and self.config.tool_parser == "hermes") else (text, [])
            if calls:
                finish = "tool_calls"
            message = Message(role="assistant", content=content, tool_calls=calls or None)
            self._deliver(req, ChatResponse(
                message=message,
                prompt_tokens=len(ids),
                completion_tokens=len(new),
                latency_s=now - req.submitted,
                finish_reason=finish,
                replica="in-process",
            ))
        if not self._closing.is_set():
            try:
                self._keep(out.past_key_values, live, width, [new for new, _ in replies])
            except Exception as exc:  # noqa: BLE001 - reuse is an optimisation: never a reply's failure
                self._prefix = None
                _log.warning("hf model %r: computed prompts cannot be kept for reuse (%r); every prompt is "
                             "computed whole from now on", self.config.name, exc)

    def _reply_tokens(self, generated: list[int], req: _Request) -> tuple[list[int], str]:
        """A row's own reply: cut at its max_tokens and after its first stop token."""
        new = generated[: req.sampling.max_tokens]
        for i, t in enumerate(new):
            if t in self._eos_ids:
                return new[: i + 1], "stop"
        return new, "length"
