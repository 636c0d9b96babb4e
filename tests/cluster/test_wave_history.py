"""summary.json's `waves` covers every invocation of a run directory: a sweep killed in its second wave
and resumed lists the killed invocation's waves (the first whole, the second cut short) before the
resumed one's; before, only the resumed invocation's waves were listed."""

from __future__ import annotations

import json

from toolsweep.cluster.waves import WAVE_HISTORY, WaveRecord, WaveTimeline, accumulated_waves, save_invocation


def timeline(began: float, *records: WaveRecord) -> WaveTimeline:
    return WaveTimeline(records=list(records), began_at=began)


def test_two_invocations_are_listed_in_order_with_the_cut_wave_marked(tmp_path):
    first = timeline(100.0, WaveRecord(1, ["m1"], units=8, done=8, started_at=100, up_at=110, serving_at=112,
                                       ended_at=140, stopped_at=142),
                     WaveRecord(2, ["m2"], units=8, started_at=142, up_at=150, serving_at=152))  # killed here
    second = timeline(500.0, WaveRecord(2, ["m2"], units=5, done=5, started_at=500, up_at=508, serving_at=510,
                                        ended_at=530, stopped_at=531),
                      WaveRecord(3, ["m3"], units=8, done=8, started_at=531, up_at=541, serving_at=543,
                                 ended_at=570, stopped_at=572))
    save_invocation(tmp_path, "b", second)  # the file's order is not the invocations' order
    save_invocation(tmp_path, "a", first)
    waves = accumulated_waves(tmp_path)
    assert [(w["invocation"], w["wave"], w["done"], w["ended"]) for w in waves["waves"]] == [
        (1, 1, 8, True), (1, 2, 0, False), (2, 2, 5, True), (2, 3, 8, True)]
    assert [inv["waves"] for inv in waves["invocations"]] == [[1, 2], [2, 3]]
    assert waves["switch_s"] == [12.0, 13.0]  # 140 -> 152 in the first, 530 -> 543 in the second
    # idle: only the second invocation ended its waves: span 70 s, serving 20 + 27 s
    assert waves["idle_s"] == 23.0 and waves["idle_share"] == round(23 / 70, 4)


def test_an_invocation_rewrites_only_its_own_entry(tmp_path):
    t = timeline(1.0, WaveRecord(1, ["m1"], units=4, started_at=1, serving_at=2))
    save_invocation(tmp_path, "a", t)
    save_invocation(tmp_path, "b", timeline(9.0, WaveRecord(2, ["m2"], units=4, started_at=9, serving_at=10)))
    t.records[0].done, t.records[0].ended_at = 4, 5.0
    save_invocation(tmp_path, "a", t)
    history = json.loads((tmp_path / WAVE_HISTORY).read_text())
    assert sorted(h["invocation"] for h in history) == ["a", "b"]
    waves = accumulated_waves(tmp_path)["waves"]
    assert [(w["wave"], w["done"], w["ended"]) for w in waves] == [(1, 4, True), (2, 0, False)]


def test_no_history_is_no_waves(tmp_path):
    assert accumulated_waves(tmp_path) is None
    (tmp_path / WAVE_HISTORY).write_text("[{\"invoc")  # cut mid-write
    assert accumulated_waves(tmp_path) is None
