"""The paper's prompts (App. B), and the two the paper leaves unstated (ReAct, final answer).

Direct: verbatim, the paper's escaped quotes removed. CoT: verbatim up to the paper's "...", with the
tool list's brackets restored where the PDF extraction garbled them; the rest (a second worked example,
the query and tool list, the reply format) follows the authors' public script as described in spec
§3.3. ReAct and the answer phase are not given in the paper; their texts are spec §3.5 and §3.6.
Tools are rendered as the authors do: Python `str()` of a list of dicts holding only the fields a model
may see (parent tool name, parameters, tool name, description, API name, domain name).
"""

from __future__ import annotations

from typing import Any, Iterable

DIRECT_PROMPT = """Given the tool list:
{tools}

Please solve the query with help of these tools if necessary:
{query}

Please select proper tools and, provide me proper parameters to call it.
If you need outputs from previous tools, use a placeholder '<results from tool xxx>'. Please respond in the following json format:

```json
{{
 "tool list": [
 {{"tool name": [tool name],
 "tool description": [tool description],
 "required_parameters": [{{"name": xxx, "value": xxx}}, {{"name": xxx, "value": xxx}}, ...],
 "optional_parameters": [{{"name": xxx, "value": xxx}}, ...],
 "API name": [API name],
 "domain name":[domain name],
 "parent tool name":[parent tool name]}},
 ...
 ]
}}
```"""

COT_PROMPT = """You are a problem solver.

Goal: given a user query and a pool of tools, produce the MINIMAL, CORRECT tool-call trajectory that satisfies the query.

Please think step by step to:
- 1) extract intent, entities, constraints, required outputs,
- 2) shortlist feasible tools (match inputs\u2192outputs),
- 3) design a trajectory (sequential or parallel),
- 4) compute arguments with correct types/formats/units,
- 5) check dependencies and stop criteria.

Here are some examples:

Query: Schedule dinner with Alice at 19:00\u201321:00, 2025-8-19 in San Jose at a vegan place; invite alice@example.com.

Tools: [ {{ "tool name": "Calendar: create_calendar_event", "tool description": "Create an event; emails participants.",
 "required_parameters": [ {{ "name": "title", "type": "string", "default": "set up a meeting", "description": "The title of the event", }},
 {{ "name": "start_time", "type": "string", "default": "2025-8-19 19:00", "description": "The start time of the event", }},
 {{ "name": "end_time", "type": "string", "default": "2025-8-19 21:00", "description": "The end time of the event", }},
 {{ "name": "participants", "type": "list<email>", "default": ["alice@example.com"], "description": "The participants of the event", }} ],
 "optional_parameters": [ {{ "name": "location", "type": "str", "default": "San Jose", "description": "The location of the event", }} ],
 "API name": "create_calendar_event", "domain name": "Travel", "parent tool name": "Calendar" }},
 {{ "tool name": "Restaurant: get_all_restaurants_in_city", "tool description": "List restaurant names in a city.",
 "required_parameters": [ {{ "name": "city", "type": "str", "default": "San Jose", "description": "The city of the event", }} ],
 "optional_parameters": [], "API name": "get_all_restaurants_in_city", "domain name": "Travel", "parent tool name": "Restaurant" }},
 {{ "tool name": "Restaurant: check_restaurant_opening_hours", "tool description": "Return operating hours; use to verify time.",
 "required_parameters": [ {{ "name": "restaurant_names", "type": "list<str>", "default": ["restaurant1", "restaurant2"], "description": "The names of the restaurants", }} ],
 "optional_parameters": [], "API name": "check_restaurant_opening_hours", "domain name": "Travel", "parent tool name": "Restaurant" }},
 ...
]

thought: Let's think step by step. First I need to find a vegan restaurant in San Jose. I need to call tool Restaurant: get_all_restaurants_in_city with city=San Jose. After I identify the vegan restaurant, I need to check if the restaurant is open that time. I need to call tool Restaurant: check_restaurant_opening_hours with restaurant_names=["vegan restaurant"]. Finally, I need to set up this dinner on my calendar and send to Alice. I need to call tool Calendar: create_calendar_event with title="Dinner with Alice", start_time="2025-8-19 19:00", end_time="2025-8-19 21:00", participants=["alice@example.com"], location="San Jose".
tool list: [
{{"tool name": "Restaurant: get_all_restaurants_in_city", "tool description": "List restaurant names in a city.", "required_parameters": [{{"name": "city", "value": "San Jose"}}], "optional_parameters": [], "API name": "get_all_restaurants_in_city", "domain name": "Travel", "parent tool name": "Restaurant"}},
{{"tool name": "Restaurant: check_restaurant_opening_hours", "tool description": "Return operating hours; use to verify time.", "required_parameters": [{{"name": "restaurant_names", "value": ["vegan restaurant"]}}], "optional_parameters": [], "API name": "check_restaurant_opening_hours", "domain name": "Travel", "parent tool name": "Restaurant"}},
{{"tool name": "Calendar: create_calendar_event", "tool description": "Create an event; emails participants.", "required_parameters": [{{"name": "title", "value": "Dinner with Alice"}}, {{"name": "start_time", "value": "2025-8-19 19:00"}}, {{"name": "end_time", "value": "2025-8-19 21:00"}}, {{"name": "participants", "value": ["alice@example.com"]}}], "optional_parameters": [{{"name": "location", "value": "San Jose"}}], "API name": "create_calendar_event", "domain name": "Travel", "parent tool name": "Calendar"}}
]

Query: I am planning a trip to San Francisco from 2025-8-20 to 2025-8-26. I need to know the weather there during the trip. Also, please check the air quality as well.

Tools: [ {{ "tool name": "Weather: get_weather_forecast", "tool description": "Get the weather forecast of a location for a date range.",
 "required_parameters": [ {{ "name": "location", "type": "str", "default": "San Francisco", "description": "The location", }},
 {{ "name": "start_date", "type": "str", "default": "2025-8-20", "description": "The first day", }},
 {{ "name": "end_date", "type": "str", "default": "2025-8-26", "description": "The last day", }} ],
 "optional_parameters": [], "API name": "get_weather_forecast", "domain name": "Weather", "parent tool name": "Weather" }},
 {{ "tool name": "Air Quality: get_air_quality", "tool description": "Get the air quality of a location for a date range.",
 "required_parameters": [ {{ "name": "location", "type": "str", "default": "San Francisco", "description": "The location", }},
 {{ "name": "start_date", "type": "str", "default": "2025-8-20", "description": "The first day", }},
 {{ "name": "end_date", "type": "str", "default": "2025-8-26", "description": "The last day", }} ],
 "optional_parameters": [], "API name": "get_air_quality", "domain name": "Weather", "parent tool name": "Air Quality" }},
 ...
]

thought: Let's think step by step. The two requests are independent, so the tools can be called in parallel. I need to call tool Weather: get_weather_forecast with location=San Francisco, start_date=2025-8-20, end_date=2025-8-26. I also need to call tool Air Quality: get_air_quality with location=San Francisco, start_date=2025-8-20, end_date=2025-8-26.
tool list: [
{{"tool name": "Weather: get_weather_forecast", "tool description": "Get the weather forecast of a location for a date range.", "required_parameters": [{{"name": "location", "value": "San Francisco"}}, {{"name": "start_date", "value": "2025-8-20"}}, {{"name": "end_date", "value": "2025-8-26"}}], "optional_parameters": [], "API name": "get_weather_forecast", "domain name": "Weather", "parent tool name": "Weather"}},
{{"tool name": "Air Quality: get_air_quality", "tool description": "Get the air quality of a location for a date range.", "required_parameters": [{{"name": "location", "value": "San Francisco"}}, {{"name": "start_date", "value": "2025-8-20"}}, {{"name": "end_date", "value": "2025-8-26"}}], "optional_parameters": [], "API name": "get_air_quality", "domain name": "Weather", "parent tool name": "Air Quality"}}
]

Here is the query:
{query}

Here is the tool list:
{tools}

If you need outputs from previous tools, use a placeholder '<results from tool xxx>'. Please respond in the following json format:

```json
{{
 "thought": "Chain-of-Thought reasoning",
 "tool list": [
 {{"tool name": [tool name],
 "tool description": [tool description],
 "required_parameters": [{{"name": xxx, "value": xxx}}, ...],
 "optional_parameters": [{{"name": xxx, "value": xxx}}, ...],
 "API name": [API name],
 "domain name":[domain name],
 "parent tool name":[parent tool name]}},
 ...
 ]
}}
```"""

REACT_PROMPT = """You solve the user's query by calling tools, one tool per step, in this format:
Thought <i>: <reason about what to do next>
Action <i>: Tool[{{"tool name": ..., "required_parameters": [{{"name": ..., "value": ...}}], "optional_parameters": [...]}}]  or  Finish[<final answer to the user>]
Observation <i>: <tool result, written by the environment>
Use only tools from the list. Copy values from earlier observations when a later tool needs them. When you can answer, use Finish[...].
Available tools:
 {tools}
Query: {query}"""

REACT_TOOLS_UPDATE = "Available tools for the next step:\n {tools}"

ANSWER_PROMPT = """User query:
{query}

The following tool calls were executed, with their results:
{calls}

Write the final answer to the user. Report the concrete values (names, numbers, identifiers, dates) returned by the tools for every part of the query."""

NATIVE_SYSTEM = (
    "You are a helpful assistant with access to tools. Call the tools needed to solve the user's "
    "query (several independent calls may be made at once), then answer the user with the concrete "
    "values the tools returned."
)

FORMAT_RETRY = (
    "Your reply could not be parsed ({error}). Please respond again in the required json format, "
    "with a \"tool list\"."
)


def render_tools(visible: Iterable[dict[str, Any]]) -> str:
    """The authors' rendering: `str(list_of_dicts)`."""
    return str(list(visible))


def render_calls(calls: list[tuple[str, dict[str, Any], str]], max_chars: int = 4000) -> str:
    """Executed calls for the answer phase: name, arguments, output (long outputs truncated)."""
    parts = []
    for i, (name, args, output) in enumerate(calls, 1):
        out = output if len(output) <= max_chars else output[:max_chars] + " ...(truncated)"
        parts.append(f"{i}. {name} {args}\nResult: {out}")
    return "\n\n".join(parts) if parts else "(no tool calls)"
