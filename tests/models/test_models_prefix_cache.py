"""The prefix store of the transformers backend (pure logic; the backend's reuse with SmolLM2 is tested
in tests/models/test_models_hf_load.py, tier 3)."""

from __future__ import annotations

import pytest

from toolsweep.models.prefix_cache import PrefixStore, common_prefix


@pytest.mark.parametrize("a,b,n", [
    ([1, 2, 3, 4], [1, 2, 3, 4], 4),
    ([1, 2, 3, 4], [1, 2, 9, 4], 2),
    ([1, 2, 3], [1, 2, 3, 4, 5], 3),
    ([7], [8], 0),
    ([], [1], 0),
    (list(range(1000)), list(range(999)) + [5], 999),
    (list(range(1000)), [0] + [-1] * 999, 1),
])
def test_common_prefix(a, b, n):
    assert common_prefix(a, b) == n
    # the store keeps tuples and the tokenizer gives lists: a list against a tuple compares by items
    assert common_prefix(tuple(a), b) == n
    assert common_prefix(a, tuple(b)) == n


def _ids(prefix: int, tail: list[int]) -> list[int]:
    return list(range(prefix)) + tail


def test_lookup_takes_the_longest_shared_prefix_and_leaves_a_token_to_compute():
    store = PrefixStore(budget_bytes=10_000, min_prefix=8)
    store.put(_ids(20, [-1]), "short", 100)
    store.put(_ids(50, [-2, -3]), "long", 100)
    entry, n = store.lookup(_ids(50, [-2, -3, 7, 8]))
    assert (entry.cache, n) == ("long", 52)
    entry, n = store.lookup(_ids(30, [99]))
    assert (entry.cache, n) == ("long", 30)
    # a prompt equal to a stored sequence still computes its last token (the model needs an input)
    entry, n = store.lookup(_ids(50, [-2, -3]))
    assert (entry.cache, n) == ("long", 51)


def test_a_prefix_shorter_than_min_prefix_is_not_reused():
    store = PrefixStore(budget_bytes=10_000, min_prefix=8)
    store.put(_ids(20, []), "a", 100)
    assert store.lookup(_ids(7, [99] * 10)) == (None, 0)
    assert store.lookup(_ids(8, [99] * 10))[1] == 8
    assert store.put(list(range(7)), "too short", 1) is False


def test_a_longer_sequence_supersedes_its_prefixes():
    store = PrefixStore(budget_bytes=10_000, min_prefix=4)
    store.put(_ids(10, []), "turn 1", 100)
    store.put(_ids(10, [50, 51]), "turn 2", 120)
    store.put(_ids(6, [70]), "other", 80)  # shares 6 tokens, is no prefix of turn 2: kept
    assert [e.cache for e in store.entries] == ["turn 2", "other"]
    assert store.nbytes == 200
    # a sequence that a stored one already starts with adds nothing
    assert store.put(_ids(10, [50]), "covered", 10) is False
    assert [e.cache for e in store.entries] == ["turn 2", "other"]


def test_least_recently_used_entries_go_first_within_the_budget():
    store = PrefixStore(budget_bytes=300, min_prefix=4)
    for k in range(3):
        store.put([k] * 10, f"e{k}", 100)
    store.lookup([0] * 10 + [5])  # e0 used: e1 is now the least recently used
    store.put([9] * 10, "e9", 100)
    assert sorted(e.cache for e in store.entries) == ["e0", "e2", "e9"]
    assert store.nbytes <= 300
    store.put([8] * 10, "big", 250)  # needs room for 250: the three others go
    assert [e.cache for e in store.entries] == ["big"]
    assert store.put([6] * 10, "larger than the budget", 301) is False
    assert [e.cache for e in store.entries] == ["big"]


def test_clear_empties_the_store():
    store = PrefixStore(budget_bytes=300, min_prefix=4)
    store.put([1] * 10, "a", 100)
    store.clear()
    assert store.entries == [] and store.lookup([1] * 10) == (None, 0)


def test_new_prompts_are_batched_no_wider_than_the_store_keeps_their_next_turns(tmp_path):
    """A batch of new prompts whose caches evict each other would compute every next turn whole: the
    transformers backend batches at most as many as the store holds (prompt + reply), at least one."""
    from types import SimpleNamespace

    from toolsweep.evaluator.types import Sampling
    from toolsweep.models.config import HFModelConfig
    from toolsweep.models.hf import HFClient

    def client(mib: float) -> HFClient:
        return HFClient(HFModelConfig(name="m", path=str(tmp_path), prefix_cache_mib=mib, max_batch_size=8))

    request = SimpleNamespace(sampling=Sampling(max_tokens=128))
    prompt = [0] * 6400
    store = client(1024)
    assert store._keepable((request, prompt)) == 8  # the cache's size a token is not known yet
    store._bytes_per_token = 46_080  # SmolLM2-135M in float32: 30 layers x 2 x 3 heads x 64 x 4 bytes
    assert store._keepable((request, prompt)) == 3  # 1 GiB over 6,528 tokens of 46,080 bytes
    assert client(1)._keepable((request, prompt)) == 8  # nothing known yet
    tiny = client(1)
    tiny._bytes_per_token = 46_080
    assert tiny._keepable((request, prompt)) == 1  # never zero: a prompt is still generated
    assert client(0)._keepable((request, prompt)) == 8  # no store, no limit


def test_reuse_on_or_off_is_in_a_models_identity_its_budget_is_not(tmp_path):
    """Reusing computed prompts changes the arithmetic (as batching does): a unit computed with reuse is
    another unit than one computed whole. The memory it has is operational: resizing reuses every unit."""
    from toolsweep.cluster.identity import model_identity
    from toolsweep.models.config import HFModelConfig

    def identity(mib: float) -> dict:
        return model_identity(HFModelConfig(name="m", path=str(tmp_path), prefix_cache_mib=mib))

    assert identity(1024) == identity(4096) != identity(0)
    assert identity(1024)["prefix_cache"] is True and "prefix_cache" not in identity(0)
    assert "prefix_cache_mib" not in identity(1024)


def test_a_batch_holds_at_most_max_batch_tokens_of_prompt(tmp_path):
    """A batch's prompts are read in one step with no decoding step between, which the episode guard
    cannot tell from a hang: eight 6,400-token ToolMaze prompts on a loaded CPU outlasted a 300 s guard
    (each first attempt expired). Long prompts go one by one; short ones still share a batch."""
    from types import SimpleNamespace

    from toolsweep.evaluator.types import Sampling
    from toolsweep.models.config import HFModelConfig
    from toolsweep.models.hf import HFClient

    class Recording(HFClient):
        def _generate_batch(self, rows):
            self.batches.append([len(row.ids) for row in rows])

    def request():
        return SimpleNamespace(sampling=Sampling(max_tokens=128), abandoned=lambda: False)

    client = Recording(HFModelConfig(name="m", path=str(tmp_path), prefix_cache_mib=0, max_batch_size=8,
                                     max_batch_tokens=8192))
    pending = [(request(), [i] * 6400) for i in range(3)] + [(request(), [9] * 300) for _ in range(4)]
    while pending:
        client._serve_next(pending)
    # the oldest long prompt with the short ones that fit beside it (generated apart: lengths too far
    # apart to pad together), then each other long prompt alone
    assert client.batches == [[300, 300, 300, 300], [6400], [6400], [6400]]
    short = Recording(HFModelConfig(name="m", path=str(tmp_path), prefix_cache_mib=0, max_batch_size=8))
    pending = [(request(), [i] * 200) for i in range(10)]
    while pending:
        short._serve_next(pending)
    assert short.batches == [[200] * 8, [200] * 2]


def test_prompts_sharing_a_prefix_are_batched_and_next_turns_go_first(tmp_path):
    """Three episodes starting over one tool list share most of their prompts: they are generated
    together (their shared part computed once, so it counts once against max_batch_tokens), not one at a
    time. Before, a prompt sharing half of one already chosen was left out, so concurrent episodes of a
    benchmark never shared a batch. An episode's next turn (covered by a stored prompt) goes first."""
    from types import SimpleNamespace

    from toolsweep.evaluator.types import Sampling
    from toolsweep.models.config import HFModelConfig
    from toolsweep.models.hf import HFClient

    class Recording(HFClient):
        def _generate_rows(self, rows):
            self.batches.append([(row.ids[-1], row.reused) for row in rows])

    def request():
        return SimpleNamespace(sampling=Sampling(max_tokens=128), abandoned=lambda: False)

    tools = list(range(1000, 2000))  # a 1,000-token system prompt and tool list
    client = Recording(HFModelConfig(name="m", path=str(tmp_path), prefix_cache_mib=64, max_batch_size=8,
                                     max_batch_tokens=1500))
    pending = [(request(), tools + [k] * 100) for k in range(3)]
    client._serve_next(pending)
    # 1,100 + 100 + 100 tokens to compute: one batch of the three
    assert client.batches == [[(0, 0), (1, 0), (2, 0)]] and pending == []
    # the same without a store: nothing is shared, 1,100 tokens each, one a batch
    whole = Recording(HFModelConfig(name="m", path=str(tmp_path), prefix_cache_mib=0, max_batch_size=8,
                                    max_batch_tokens=1500))
    pending = [(request(), tools + [k] * 100) for k in range(3)]
    while pending:
        whole._serve_next(pending)
    assert whole.batches == [[(0, 0)], [(1, 0)], [(2, 0)]]
    # episode 1's next turn is covered by a stored prompt: it goes before the older new prompt
    client._prefix.put(tools + [1] * 100 + [7] * 20, "cache", 10)
    pending = [(request(), list(range(5000, 5900)) + [8]), (request(), tools + [1] * 100 + [7] * 20 + [9] * 30)]
    client._serve_next(pending)
    assert client.batches[-1] == [(9, 1120), (8, 0)]
    # chosen together, generated apart: 30 tokens to compute beside 901 would pad the next turn 30-fold
    from toolsweep.models.hf import _Row

    rows = [_Row(None, tools + [0] * 150, "c", 1120), _Row(None, list(range(901))), _Row(None, tools + [2] * 140, "c", 1100)]
    assert [[len(r.ids) for r in group] for group in HFClient._by_length(rows)] == [[1150, 1140], [901]]
    short = [_Row(None, list(range(200))), _Row(None, list(range(6000)))]
    assert [[len(r.ids) for r in group] for group in HFClient._by_length(short)] == [[200], [6000]]
