"""The 22 scenario categories (Tab. 11), the six source styles (Tab. 10) and their joint allocation.

Each domain is a compact "pack": the data nouns its tools act on, the target entities its queries are
about, the deliverable, the ToolBench API name, and the objects its photos show. Tool names and
descriptions are composed from these by `tools.py` in the naming convention of the source style, so
every domain defines well over 12 tools, 6 workflow shapes and 20 distractor templates.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCES: tuple[str, ...] = ("FrameThinker", "GAIA", "GTA", "OpenCUA", "ToolBench", "RealWorld")

# Tab. 10: source -> (total, avg steps, bins 1-10 / 11-20 / >20)
SOURCE_STEPS: dict[str, tuple[int, float, tuple[int, int, int]]] = {
    "FrameThinker": (100, 7.73, (90, 10, 0)),
    "GAIA": (163, 14.85, (18, 130, 15)),
    "GTA": (226, 10.92, (106, 120, 0)),
    "OpenCUA": (100, 12.08, (39, 59, 2)),
    "ToolBench": (150, 13.47, (11, 134, 5)),
    "RealWorld": (370, 13.37, (170, 137, 63)),
}

# §2.4: modality quotas per source (text, image, video) -> 673 / 336 / 100.
SOURCE_MODALITY: dict[str, tuple[int, int, int]] = {
    "FrameThinker": (0, 0, 100),
    "GAIA": (153, 10, 0),
    "GTA": (0, 226, 0),
    "OpenCUA": (0, 100, 0),
    "ToolBench": (150, 0, 0),
    "RealWorld": (370, 0, 0),
}

# Tool naming convention per source style.
SOURCE_STYLE: dict[str, str] = {
    "FrameThinker": "snake",
    "GAIA": "camel",
    "GTA": "camel",
    "OpenCUA": "snake",
    "ToolBench": "api",
    "RealWorld": "snake",
}

SYSTEM_PROMPTS: dict[str, str] = {
    "FrameThinker": "You are a video-understanding agent that analyses video content with the provided frame tools.",
    "GAIA": "You are a general AI assistant that answers research questions by calling the provided tools.",
    "GTA": "You are a multimodal assistant that solves real-world tasks about the user's images with the provided tools.",
    "OpenCUA": "You are a computer-use agent operating a desktop GUI through the provided actions.",
    "ToolBench": "You are an API agent that fulfils user requests by calling the provided RapidAPI tools.",
    "RealWorld": "You are a productivity agent deployed on an online agent platform; you complete user requests with the provided tools.",
}

PERCEPTION_SENTENCE = (
    "All perception of file contents (reading text, counting, detecting, describing) must be performed "
    "with the provided tools; do not rely on your own inspection of the files."
)


@dataclass(frozen=True)
class Domain:
    """One scenario category with its per-source counts (§2.5) and its template vocabulary."""

    name: str
    counts: tuple[int, int, int, int, int, int]  # FT, GAIA, GTA, CUA, TB, RW
    nouns: tuple[str, ...]  # data objects the tools fetch/process (>= 6)
    entities: tuple[str, ...]  # query targets (goal slots)
    entity_param: str  # how tools call the target
    deliverable: str
    api: str  # ToolBench-style API suffix
    objects: tuple[str, ...]  # things visible in photos / frames
    metric: str  # what the compute stage calculates

    @property
    def total(self) -> int:
        return sum(self.counts)

    @property
    def metrics(self) -> tuple[str, ...]:
        """Every metric a base of this domain may compute (the first is the domain's own)."""
        return (self.metric, *VOCABULARY_ALTERNATIVES[self.name][0])

    @property
    def deliverables(self) -> tuple[str, ...]:
        """Every deliverable a base of this domain may produce (the first is the domain's own)."""
        return (self.deliverable, *VOCABULARY_ALTERNATIVES[self.name][1])


DOMAINS: tuple[Domain, ...] = (
    Domain("Software Development", (0, 5, 0, 0, 10, 28),
           ("repository", "commit log", "test report", "lint result", "dependency graph", "issue list", "coverage report"),
           ("toolsweep-core", "payments-api", "auth-service", "web-frontend", "data-pipeline", "mobile-app", "search-indexer", "billing-worker"),
           "project", "release readiness report", "github_api", ("laptop", "monitor", "keyboard"), "defect density"),
    Domain("System Operations & Web Engineering", (0, 0, 0, 60, 0, 46),
           ("service status", "server log", "deployment record", "alert history", "latency metric", "config file", "uptime record"),
           ("nginx-gateway", "postgres-primary", "redis-cache", "kafka-broker", "auth-proxy", "cdn-edge", "cron-runner", "metrics-collector"),
           "service", "incident summary", "ops_monitor", ("server rack", "status light", "cable"), "error rate"),
    Domain("Mathematical Reasoning", (0, 23, 15, 0, 0, 0),
           ("equation", "integral", "matrix", "number sequence", "geometry figure", "probability table", "function graph"),
           ("Problem 3.2", "Problem 4.7", "Exercise 12", "Exercise 19", "Theorem 5", "Lemma 2", "Puzzle 8", "Problem 6.1"),
           "problem", "worked solution sheet", "math_solver", ("equation card", "dice", "ruler"), "solution value"),
    Domain("Statistical Analysis", (0, 30, 8, 0, 0, 23),
           ("survey dataset", "sample distribution", "regression fit", "census table", "time series", "variance estimate", "confidence interval"),
           ("Ohio", "Texas", "Oregon", "Florida", "Nevada", "Maine", "Utah", "Iowa"),
           "region", "statistical brief", "stats_hub", ("chart printout", "bar chart", "tally sheet"), "weighted mean"),
    Domain("Spreadsheet Manipulation", (0, 0, 0, 5, 0, 58),
           ("worksheet", "cell range", "pivot table", "formula column", "chart series", "named range", "sheet summary"),
           ("Q3_sales.xlsx", "inventory_2024.xlsx", "payroll_may.xlsx", "budget_plan.xlsx", "leads_export.xlsx", "grades_term2.xlsx", "expenses_jan.xlsx", "orders_week7.xlsx"),
           "workbook", "updated workbook", "sheets_api", ("printed sheet", "sticky note", "calculator"), "column total"),
    Domain("Financial Modeling", (0, 15, 0, 0, 25, 30),
           ("stock quote", "earnings report", "balance sheet", "dividend history", "analyst rating", "price target", "cash flow statement"),
           ("AAPL", "MSFT", "NVDA", "AMZN", "TSLA", "GOOGL", "META", "NFLX"),
           "ticker", "investment summary report", "morning_star", ("stock chart", "ticker screen", "newspaper"), "valuation multiple"),
    Domain("Expense & Budget Management", (0, 0, 30, 0, 0, 25),
           ("receipt", "menu", "bill", "expense claim", "budget line", "reimbursement policy", "card statement"),
           ("Team Offsite", "Client Dinner", "Q2 Travel", "Office Supplies", "Conference Trip", "Marketing Launch", "Holiday Party", "Training Week"),
           "budget", "itemized expense report", "expense_tracker", ("beer bottle", "receipt", "plate"), "total with charges"),
    Domain("Market Research", (0, 10, 5, 0, 14, 30),
           ("market report", "competitor profile", "pricing page", "customer review", "trend index", "market share table", "survey summary"),
           ("smart speakers", "e-bikes", "plant-based milk", "robot vacuums", "meal kits", "VR headsets", "solar panels", "fitness trackers"),
           "market", "market landscape brief", "market_insights", ("product box", "store shelf", "price tag"), "market growth rate"),
    Domain("Document & Legal Analysis", (0, 8, 0, 0, 0, 24),
           ("contract clause", "statute", "case summary", "regulation text", "compliance checklist", "court filing", "policy document"),
           ("GDPR", "CCPA", "HIPAA", "SOX", "PIPEDA", "LGPD", "DMCA", "FERPA"),
           "regulation", "legal comparison memo", "legal_docs", ("contract page", "stamp", "signature line"), "compliance score"),
    Domain("Art & Aesthetic Analysis", (5, 0, 40, 0, 0, 18),
           ("artwork record", "style profile", "color palette", "brushwork analysis", "provenance entry", "exhibition history", "critic review"),
           ("Water Lilies", "The Starry Night", "Girl with a Pearl Earring", "The Great Wave", "Composition VIII", "The Kiss", "Nighthawks", "The Persistence of Memory"),
           "artwork", "aesthetic analysis report", "art_archive", ("painting", "frame", "sculpture"), "style similarity"),
    Domain("Scientific & Nature Exploration", (0, 32, 25, 0, 0, 0),
           ("species record", "habitat survey", "observation log", "taxonomy entry", "climate record", "sighting map", "research paper"),
           ("Amphiprion ocellaris", "Pterois volitans", "Sus scrofa", "Python bivittatus", "Dreissena polymorpha", "Lithobates catesbeianus", "Carassius auratus", "Myocastor coypus"),
           "species", "field study report", "usgs_nas", ("bird", "fish", "leaf"), "occurrence density"),
    Domain("Graphic Design", (0, 0, 40, 10, 0, 20),
           ("layout grid", "font pairing", "brand guideline", "color swatch", "logo asset", "mockup", "typography scale"),
           ("Spring Campaign", "Cafe Menu", "Tech Meetup Poster", "Book Cover", "Charity Flyer", "App Splash", "Wedding Invite", "Product Label"),
           "design", "design review sheet", "design_studio", ("poster", "logo", "text block"), "contrast ratio"),
    Domain("Narrative & Emotional Analysis", (70, 0, 8, 0, 0, 0),
           ("scene transcript", "character arc", "emotion timeline", "dialogue log", "plot summary", "mood profile", "shot list"),
           ("the girl in red", "the old fisherman", "the detective", "the young boy", "the bride", "the pianist", "the soldier", "the nurse"),
           "character", "emotional arc analysis", "story_lens", ("person", "car", "dog"), "emotion intensity"),
    Domain("Professional Communication", (0, 0, 0, 15, 7, 26),
           ("email thread", "meeting note", "calendar slot", "contact card", "message draft", "translation", "agenda"),
           ("Acme Corp", "Globex", "Initech", "Umbrella Ltd", "Stark Industries", "Wayne Enterprises", "Hooli", "Soylent Co"),
           "client", "follow-up email", "outlook_mail", ("business card", "laptop", "notepad"), "response time"),
    Domain("Information Retrieval", (0, 30, 5, 10, 5, 10),
           ("search result", "encyclopedia entry", "web page", "citation record", "archive record", "news article", "fact sheet"),
           ("Marie Curie", "Alan Turing", "Ada Lovelace", "Nikola Tesla", "Rosalind Franklin", "Grace Hopper", "Katherine Johnson", "Tim Berners-Lee"),
           "person", "fact-checked answer sheet", "wiki_search", ("book", "poster", "newspaper"), "citation count"),
    Domain("Digital Media & Gaming Analytics", (20, 10, 10, 0, 10, 10),
           ("game stats", "store listing", "player review", "match record", "stream metric", "patch note", "leaderboard"),
           ("Elden Ring", "Hades", "Stardew Valley", "Celeste", "Hollow Knight", "Portal 2", "Terraria", "Factorio"),
           "game", "game analytics dashboard", "steam_store", ("controller", "screen", "trophy"), "engagement score"),
    Domain("Creative Storytelling & Writing", (5, 0, 0, 0, 0, 9),
           ("narrative theme", "story outline", "character sheet", "setting note", "chapter draft", "style guide", "plot beat"),
           ("The Lighthouse Keeper", "Winter Orchard", "Glass City", "The Last Ferry", "Copper Moon", "Salt Road", "Paper Birds", "Night Market"),
           "story", "story draft document", "story_forge", ("typewriter", "notebook", "lamp"), "pacing score"),
    Domain("Travel & Itinerary Planning", (0, 0, 5, 0, 25, 8),
           ("flight offer", "hotel listing", "weather forecast", "visa rule", "attraction list", "train timetable", "reservation"),
           ("Lisbon", "Kyoto", "Reykjavik", "Cape Town", "Vancouver", "Marrakesh", "Hanoi", "Santiago"),
           "city", "day-by-day itinerary", "skyscanner", ("suitcase", "map", "ticket"), "trip cost"),
    Domain("Logistics & Supply Chain", (0, 0, 0, 0, 12, 0),
           ("shipment status", "route plan", "inventory level", "carrier quote", "warehouse slot", "customs record", "delivery window"),
           ("PO-4471", "PO-5820", "PO-6193", "PO-7302", "PO-8015", "PO-9146", "PO-1288", "PO-2357"),
           "order", "logistics status report", "shipengine", ("pallet", "box", "truck"), "delivery cost"),
    Domain("Consumer Decision Making", (0, 0, 10, 0, 8, 0),
           ("product listing", "price history", "user rating", "spec sheet", "warranty term", "discount offer", "comparison chart"),
           ("PS5", "iPad Air", "Kindle Paperwhite", "AirPods Pro", "Switch OLED", "Dyson V15", "Instant Pot", "GoPro Hero"),
           "product", "purchase recommendation", "price_compare", ("toy car", "game console", "headphones"), "total price"),
    Domain("Event Planning", (0, 0, 5, 0, 20, 5),
           ("venue listing", "sunrise time", "weather report", "catering quote", "guest list", "reservation", "vendor contract"),
           ("Central Park", "Golden Gate Park", "Hyde Park", "Stanley Park", "Griffith Park", "Millennium Park", "Balboa Park", "Forest Park"),
           "venue", "event plan PDF", "event_hub", ("chair", "balloon", "table"), "per-guest cost"),
    Domain("Health & Nutrition Management", (0, 0, 20, 0, 14, 0),
           ("nutrition label", "food entry", "calorie target", "meal plan", "allergen list", "recipe", "activity log"),
           ("oatmeal", "greek yogurt", "quinoa salad", "salmon fillet", "lentil soup", "almond butter", "brown rice", "chicken breast"),
           "food", "weekly meal plan", "nutritionix", ("apple", "cereal box", "bottle"), "daily calories"),
)

DOMAIN_BY_NAME = {d.name: d for d in DOMAINS}

# Each domain's other metrics and deliverables. A base draws its metric, its deliverable and the order
# of its nouns, so no tool of a domain is needed by every one of its cases: a tool every case needs
# could never be one of its extraneous tools (§4.3 draws those from the same scenario), and a reader
# would learn it is never extraneous (apb-gen-6: the extraneous probe read .710).
VOCABULARY_ALTERNATIVES: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "Software Development": (("test pass rate", "build failure rate"), ("code health summary", "sprint quality brief")),
    "System Operations & Web Engineering": (("p95 latency", "availability ratio"), ("capacity planning note", "postmortem draft")),
    "Mathematical Reasoning": (("approximation error", "convergence bound"), ("proof outline", "answer key")),
    "Statistical Analysis": (("standard error", "correlation coefficient"), ("data quality memo", "trend summary table")),
    "Spreadsheet Manipulation": (("row average", "variance percentage"), ("summary sheet", "formatted pivot report")),
    "Financial Modeling": (("dividend yield", "debt ratio"), ("risk assessment note", "portfolio update memo")),
    "Expense & Budget Management": (("per-person share", "budget variance"), ("reimbursement request", "budget reconciliation sheet")),
    "Market Research": (("price elasticity", "share of voice"), ("competitor matrix", "go-to-market memo")),
    "Document & Legal Analysis": (("liability exposure", "clause risk index"), ("contract risk summary", "due diligence checklist")),
    "Art & Aesthetic Analysis": (("color harmony index", "attribution confidence"), ("curatorial note", "exhibition label set")),
    "Scientific & Nature Exploration": (("species richness", "detection frequency"), ("biodiversity summary", "survey data appendix")),
    "Graphic Design": (("whitespace balance", "legibility index"), ("accessibility audit", "style revision notes")),
    "Narrative & Emotional Analysis": (("tension index", "sentiment polarity"), ("character mood chart", "scene tone summary")),
    "Professional Communication": (("reply rate", "meeting load"), ("status update digest", "meeting recap")),
    "Information Retrieval": (("source agreement rate", "recency index"), ("annotated bibliography", "source comparison table")),
    "Digital Media & Gaming Analytics": (("retention rate", "churn rate"), ("player sentiment brief", "patch impact summary")),
    "Creative Storytelling & Writing": (("readability grade", "dialogue ratio"), ("chapter critique", "pitch synopsis")),
    "Travel & Itinerary Planning": (("daily budget", "travel time"), ("booking summary", "travel budget sheet")),
    "Logistics & Supply Chain": (("on-time rate", "fill rate"), ("carrier scorecard", "replenishment plan")),
    "Consumer Decision Making": (("value score", "cost per use"), ("product comparison sheet", "buying guide")),
    "Event Planning": (("seating capacity", "vendor cost share"), ("run-of-show schedule", "vendor booking summary")),
    "Health & Nutrition Management": (("protein intake", "nutrient balance score"), ("nutrition log summary", "grocery list")),
}

# Distractor name patterns (§4.3): same scenario, useless for the task. `{n}` = a domain noun.
# Neutral, usable-but-unneeded tools (§2.5: 2..5 per case).
NEUTRAL_TOOLS: tuple[tuple[str, str, str, str], ...] = (
    # (words, purpose as a noun phrase, param, param description)
    ("convert units", "conversion of a quantity between measurement units", "quantity", "the quantity with its unit, e.g. '5 km'"),
    ("get current date", "lookup of today's date in ISO format", "timezone", "an IANA timezone name"),
    ("format table", "formatting of rows of data as a Markdown table", "rows", "the rows to format"),
    ("send notification", "sending of a short push notification to the user's phone", "message", "the notification text"),
    ("search help docs", "search over the platform's help center articles", "query", "the help topic"),
    ("spell check", "spelling checks of a text, returning corrections", "text", "the text to check"),
    ("shorten url", "creation of a short link for a URL", "url", "the URL to shorten"),
)

# Capabilities whose presence would let an agent recover private information (§4.5 info check).
PRIVATE_INFO_CAPS = frozenset(
    {"read_sms", "check_email", "get_2fa", "read_calendar", "read_notes", "meeting_logs", "handbook_lookup", "memory"}
)


def allocation() -> list[tuple[str, str]]:
    """The 1,109 (domain, source) slots of §2.5, in table order."""
    slots: list[tuple[str, str]] = []
    for d in DOMAINS:
        for src, n in zip(SOURCES, d.counts):
            slots.extend([(d.name, src)] * n)
    return slots
