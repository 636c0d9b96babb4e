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
about a minute of a CPU core every turn. Prompts that reuse stored caches are still batched together
(each row's stored part is laid out in one batched cache), and a prefix that several new prompts of a
batch share is computed once for all of them before they are generated together.

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
from toolsweep.models.hf_attention import use_grouped_sdpa
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


@dataclass
class _Row:
    """A prompt of a batch: its first `reused` tokens are those of `cache`, a stored cache (None: none)."""

    req: _Request
    ids: list[int]
    cache: Any = None
    reused: int = 0

    @property
    def fresh(self) -> int:
        """Tokens of the prompt to compute."""
        return len(self.ids) - self.reused


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
        self.grouped_attention = False  # toolsweep.models.hf_attention in use (set when the model loads)
        self.prompt_tokens = 0  # prompt tokens of every generated request
        self.reused_tokens = 0  # of those, taken from the prefix store instead of computed
        self.prefilled_tokens = 0  # computed once for several prompts of a batch (then reused by each)

    @property
    def computed_tokens(self) -> int:
        """Prompt tokens this client computed: what each prompt did not reuse, and the shared prefixes."""
        return self.prompt_tokens - self.reused_tokens + self.prefilled_tokens

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
        self.grouped_attention = use_grouped_sdpa(model)  # padded batches without a cache copy a step
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
        """Generate the next batch and take it out of `pending`.

        Episodes under way go first (a prompt that a stored one covers for at least half its tokens: an
        episode's next turn, cheap, and it finishes episodes already started before new ones begin), then
        the oldest. A batch has one sampling mode, no more rows than the store can keep for their next
        turns (a batch whose caches evicted each other would compute every next turn whole), and no more
        than `max_batch_tokens` to compute (the first always goes). A prompt's tokens to compute are
        those after the longest prefix it shares with a stored prompt or with a prompt already in the
        batch: that shared part is computed once for the batch (`_prefill_shared`)."""
        rows = [self._row(req, ids) for req, ids in pending]
        order = sorted(range(len(rows)), key=lambda i: (2 * rows[i].reused < len(rows[i].ids), i))
        first = rows[order[0]]
        mode = (first.req.sampling.temperature, first.req.sampling.top_p)
        limit = min(self.config.max_batch_size, self._keepable((first.req, first.ids)))
        chosen: list[_Row] = []
        tokens = 0
        for row in (rows[i] for i in order):
            if len(chosen) >= limit:
                break
            if (row.req.sampling.temperature, row.req.sampling.top_p) != mode:
                continue
            cost = len(row.ids) - max([row.reused] + [self._shareable(row.ids, other.ids) for other in chosen])
            if chosen and tokens + cost > self.config.max_batch_tokens:
                continue
            chosen.append(row)
            tokens += cost
        taken = {id(row.req) for row in chosen}
        pending[:] = [(req, ids) for req, ids in pending if id(req) not in taken]
        self._guarded([(row.req, row.ids) for row in chosen], lambda: self._generate_rows(chosen))

    def _row(self, req: _Request, ids: list[int]) -> _Row:
        """A prompt with the longest stored prefix it starts with (none without a store)."""
        if self._prefix is None:
            return _Row(req, ids)
        entry, n = self._prefix.lookup(ids)
        return _Row(req, ids) if entry is None else _Row(req, ids, entry.cache, n)

    def _shareable(self, ids: list[int], other: list[int]) -> int:
        """How many of `ids`' first tokens a prefix computed once for `ids` and `other` would cover: their
        common prefix, leaving each a token to compute; 0 without a store or below its minimum."""
        if self._prefix is None:
            return 0
        n = min(common_prefix(ids, other), len(ids) - 1, len(other) - 1)
        return n if n >= self._prefix.min_prefix else 0

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

    def _generate_rows(self, rows: list[_Row]) -> None:
        """Compute once what the rows share beyond the store, then generate them in batches of rows whose
        lengths pad well together."""
        if self._prefix is not None and len(rows) > 1:
            requests = [row.req for row in rows]
            for req in requests:
                req.begin()
            not_its_own = _NotItsOwn(requests)
            self._prefill_shared(rows)
            not_its_own.tick(final=True)  # each episode's share of the prefix computed for all of them
            self.preempted_s += not_its_own.preempted
            self.shared_s += not_its_own.shared
            rows = [self._row(row.req, row.ids) for row in rows]
        for batch in self._by_length(rows):
            live = [row for row in batch if not row.req.abandoned()]
            self.dropped += len(batch) - len(live)
            if live:
                self._generate_batch(live)

    @staticmethod
    def _by_length(rows: list[_Row]) -> list[list[_Row]]:
        """Rows grouped so that padding costs little: every row of a batch is as long as the longest, and
        computes as many new tokens as the one with most to compute. A 200-token chat beside a 6k-token
        tool list, or an episode's next turn beside a prompt computed whole, go in separate batches."""
        def split(group: list[_Row], size: Callable[[_Row], int]) -> list[list[_Row]]:
            group = sorted(group, key=size)
            parts: list[list[_Row]] = []
            for row in group:
                if parts and size(row) <= 2 * size(parts[-1][0]) + 64:
                    parts[-1].append(row)
                else:
                    parts.append([row])
            return parts

        return [part for by_len in split(rows, lambda r: len(r.ids)) for part in split(by_len, lambda r: r.fresh)]

    # -- the key/value caches the prefix store holds -------------------------------------------
    def _prefill_shared(self, rows: list[_Row]) -> None:
        """Compute once, into the store, each prefix that rows of a batch share beyond what the store
        already holds: episodes that start over one tool list compute it once, not once each, and are
        then generated together. A failure turns reuse off (the rows are then computed whole)."""
        try:
            for i, row in enumerate(rows):
                shared = max((self._shareable(row.ids, other.ids) for other in rows[:i]), default=0)
                if self._prefix is None or shared - self._prefix.lookup(row.ids)[1] < self._prefix.min_prefix:
                    continue
                self._prefill(row.ids[:shared])
        except Exception as exc:  # noqa: BLE001 - reuse is an optimisation: never a reply's failure
            self._prefix = None
            _log.warning("hf model %r: shared prompt prefixes cannot be computed for reuse (%r); every prompt "
                         "is computed whole from now on", self.config.name, exc)

    def _prefill(self, ids: list[int]) -> None:
        """Compute the cache of `ids` (from the longest stored prefix of it) and store it."""
        import torch

        store = self._prefix
        assert store is not None
        entry, n = store.lookup(ids)
        past = self._cache_rows(entry.cache, 0, range(n))[0] if entry is not None else None
        with torch.inference_mode():
            out = self._model(input_ids=torch.tensor([ids[n:]], device=self._model.device), past_key_values=past,
                              use_cache=True, logits_to_keep=1)
        cache = out.past_key_values
        if not self._reusable(cache):
            self._no_reuse(cache)
            return
        self.prefilled_tokens += len(ids) - n
        nbytes = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
        self._bytes_per_token = self._bytes_per_token or -(-nbytes // len(ids))
        store.put(ids, cache, nbytes)

    def _cache_rows(self, cache: Any, row: int, positions: range | list[int]) -> tuple[Any, int]:
        """A new single-row cache holding the given positions of `row` of `cache`, and its size."""
        import torch
        from transformers import DynamicCache

        if isinstance(positions, range) and positions.step == 1:
            pick = lambda t: t[row:row + 1, :, positions.start:positions.stop].clone()  # noqa: E731
        else:
            index = torch.tensor(list(positions), dtype=torch.long, device=cache.layers[0].keys.device)
            pick = lambda t: t[row:row + 1].index_select(2, index)  # noqa: E731
        data = [(pick(layer.keys), pick(layer.values)) for layer in cache.layers]
        nbytes = sum(k.nbytes + v.nbytes for k, v in data)
        return DynamicCache(ddp_cache_data=data, config=self._model.config), nbytes

    def _batched_cache(self, rows: list[_Row], width: int) -> Any:
        """One cache for a batch: each row's stored positions at the end of `width`, masked zeros before
        them (a row with nothing stored is all zeros: its whole prompt is computed)."""
        import torch
        from transformers import DynamicCache

        template = next(row.cache for row in rows if row.cache is not None)
        data = []
        for i, layer in enumerate(template.layers):
            pair = []
            for kind in ("keys", "values"):
                like = getattr(layer, kind)
                columns = []
                for row in rows:
                    parts = [getattr(row.cache.layers[i], kind)[:, :, :row.reused]] if row.reused else []
                    if row.reused < width:
                        parts.insert(0, like.new_zeros((1, like.shape[1], width - row.reused, like.shape[3])))
                    columns.extend(parts if len(parts) == 1 else [torch.cat(parts, dim=2)])
                pair.append(torch.cat(columns, dim=0))
            data.append(tuple(pair))
        return DynamicCache(ddp_cache_data=data, config=self._model.config)

    def _reusable(self, cache: Any) -> bool:
        """Only full-attention key/value layers can be cut at any position and reused; a sliding-window,
        linear-attention or recurrent layer cannot (such models compute every prompt whole)."""
        try:
            from transformers.cache_utils import DynamicCache, DynamicLayer
        except ImportError:
            return False
        return (type(cache) is DynamicCache and bool(getattr(cache, "layers", None))
                and all(type(layer) is DynamicLayer for layer in cache.layers))

    def _no_reuse(self, cache: Any) -> None:
        self._prefix = None  # once: this model's cache layout does not allow reuse
        _log.info("hf model %r: its key/value cache (%s) cannot be cut and reused; every prompt is "
                  "computed whole", self.config.name, type(cache).__name__)

    def _keep(self, cache: Any, rows: list[_Row], cached: int, fresh: int, replies: list[list[int]]) -> None:
        """Store each row's prompt and reply tokens with their cache (the next turn's prompt starts so).
        A row's positions in a batch of `cached` stored + `fresh` computed columns: its stored part ends
        at `cached`, its computed part at `cached + fresh`, its reply follows."""
        store = self._prefix
        if store is None:
            return
        if not self._reusable(cache):
            self._no_reuse(cache)
            return
        length = cache.get_seq_length()
        for i, (row, new) in enumerate(zip(rows, replies)):
            tokens = list(row.ids) + new
            positions = [*range(cached - row.reused, cached),
                         *range(cached + fresh - row.fresh, min(cached + fresh + len(new) - 1, length))]
            if len(positions) < store.min_prefix:
                continue
            kept, nbytes = self._cache_rows(cache, i, positions)
            self._bytes_per_token = self._bytes_per_token or -(-nbytes // len(positions))
            store.put(tokens[:len(positions)], kept, nbytes)

    def _generate_batch(self, rows: list[_Row]) -> None:
        """Generate one batch and deliver its replies. A row's first `reused` tokens come from its stored
        cache and only the rest is computed. Layout of a row: [pad][stored][pad][computed], so that every
        row's stored part ends where the batch's cache does and its computed part where the prompt does;
        positions follow the attention mask, so padding in the middle changes nothing."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        closing, requests = self._closing, [row.req for row in rows]
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
        self.batches.append(len(rows))
        cached, fresh = max(row.reused for row in rows), max(row.fresh for row in rows)
        width = cached + fresh
        pad = tok.pad_token_id
        input_ids = torch.tensor([[pad] * (cached - r.reused) + r.ids[:r.reused] + [pad] * (fresh - r.fresh)
                                  + r.ids[r.reused:] for r in rows], device=model.device)
        attention = torch.tensor([[0] * (cached - r.reused) + [1] * r.reused + [0] * (fresh - r.fresh)
                                  + [1] * r.fresh for r in rows], device=model.device)
        sampling = rows[0].req.sampling
        max_new = max(row.req.sampling.max_tokens for row in rows)
        kwargs: dict[str, Any] = {"max_new_tokens": max_new, "eos_token_id": self._eos_ids, "pad_token_id": pad,
                                  "stopping_criteria": StoppingCriteriaList([StopAbandoned()]),
                                  "return_dict_in_generate": True}
        if cached:
            kwargs["past_key_values"] = self._batched_cache(rows, cached)  # copies: the store's stay
        self.prompt_tokens += sum(len(row.ids) for row in rows)
        self.reused_tokens += sum(row.reused for row in rows)
        if sampling.temperature > 0:
            torch.manual_seed(stable_seed(*(row.req.seed for row in rows)) & 0xFFFFFFFF)
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
        replies = [self._reply_tokens(sequences[i, width:].tolist(), row.req) for i, row in enumerate(rows)]
        now = time.monotonic()
        for row, (new, finish) in zip(rows, replies):
            req = row.req
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
                prompt_tokens=len(row.ids),
                completion_tokens=len(new),
                latency_s=now - req.submitted,
                finish_reason=finish,
                replica="in-process",
            ))
        if not self._closing.is_set():
            try:
                self._keep(out.past_key_values, rows, cached, fresh, [new for new, _ in replies])
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
