"""The in-flight cap a run records (manifest and summary `in_flight`) is each model's own: a served model's
from the server that serves it, shared by the models it serves, an endpoint's from its config."""

from __future__ import annotations

from toolsweep.models.config import OpenAIModelConfig, VLLMModelConfig
from toolsweep.models.sizing import in_flight_record


def test_each_model_records_the_cap_of_its_own_server_or_config():
    big = VLLMModelConfig(name="big", path="/models/big")
    small = VLLMModelConfig(name="small", path="/models/small")
    adapter = VLLMModelConfig(name="small-ft", path="/models/small", adapter="/adapters/ft")
    api = OpenAIModelConfig(name="api", base_url="http://127.0.0.1:9/v1", model="x", max_in_flight=4)
    sizing = {
        "big": {"serves": ["big"], "in_flight_per_replica": 48, "replicas": 1, "rule": "KV capacity of big"},
        "small": {"serves": ["small", "small-ft"], "in_flight_per_replica": 6, "replicas": 2,
                  "rule": "KV capacity of small"},
    }
    record = in_flight_record([big, small, adapter, api], sizing)
    assert record["big"] == {"max_in_flight": 48, "rule": "KV capacity of big"}
    # the small server's two replicas hold 12, shared by the two models it serves
    assert record["small"] == record["small-ft"] == {"max_in_flight": 6, "rule": "KV capacity of small"}
    assert record["api"] == {"max_in_flight": 4, "rule": "max_in_flight 4 set in the model's config"}


def test_a_served_model_whose_server_has_not_started_is_sized_later():
    late = VLLMModelConfig(name="late", path="/models/late")
    first = {"first": {"serves": ["first"], "in_flight_per_replica": 8, "replicas": 1, "rule": "KV"}}
    assert in_flight_record([late], first)["late"] == {"max_in_flight": None,
                                                        "rule": "sized when its server starts (a later wave)"}
