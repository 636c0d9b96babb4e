"""The PlanBench-XL world: 56 retail datatypes, backend records and 1,665 tools (spec §1).

Everything the paper generated with an LLM is replaced by seeded templates, so the world is a pure
function of the world seed (42) and identical in every process. `build_world()` is cached per
process; the world is immutable after construction, so concurrent episodes read it freely.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

WORLD_SEED = 42
N_CASES = 8


def seed_of(*parts: Any) -> int:
    """Spec §0: sha256-derived 64-bit seed (never Python's salted hash())."""
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big")


_NORM_MARKUP = re.compile(r"<[^>]*>|[*`#'\"\u201c\u201d\u2018\u2019]")


def norm_value(text: str) -> str:
    """Spec §3.5 answer normalisation: lowercase, drop markup and quotes, collapse whitespace."""
    return " ".join(_NORM_MARKUP.sub("", str(text).lower()).split())


# --------------------------------------------------------------------------------------------
# Entities and datatypes (spec §1.1)
# --------------------------------------------------------------------------------------------

ENTITIES = [  # (name, index k, id prefix, flow)
    ("user", 1, "usr", "c"), ("product", 2, "prd", "c"), ("variant", 3, "var", "c"),
    ("order_draft", 4, "odrft", "c"), ("order_draft_item", 5, "odritm", "c"),
    ("pricing_snapshot", 6, "psnap", "c"), ("order", 7, "ord", "c"), ("order_item", 8, "orditm", "c"),
    ("payment_method", 9, "pm", "p"), ("payment_intent", 10, "pi", "p"), ("auth", 11, "auth", "p"),
    ("payment", 12, "pay", "p"), ("warehouse_request", 13, "wr", "f"), ("shipment", 14, "shp", "f"),
    ("delivery_attempt", 15, "dla", "f"), ("return_request", 16, "rrq", "a"),
    ("return_audit", 17, "raud", "a"), ("refund", 18, "ref", "a"),
]
ENTITY_INDEX = {name: k for name, k, _, _ in ENTITIES}
ENTITY_PREFIX = {name: p for name, _, p, _ in ENTITIES}
ENTITY_FLOW = {name: f for name, _, _, f in ENTITIES}

# (canonical, entity, flow, aliases (first = query phrase), gloss, description)
_DT_ROWS: list[tuple[str, str, str, list[str], str, str]] = [
    ("user_id", "user", "c", ["customer account ID", "user id", "account id", "user record id", "customer id", "shopper id"],
     "the customer account", "Unique ID of the customer account (user_id). It identifies the shopper, not a payment method or an order."),
    ("product_id", "product", "c", ["product ID", "product reference", "catalog product id", "product record id", "item master id"],
     "the catalog product", "Unique ID of a catalog product (product_id). A product groups its variants; it is broader than variant_id."),
    ("variant_id", "variant", "c", ["purchased variant", "variant id", "product variant id", "variant reference", "variant record id"],
     "the product variant", "Unique ID of one specific product variant (variant_id), e.g. a color and size of a product. Narrower than product_id."),
    ("order_draft_id", "order_draft", "c", ["order draft", "order draft reference", "draft order id", "cart id", "cart reference", "checkout draft id"],
     "the order draft", "Unique ID of an in-progress cart or draft order (order_draft_id), before checkout. Unlike order_id, this is not a placed order."),
    ("order_draft_item_id", "order_draft_item", "c", ["draft item", "cart item reference", "draft line id", "cart line id", "draft line item id"],
     "the draft line item", "Unique ID of a line item inside an order draft. This is the draft-side item ID before checkout, not the final order_item_id created after the order is placed."),
    ("pricing_snapshot_id", "pricing_snapshot", "c", ["pricing snapshot", "quote record id", "quote id", "price quote reference", "pricing result id"],
     "the pricing snapshot", "Unique ID of a pricing result or quote (pricing_snapshot_id) computed for an order draft."),
    ("order_id", "order", "c", ["order ID", "order", "placed order id", "live order id", "completed order record id", "order reference"],
     "the placed order", "Unique ID of the final placed order. Unlike order_draft_id, this refers to the real order after checkout."),
    ("order_item_id", "order_item", "c", ["order item", "order item reference", "placed order item id", "order line id", "finalized line item id"],
     "the finalized order item", "Unique ID of a finalized line item of a placed order (order_item_id). Unlike order_draft_item_id, it exists only after checkout."),
    ("payment_method_id", "payment_method", "p", ["payment method ID", "payment method reference", "saved payment method id", "payment instrument id", "card on file id"],
     "the saved payment method", "Unique ID of the saved payment method (payment_method_id) actually used for a payment. Not the same as a default_payment_method_id setting."),
    ("payment_intent_id", "payment_intent", "p", ["payment intent ID", "payment intent", "payment setup id", "checkout intent id", "payment initiation id"],
     "the payment intent", "Unique ID of the payment intent for an order. This represents the stage where the system is preparing to start a payment, not the final payment result."),
    ("auth_id", "auth", "p", ["authorization record", "auth id", "authorization record id", "auth reference", "authorization id"],
     "the authorization record", "Unique ID of the authorization step (auth_id) of a payment attempt. Different from the payment intent and from the final payment."),
    ("payment_id", "payment", "p", ["payment record", "payment record id", "charge id", "completed payment id", "settled payment reference"],
     "the completed payment record", "Unique ID of the completed payment record (payment_id), the final result of a successful payment."),
    ("warehouse_request_id", "warehouse_request", "f", ["warehouse request", "fulfillment job id", "fulfillment request id", "pick request id", "warehouse request id"],
     "the warehouse request", "Unique ID of a warehouse or fulfillment request (warehouse_request_id) created for an order."),
    ("shipment_id", "shipment", "f", ["shipment", "outbound shipment id", "shipment reference", "parcel id", "package shipment id"],
     "the shipment", "Unique ID of a shipment (shipment_id). Each warehouse request produces one shipment; a shipment can have several delivery attempts."),
    ("delivery_attempt_id", "delivery_attempt", "f", ["delivery attempt", "attempt record id", "delivery try id", "delivery attempt id", "drop-off attempt id"],
     "the delivery attempt", "Unique ID of a specific delivery attempt for a shipment. One shipment can have multiple delivery attempts, so this is narrower than shipment_id."),
    ("return_request_id", "return_request", "a", ["return request", "return ticket id", "rma request id", "customer return id", "return request id"],
     "the customer-facing return request", "Unique ID of the customer-facing return request (return_request_id) for a whole order."),
    ("return_audit_id", "return_audit", "a", ["return review", "internal return review id", "review ticket id", "return audit id", "return inspection id"],
     "the internal return review", "Unique ID of the internal review (return_audit_id) of a return request. Different from the request itself and from the refund."),
    ("refund_id", "refund", "a", ["refund ID", "finance refund id", "refund record id", "refund transaction id", "reimbursement id"],
     "the refund record", "Unique ID of the final refund record (refund_id) issued after an approved return review."),
    ("default_payment_method_id", "user", "p", ["default payment method", "default method id", "saved method id", "preferred payment method id", "wallet default method id"],
     "the account's default payment method", "ID of the payment method configured as the account default (default_payment_method_id). It is a user setting, not necessarily the method used for a given payment."),
    ("person_name", "user", "c", ["customer name", "user name", "name on the account", "account holder name", "full name"],
     "the customer's name", "Full name of the customer on the account (person_name)."),
    ("email", "user", "c", ["email address", "email", "customer email", "contact email", "login email"],
     "the customer's email address", "Email address registered on the customer account (email)."),
    ("phone_number", "user", "c", ["phone number", "phone", "user phone", "phone number for the user account", "contact phone", "mobile number"],
     "the customer's phone number", "Masked phone number registered on the customer account (phone_number)."),
    ("loyalty_tier", "user", "c", ["loyalty tier", "membership level", "rewards tier", "member tier", "loyalty status"],
     "the customer's loyalty tier", "Loyalty or rewards tier of the customer account (loyalty_tier)."),
    ("product_name", "product", "c", ["product name", "item name", "product title", "catalog title", "listing name"],
     "the product name", "Display name of a catalog product (product_name)."),
    ("product_category", "product", "c", ["product category", "category", "catalog category", "department", "product type"],
     "the product category", "Catalog category of a product (product_category)."),
    ("sku", "variant", "c", ["SKU", "sku code", "stock keeping unit", "variant sku", "item code"],
     "the variant SKU", "Stock keeping unit code of one product variant (sku)."),
    ("color", "variant", "c", ["color", "colour", "variant color", "color option", "shade"],
     "the variant color", "Color of a product variant (color)."),
    ("size", "variant", "c", ["size", "variant size", "size option", "fit size", "garment size"],
     "the variant size", "Size of a product variant (size)."),
    ("unit_price", "variant", "c", ["unit price", "list price", "price per unit", "item price", "variant price"],
     "the unit price", "List price of one unit of a product variant (unit_price)."),
    ("inventory_status", "variant", "c", ["inventory status", "stock status", "availability", "stock level", "in-stock status"],
     "the inventory status", "Stock availability of an item at a fulfillment location (inventory_status)."),
    ("updated_time", "order_draft", "c", ["draft last updated time", "updated time", "last updated time", "cart last modified time", "draft update timestamp"],
     "the draft's last update time", "Timestamp when the order draft was last updated (updated_time)."),
    ("quantity", "order_draft_item", "c", ["quantity", "item quantity", "units ordered", "line quantity", "qty"],
     "the line quantity", "Number of units on a draft line item (quantity)."),
    ("quoted_total", "pricing_snapshot", "c", ["quoted total", "quote total", "priced total", "quote amount", "snapshot total"],
     "the quoted total", "Total amount computed by the pricing snapshot (quoted_total)."),
    ("order_status", "order", "c", ["order status", "purchase status", "order state", "current order status", "order lifecycle status"],
     "the order status", "Current lifecycle status of the placed order (order_status)."),
    ("order_placed_time", "order", "c", ["order placed time", "checkout time", "order date", "purchase time", "placement timestamp"],
     "the order placement time", "Timestamp when the order was placed at checkout (order_placed_time)."),
    ("line_item_status", "order_item", "c", ["line item status", "order item status", "item fulfillment status", "line status", "item state"],
     "the line item status", "Fulfillment status of one finalized order item (line_item_status)."),
    ("payment_method_type", "payment_method", "p", ["payment method type", "payment type", "instrument type", "funding type", "method kind"],
     "the payment method type", "Kind of saved payment instrument, e.g. card or wallet (payment_method_type)."),
    ("card_brand", "payment_method", "p", ["card brand", "card network", "issuer brand", "card scheme", "network brand"],
     "the card brand", "Card network of the saved payment method (card_brand)."),
    ("account_number", "payment_method", "p", ["funding account reference", "account number", "account", "masked card number", "account token", "instrument number"],
     "the funding account reference", "Recognizable account or card number of the payment instrument, usually masked (account_number)."),
    ("billing_zip", "payment_method", "p", ["billing zip", "billing postal code", "billing zip code", "card zip", "billing postcode"],
     "the billing zip code", "Billing postal code registered on the payment method (billing_zip)."),
    ("payment_amount", "payment_intent", "p", ["payment amount", "intent amount", "charge amount requested", "amount to collect", "payment total"],
     "the payment amount", "Amount the payment intent is set up to collect (payment_amount)."),
    ("auth_code", "auth", "p", ["authorization code", "auth code", "approval code", "issuer approval code", "authorization reference code"],
     "the authorization code", "Approval code returned by the issuer for an authorization (auth_code)."),
    ("auth_status", "auth", "p", ["authorization status", "auth status", "authorization result", "approval status", "auth decision"],
     "the authorization status", "Result of the authorization step (auth_status)."),
    ("payment_status", "payment", "p", ["payment status", "payment_status", "Current status of the payment", "charge status", "settlement status"],
     "the payment status", "The current state of the payment record, such as paid, failed, reversed, or refunded. This is the status of the actual payment, not just the intent or auth step."),
    ("captured_time", "payment", "p", ["captured time", "capture time", "settlement time", "payment captured at", "charge capture timestamp"],
     "the capture time", "Timestamp when the payment was captured (captured_time)."),
    ("store_name", "warehouse_request", "f", ["store name", "fulfilling store", "warehouse name", "fulfillment location", "ship-from store"],
     "the fulfilling store", "Name of the store or warehouse that fulfills the request (store_name)."),
    ("carrier_name", "shipment", "f", ["carrier name", "carrier", "shipping carrier", "courier", "logistics provider"],
     "the carrier", "Shipping carrier that moves the shipment (carrier_name)."),
    ("tracking_number", "shipment", "f", ["tracking number", "tracking id", "parcel tracking code", "waybill number", "shipment tracking number"],
     "the tracking number", "Carrier tracking number of the shipment (tracking_number)."),
    ("estimated_delivery_date", "shipment", "f", ["estimated delivery date", "ETA date", "expected delivery date", "promised delivery date", "delivery estimate"],
     "the estimated delivery date", "Date the shipment is expected to arrive (estimated_delivery_date)."),
    ("attempt_time", "delivery_attempt", "f", ["attempt time", "delivery attempt time", "attempted at", "drop-off time", "attempt timestamp"],
     "the attempt time", "Timestamp of one delivery attempt (attempt_time)."),
    ("attempt_result", "delivery_attempt", "f", ["attempt result", "delivery outcome", "attempt outcome", "drop-off result", "delivery attempt status"],
     "the attempt result", "Outcome of one delivery attempt (attempt_result)."),
    ("return_reason", "return_request", "a", ["return reason", "reason for return", "return cause", "rma reason", "customer return reason"],
     "the return reason", "Reason the customer gave for the return (return_reason)."),
    ("return_status", "return_request", "a", ["return status", "return request status", "rma status", "return state", "return progress"],
     "the return status", "Progress of the customer-facing return request (return_status)."),
    ("review_decision", "return_audit", "a", ["review decision", "audit decision", "return review outcome", "inspection verdict", "review result"],
     "the review decision", "Decision of the internal return review (review_decision)."),
    ("refund_status", "refund", "a", ["refund status", "refund state", "refund progress", "reimbursement status", "refund outcome"],
     "the refund status", "Current state of the refund record (refund_status)."),
    ("refund_amount", "refund", "a", ["refund amount", "refunded amount", "reimbursement amount", "refund value", "credited amount"],
     "the refund amount", "Amount refunded to the customer (refund_amount)."),
]

_FLOW_WORDS = {"c": "order", "p": "payment", "f": "fulfillment", "a": "after-sales"}
# Purpose clauses. The paper's descriptions (Fig. 20) end in a clause written for the tool ("Use it
# when you need the broader parcel context behind one attempt event"); a fixed clause per flow would
# make four strings that a search can key on, so each tool draws one of these, filled with its own
# glosses.
_PURPOSE = [
    "Use it when you need {out} to continue the {flow} workflow.",
    "Use it when all you hold is {inp} but a later step asks for {out}.",
    "Useful for moving from {inp} to {out} without leaving the {flow} records.",
    "Typical use: looking up {out} while working through a {flow} case.",
    "Call it when {out} is the missing piece and {inp} is already known.",
    "It helps bridge {inp} and {out} in {flow} questions.",
    "Use it to resolve {out} from {inp}.",
    "Reach for it when a {flow} question mentions {inp} and needs {out}.",
]


@dataclass(frozen=True)
class Datatype:
    index: int
    name: str
    entity: str
    flow: str
    aliases: tuple[str, ...]
    gloss: str
    description: str

    @property
    def phrase(self) -> str:
        """The query phrase (first alias) used in verbalised queries."""
        return self.aliases[0]

    @property
    def is_id(self) -> bool:
        return self.index < 19


def _agent_description(name: str, desc: str) -> str:
    """The description an agent reads: no self-reference by canonical name. The paper's parameter
    descriptions (Fig. 20, Fig. 24) never name their own datatype, and App. F.1 says the agent never
    observes datatypes; naming another datatype to contrast with it ("narrower than shipment_id")
    is kept, as in Fig. 20."""
    return desc.replace(f" ({name})", "")


DATATYPES: list[Datatype] = [
    Datatype(i, name, ent, flow, tuple(al), gloss, _agent_description(name, desc))
    for i, (name, ent, flow, al, gloss, desc) in enumerate(_DT_ROWS)
]
DT = {d.name: d for d in DATATYPES}
ID_TYPES = [d.name for d in DATATYPES[:19]]
ATTR_TYPES = [d.name for d in DATATYPES[19:]]


def entity_id(entity: str) -> str:
    return f"{entity}_id"


# --------------------------------------------------------------------------------------------
# Backend records (spec §1.2)
# --------------------------------------------------------------------------------------------

_FIRST = ["Avery", "Jordan", "Morgan", "Riley", "Casey", "Quinn", "Harper", "Rowan", "Emerson", "Finley",
          "Hayden", "Kendall", "Logan", "Marlowe", "Parker", "Reese", "Sawyer", "Tatum", "Blake", "Dakota"]
_LAST = ["Whitfield", "Okafor", "Lindqvist", "Moreau", "Castellanos", "Nakamura", "Abernathy", "Petrov",
         "Delacroix", "Hollings", "Varga", "Osei", "Brennan", "Kowalczyk", "Thorne", "Ibarra", "Sato",
         "Mwangi", "Farrow", "Quintero"]
_ADJ = ["Aurora", "Summit", "Harbor", "Cascade", "Ember", "Granite", "Meadow", "Tundra", "Solstice", "Drift",
        "Canyon", "Zephyr"]
_NOUN = ["Parka", "Trail Runner", "Skillet", "Soundbar", "Tent", "Kettlebell", "Windbreaker", "Dutch Oven",
         "Headphones", "Sleeping Bag", "Yoga Mat", "Hiking Boot"]
_CITIES = ["Riverton", "Lakeview", "Fairhaven", "Stonebridge", "Maplewood", "Brookfield", "Clearwater",
           "Oakridge", "Westbury", "Pinecrest", "Ashford", "Kingsport"]
_ENUMS = {
    "loyalty_tier": ["bronze", "silver", "gold", "platinum", "diamond"],
    "product_category": ["outerwear", "footwear", "kitchenware", "home audio", "camping gear", "fitness equipment"],
    "color": ["slate blue", "forest green", "burnt orange", "charcoal", "ivory", "crimson"],
    "size": ["small", "medium", "large", "x-large", "one-size"],
    "inventory_status": ["in_stock", "low_stock", "backordered", "out_of_stock", "discontinued"],
    "order_status": ["placed", "shipped", "delivered", "returned", "refunded", "cancelled"],
    "line_item_status": ["allocated", "packed", "fulfilled", "returned_item", "cancelled_item"],
    "payment_method_type": ["credit_card", "debit_card", "paypal_wallet", "gift_card", "bank_transfer"],
    "card_brand": ["visa", "mastercard", "amex", "discover", "unionpay"],
    "auth_status": ["approved", "declined", "expired", "voided", "pending_review"],
    "payment_status": ["paid", "failed", "reversed", "refunded"],
    "carrier_name": ["Northwind Freight", "BlueJay Express", "Parcelink", "Coastal Couriers", "SwiftRoute"],
    "attempt_result": ["delivered_to_door", "recipient_absent", "access_denied", "rescheduled", "left_at_locker"],
    "return_reason": ["wrong_size", "damaged_on_arrival", "changed_mind", "not_as_described", "late_delivery"],
    "return_status": ["requested", "label_issued", "received", "closed"],
    "review_decision": ["approved_full", "approved_partial", "rejected_policy", "escalated"],
    "refund_status": ["issued", "processing", "on_hold", "completed", "failed_refund"],
}
# Decoys for fake (noisy/blocker) values of categorical datatypes: plausible values of the right type
# that no real record holds, so a fake never passes for a real value. Each list pairs one-to-one with
# the real vocabulary above, entry for entry of the same shape (character classes, word count,
# separators), and a fake is drawn the way a real value is, so shape tells nothing (issue #31).
_DECOYS = {
    "loyalty_tier": ["copper", "emerald", "titanium", "onyx", "sapphire"],
    "product_category": ["stationery", "glassware", "giftware", "pet supplies", "garden tools",
                         "office furniture"],
    "color": ["dusty rose", "ocean teal", "pale yellow", "mustard", "maroon", "sandstone"],
    "size": ["petite", "grande", "jumbo", "x-tall", "free-size"],
    "inventory_status": ["in_transit", "pre_order", "reserved", "out_for_restock", "clearance"],
    "order_status": ["archived", "suspended", "pending", "disputed", "invoiced", "expedited"],
    "line_item_status": ["queued", "picked", "staged", "damaged_item", "missing_item"],
    "payment_method_type": ["store_credit", "prepaid_card", "crypto_wallet", "loyalty_points", "wire_transfer"],
    "card_brand": ["maestro", "elocard", "rupay", "dinersclub", "interac"],
    "auth_status": ["challenged", "timedout", "revoked", "flagged", "awaiting_issuer"],
    "payment_status": ["held", "stalled", "disputed", "settled"],
    "carrier_name": ["Redwood Logistics", "TransLink Cargo", "Meridianpost", "Harbor Haulers", "OrbitParcel"],
    "attempt_result": ["scanned_at_hub", "address_query", "weather_delay", "misrouted", "held_at_depot"],
    "return_reason": ["duplicate_order", "gift_not_wanted", "color_mismatch", "parts_not_included",
                      "better_price"],
    "return_status": ["appealed", "awaiting_label", "inspected", "withdrawn"],
    "review_decision": ["pending_evidence", "needs_photos", "deferred_review", "reopened"],
    "refund_status": ["initiated", "reversing", "in_review", "abandoned", "partial_refund"],
}
_HEX = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
ID_NUMBERS = (2, 999)  # n of `<prefix>_<1000 k + n>` outside case 1, for real and fake IDs alike


def _iso(rng: random.Random, date_only: bool = False) -> str:
    y, mo, d = 2025, rng.randint(1, 12), rng.randint(1, 28)
    if date_only:
        return f"{y}-{mo:02d}-{d:02d}"
    return f"{y}-{mo:02d}-{d:02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"


def _gen_value(dt: str, c: int, rng: random.Random, fake: bool = False) -> str:
    """A value of datatype `dt` for case index `c` (fake=True: a decoy of the right format)."""
    d = DT[dt]
    if d.is_id:
        # `<prefix>_<1000 k + n>`: case 1 has n = 1 (the paper's IDs), every other value, real or fake,
        # draws n from the same range, so the number tells a fake from a real ID no better than chance.
        # The default payment method is a payment method's ID; in odd cases the record copies the one
        # used (Fig. 11), which `_build_records` does.
        entity = "payment_method" if dt == "default_payment_method_id" else d.entity
        n = 1 if (c == 1 and not fake) else rng.randint(ID_NUMBERS[0], ID_NUMBERS[1])
        return f"{ENTITY_PREFIX[entity]}_{1000 * ENTITY_INDEX[entity] + n}"
    if dt in _ENUMS:
        return rng.choice(_DECOYS[dt] if fake else _ENUMS[dt])
    if dt == "person_name":
        return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    if dt == "email":
        return f"{rng.choice(_FIRST).lower()}.{rng.choice(_LAST).lower()}{rng.randint(10, 99)}@mailbox.test"
    if dt == "phone_number":
        return f"{rng.randint(130, 189)}****{rng.randint(1000, 9999)}"
    if dt == "product_name":
        return f"{rng.choice(_ADJ)} {rng.choice(_NOUN)}"
    if dt == "sku":
        return f"SKU-{''.join(rng.choice(_HEX[:24]) for _ in range(4))}-{rng.randint(10, 99)}"
    if dt in ("unit_price",):
        return f"${rng.randint(12, 98)}.99"
    if dt in ("quoted_total", "payment_amount"):
        return f"${rng.randint(120, 980)}.{rng.randint(10, 99)}"
    if dt == "refund_amount":
        return f"${rng.randint(11, 98)}.{rng.randint(10, 99)}"
    if dt in ("updated_time", "order_placed_time", "captured_time", "attempt_time"):
        return _iso(rng)
    if dt == "estimated_delivery_date":
        return _iso(rng, date_only=True)
    if dt == "quantity":
        return f"{rng.randint(2, 24)} units"
    if dt == "account_number":
        return f"acct_tok_{rng.randint(1000, 9999)}"
    if dt == "billing_zip":
        return f"{rng.randint(10000, 99999)}"
    if dt == "auth_code":
        return f"AUTH-{rng.choice(_HEX[:24])}{rng.choice(_HEX[:24])}{rng.randint(10, 99)}"
    if dt == "store_name":
        return f"{rng.choice(_CITIES)} Fulfillment Center"
    if dt == "tracking_number":
        return "1Z" + "".join(rng.choice(_HEX) for _ in range(10))
    raise KeyError(dt)


# Case 1 pins the values the paper's figures show.
_CASE1_PINS = {
    "account_number": "acct_tok_4242", "auth_code": "AUTH-AX91", "auth_status": "approved",
    "payment_status": "paid",
}

# Key-like input combinations that must identify exactly one case (constraint (ii)).
_KEY_COMBOS = [("email",), ("phone_number",), ("sku",), ("tracking_number",), ("account_number",),
               ("auth_code",), ("product_id", "color", "size"), ("product_name", "store_name"),
               ("user_id", "card_brand", "billing_zip"), ("shipment_id", "attempt_time"),
               ("order_draft_id", "variant_id"), ("order_id", "variant_id"),
               ("user_id", "product_id", "color", "size")]


def _case_ok(rec: dict[str, str], c: int) -> bool:
    """Constraints (iii)-(iv): distinct values, no substring of another, >= 4 normalised chars."""
    items = [(k, norm_value(v)) for k, v in rec.items()]
    if any(len(v) < 4 for _, v in items):
        return False
    for i, (ka, a) in enumerate(items):
        for kb, b in items[i + 1:]:
            trap = {ka, kb} == {"default_payment_method_id", "payment_method_id"} and c % 2 == 1
            if trap:
                continue
            if a in b or b in a:
                return False
    return True


def _ids_unique(rec: dict[str, str], records: list[dict[str, str]]) -> bool:
    """Constraint (i): no ID value of this case is an ID value of an earlier case (a default payment
    method never names another case's method either)."""
    earlier = {r[d] for r in records for d in ID_TYPES}
    return not any(rec[d] in earlier for d in ID_TYPES)


def _build_records(n_cases: int) -> list[dict[str, str]]:
    records: list[dict[str, str]] = []
    for c in range(1, n_cases + 1):
        attempt = 0
        while True:
            rng = random.Random(seed_of(WORLD_SEED, "case", c, attempt))
            rec = {d.name: _gen_value(d.name, c, rng) for d in DATATYPES}
            if c == 1:
                rec.update(_CASE1_PINS)
            if c % 2 == 1:  # the deliberate trap (Fig. 11): the default method is the one used
                rec["default_payment_method_id"] = rec["payment_method_id"]
            ok = _case_ok(rec, c) and _ids_unique(rec, records)
            if ok:
                for combo in _KEY_COMBOS:
                    key = tuple(rec[k] for k in combo)
                    if any(tuple(r[k] for k in combo) == key for r in records):
                        ok = False
                        break
            if ok:
                records.append(rec)
                break
            attempt += 1
    return records


# --------------------------------------------------------------------------------------------
# Tools (spec §1.3-1.6)
# --------------------------------------------------------------------------------------------

_LINKS = """order_draft>user order_draft_item>order_draft order_draft_item>variant order_draft_item>user
order_draft_item>order_item order_item>order order_item>variant variant>product order>order_draft
order>pricing_snapshot pricing_snapshot>order_draft order>user delivery_attempt>shipment
delivery_attempt>warehouse_request shipment>order shipment>warehouse_request warehouse_request>order
order>return_request return_request>return_audit return_audit>refund refund>return_audit
return_audit>return_request refund>auth refund>payment payment_method>user payment_intent>payment_method
auth>payment_intent auth>payment auth>payment_method payment>auth payment>payment_intent
payment_intent>order""".split()
_EXTRA = [("user_id", "default_payment_method_id"), ("order_draft_id", "default_payment_method_id"),
          ("payment_method_id", "default_payment_method_id"), ("payment_intent_id", "account_number"),
          ("order_draft_item_id", "updated_time")]
_ALTKEY = [("email", "user_id"), ("phone_number", "user_id"), ("sku", "variant_id"),
           ("tracking_number", "shipment_id"), ("account_number", "payment_method_id"), ("auth_code", "auth_id")]
_MULTI = [(("order_draft_id", "variant_id"), "order_draft_item_id"), (("order_id", "variant_id"), "order_item_id"),
          (("product_id", "color", "size"), "variant_id"), (("shipment_id", "attempt_time"), "delivery_attempt_id"),
          (("product_name", "store_name"), "inventory_status"),
          (("user_id", "card_brand", "billing_zip"), "payment_method_id"),
          (("user_id", "product_id", "color", "size"), "order_item_id")]
_DERIVED = """payment_intent>payment_method_type order_draft_item>line_item_status order>quoted_total
payment_intent>card_brand delivery_attempt>carrier_name order_draft_item>person_name order_draft_item>color
order>updated_time payment_method>person_name auth>payment_amount order_item>order_placed_time
payment>auth_status payment>payment_amount payment_intent>order_status order_draft_item>email
refund>captured_time order>phone_number refund>auth_status variant>product_category
return_audit>return_reason payment_method>phone_number warehouse_request>order_placed_time order_item>sku
payment_intent>order_placed_time order_draft_item>sku refund>auth_code delivery_attempt>estimated_delivery_date
order_draft_item>loyalty_tier return_request>review_decision payment_method>loyalty_tier order_draft_item>size
return_audit>return_status order_draft_item>unit_price return_audit>refund_amount auth>payment_status
order_item>unit_price refund>review_decision delivery_attempt>store_name payment_method>email
order>loyalty_tier delivery_attempt>tracking_number auth>account_number shipment>order_status
order_item>order_status shipment>store_name refund>payment_status order>email order_item>color
payment>auth_code payment_intent>billing_zip order_draft>loyalty_tier variant>product_name
return_audit>refund_status order_item>size order>return_status warehouse_request>order_status
shipment>order_placed_time auth>payment_method_type auth>billing_zip auth>captured_time
pricing_snapshot>updated_time order_draft>email order_draft>person_name order>person_name
order>return_reason order_item>inventory_status auth>card_brand order_draft>phone_number
payment>billing_zip payment_intent>return_reason auth>order_status warehouse_request>phone_number
payment_intent>person_name delivery_attempt>order_status delivery_attempt>order_placed_time
warehouse_request>quoted_total order_item>product_name order_item>updated_time order_item>phone_number
pricing_snapshot>person_name return_audit>payment_status payment>order_placed_time order_item>quoted_total
warehouse_request>return_reason shipment>phone_number payment_intent>phone_number payment>account_number
shipment>loyalty_tier refund>return_status shipment>email auth>phone_number pricing_snapshot>phone_number
return_audit>auth_status shipment>updated_time refund>account_number payment>payment_method_type
refund>billing_zip payment_intent>quoted_total""".split()

VARIANT_SUFFIXES = ["V2", "V3", "Pro", "Lite", "Turbo", "Quick", "Enterprise", "Edge", "Nano", "Prime",
                    "Core", "Instant", "Max", "Fast", "Secure"]
NOISY_CATEGORIES = ["deprecated", "condition_limited", "stale", "unreliable", "non_authoritative"]
_NOISY_SUFFIXES = {
    "deprecated": ["Legacy", "V1", "Old"], "condition_limited": ["Partner", "B2B", "Restricted"],
    "stale": ["Cached", "Mirror", "Replica"], "unreliable": ["Compat", "Alt", "Beta"],
    "non_authoritative": ["Preview", "Estimate", "Draft"],
}
_CONDITION_PROGRAMS = ["marketplace partner", "B2B wholesale", "legacy migration"]
BLOCKER_TYPES = ["exp", "imp", "sem"]
_EXPLICIT_ERRORS = ["error: endpoint unavailable", "error: endpoint temporarily unavailable.",
                    "error: upstream service returned 503", "error: request timed out upstream"]
_DISCLOSURES = {
    "deprecated": [
        "This endpoint version is deprecated; calls are no longer supported and return an unsupported-endpoint error.",
        "Retired endpoint kept only for old integrations: it no longer serves requests.",
        "Superseded by a newer version; the service behind this one has been switched off.",
    ],
    "condition_limited": [
        "Only serves records enrolled in the {program} program.",
        "Restricted to {program} accounts; other records are refused.",
        "Available for {program} records only, and refuses everything else.",
    ],
    "stale": [
        "It reads from a cached replica that can lag behind the live record, so the returned {out} may be outdated.",
        "Backed by a nightly snapshot, so the {out} it gives may not reflect recent changes.",
        "Answers from a mirror that is synchronised with a delay; its {out} can be out of date.",
    ],
    "unreliable": [
        "This legacy mapping is known to return a value from a related field instead of the requested {out}.",
        "Its field mapping is inconsistent: the value often comes from a neighbouring field rather than {out}.",
        "A compatibility shim whose result is frequently read from the wrong column, not {out}.",
    ],
    "non_authoritative": [
        "It returns a preview or estimated {out}, not the final recorded value.",
        "Gives a provisional {out} computed before the record is finalised; not authoritative.",
        "The {out} it reports is an estimate for display purposes, not the value of record.",
    ],
}


# Every tool that does not disclose a defect carries a service sentence of its own, of the same
# lengths and shapes as the disclosures, so that a description's length, or whether it holds one
# sentence more than another's, tells nothing: only what the sentence says does (App. B.2.2).
_NEUTRAL_NOTES = [  # one per disclosure, each about as long as its counterpart
    "This endpoint version is the current one; every call is served and returns the value held on the record.",
    "Current endpoint used by new integrations: it serves every request it receives.",
    "Maintained as the main version; the service behind this one runs for every record.",
    "Serves records in and outside the {program} program.",
    "Open to {program} accounts and to every other record alike.",
    "Available for {program} records and for everything else as well.",
    "It reads from the primary store that holds the live record, so the returned {out} is the current one.",
    "Backed by the live database, so the {out} it gives reflects the latest changes.",
    "Answers from the store the {flow} services write to first; its {out} is up to date.",
    "This mapping reads the requested {out} from its own field, never from a related or neighbouring one.",
    "Its field mapping is consistent: the value always comes from the {out} field and no other one.",
    "A maintained service whose result is read from the right column, the {out} itself.",
    "It returns the final recorded {out}, not a preview or an estimate.",
    "Gives the {out} as stored once the record was finalised; this is the value of record.",
    "The {out} it reports is the value of record, the one the {flow} records keep.",
]


@dataclass(frozen=True)
class Tool:
    """One tool. `inputs`/`output` are datatypes (internal); `params` maps parameter name -> datatype."""

    id: str
    name: str  # agent-visible, lowercase
    title: str  # TitleCase rendering
    kind: str  # executable | noisy:<category> | blocker:<exp|imp|sem>
    inputs: tuple[str, ...]
    output: str
    params: tuple[tuple[str, str], ...]
    description: str
    paired: str | None = None  # executable tool id this variant belongs to
    family: str = ""
    fixed_output: str | None = None  # noisy/blocker return value
    num: int = 0  # index among all tools
    note: str = ""  # the service sentence inside `description`: a noisy tool's disclosure, else neutral

    @property
    def is_exec(self) -> bool:
        return self.kind == "executable"

    @property
    def input_set(self) -> frozenset[str]:
        return frozenset(self.inputs)

    def schema(self, param_descriptions: str = "datatype") -> dict[str, Any]:
        """The agent-visible schema (paper Fig. 20 structure). A parameter's description is its
        datatype's (Fig. 20), or with param_descriptions="parameter" a sentence written from the
        parameter's own name, so equal descriptions no longer mean equal datatypes."""
        def describe(p: str, d: str) -> str:
            if param_descriptions == "datatype":
                return DT[d].description
            return f"The {p.replace('_', ' ')} this lookup starts from."

        return {
            "type": "function", "name": self.name, "description": self.description,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string", "description": describe(p, d)} for p, d in self.params},
                "required": [p for p, _ in self.params], "additionalProperties": False,
            },
            "strict": True,
        }


def _title(alias: str) -> str:
    words = re.sub(r"[^A-Za-z0-9]+", " ", alias).split()
    return "_".join("ID" if w.lower() == "id" else ("SKU" if w.lower() == "sku" else w.capitalize()) for w in words)


def _snake(alias: str) -> str:
    return "_".join(re.sub(r"[^A-Za-z0-9]+", " ", alias).lower().split())


# Openings of the functional sentence. One per workflow family would let a string rule tell a tool
# from its twins (issue 42: "shortest description first" and "my description is inside another's"
# found every executable), so every tool of a family draws its own opening and purpose clause.
_OPENINGS = [
    "Given {given}, this returns {out} {rel}.",
    "Returns {out} {rel}, given {given}.",
    "Looks up {out} {rel}, starting from {given}.",
    "Takes {given} and gives back {out} {rel}.",
    "For {given}, it finds {out} {rel}.",
    "Resolves {given} to {out} {rel}.",
]


def _desc(family: str, inputs: tuple[str, ...], output: str, in_phrases: list[str], key: str,
          variant: tuple[int, int] | None = None) -> str:
    """The functional description: an opening and a purpose clause, (opening, purpose) indices
    `variant` or drawn from the tool's key."""
    quoted = [f"'{p}'" for p in in_phrases]
    given = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
    ent = DT[inputs[0]].entity.replace("_", " ")
    if family == "link":
        rel = (f"that this {ent} belongs to" if _is_parent(inputs[0], output)
               else f"created for that {ent}, if one exists")
    elif family == "own":
        rel = f"recorded on that {ent}"
    elif family in ("derived", "extra"):
        rel = f"tied to that {ent}"
    elif family == "multi":
        rel = "that matches all of the given values"
    else:  # altkey
        rel = f"identified by that {DT[inputs[0]].gloss.removeprefix('the ')}"
    rng = random.Random(seed_of(WORLD_SEED, "purpose", key))
    opening, purpose = variant if variant is not None else (rng.randrange(len(_OPENINGS)),
                                                            rng.randrange(len(_PURPOSE)))
    text = _PURPOSE[purpose].format(out=DT[output].gloss, inp=DT[inputs[0]].gloss, flow=_FLOW_WORDS[DT[output].flow])
    return f"{_OPENINGS[opening].format(given=given, out=DT[output].gloss, rel=rel)} {text}"


def _family_variants(key: str, n: int) -> list[tuple[int, int]]:
    """`n` distinct (opening, purpose) pairs for one family, drawn before roles are assigned."""
    pairs = [(o, p) for o in range(len(_OPENINGS)) for p in range(len(_PURPOSE))]
    return random.Random(seed_of(WORLD_SEED, "family-descriptions", key)).sample(pairs, n)


def _with_note(desc: str, note: str, key: str) -> str:
    """The service sentence goes before or after the functional text, drawn per tool."""
    return f"{note} {desc}" if random.Random(seed_of(WORLD_SEED, "note-place", key)).random() < 0.5 else f"{desc} {note}"


def _neutral_note(output: str, key: str) -> str:
    rng = random.Random(seed_of(WORLD_SEED, "neutral-note", key))
    return rng.choice(_NEUTRAL_NOTES).format(out=DT[output].gloss.removeprefix("the "), program=rng.choice(
        _CONDITION_PROGRAMS), flow=_FLOW_WORDS[DT[output].flow])


# Child -> parent links (many-to-one); the others are 1:1 "created for" links.
_PARENT_OF = {("order_draft", "user"), ("order_draft_item", "order_draft"), ("order_draft_item", "variant"),
              ("order_draft_item", "user"), ("order_item", "order"), ("order_item", "variant"),
              ("variant", "product"), ("order", "user"), ("delivery_attempt", "shipment"),
              ("delivery_attempt", "warehouse_request"), ("shipment", "order"), ("shipment", "warehouse_request"),
              ("warehouse_request", "order"), ("payment_method", "user"), ("payment_intent", "payment_method"),
              ("auth", "payment_intent"), ("auth", "payment_method"), ("payment", "auth"),
              ("payment", "payment_intent"), ("payment_intent", "order"), ("return_request", "order"),
              ("return_audit", "return_request"), ("refund", "return_audit"), ("refund", "auth"),
              ("refund", "payment"), ("pricing_snapshot", "order_draft")}


def _is_parent(src: str, dst: str) -> bool:
    return (DT[src].entity, DT[dst].entity) in _PARENT_OF


@dataclass(eq=False)
class World:
    """The generated world; immutable after `build_world()` returns."""

    records: list[dict[str, str]]
    tools: list[Tool]
    by_id: dict[str, Tool] = field(default_factory=dict)
    by_name: dict[str, Tool] = field(default_factory=dict)
    executable: list[Tool] = field(default_factory=list)
    noisy_of: dict[str, list[Tool]] = field(default_factory=dict)  # exec id -> 5 noisy, by category
    blockers_of: dict[str, dict[str, Tool]] = field(default_factory=dict)  # exec id -> type -> tool
    lookup: dict[str, dict[tuple[str, ...], str]] = field(default_factory=dict)  # exec id -> inputs -> out
    real_values: frozenset[str] = frozenset()
    # Same-type alternatives 2 and 3 of every executable tool, injected only by single-type block
    # settings; outside the 1,665-tool library that Table 2 counts.
    extra_blockers: list[Tool] = field(default_factory=list)
    alternatives_of: dict[str, dict[str, list[Tool]]] = field(default_factory=dict)  # exec id -> type -> 3
    # Misleading alternative id -> the executable tool with the same function, where the world has one.
    sem_relation: dict[str, str] = field(default_factory=dict)
    world_hash: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "tools": [
                {"id": t.id, "name": t.name, "kind": t.kind, "inputs": list(t.inputs), "output": t.output,
                 "params": [list(p) for p in t.params], "description": t.description, "paired": t.paired,
                 "fixed_output": t.fixed_output}
                for t in self.tools + self.extra_blockers
            ],
        }


def _executable_specs() -> list[tuple[str, tuple[str, ...], str]]:
    specs: list[tuple[str, tuple[str, ...], str]] = []
    for link in _LINKS:
        a, b = link.split(">")
        specs.append(("link", (entity_id(a),), entity_id(b)))
    specs += [("extra", (a,), b) for a, b in _EXTRA]
    specs += [("altkey", (a,), b) for a, b in _ALTKEY]
    specs += [("multi", ins, out) for ins, out in _MULTI]
    specs += [("own", (entity_id(DT[a].entity),), a) for a in ATTR_TYPES]
    for d in _DERIVED:
        a, b = d.split(">")
        specs.append(("derived", (entity_id(a),), b))
    return specs


# Every suffix the paper shows (App. B.2.1 and Fig. 13's `_V3_Preview`) plus the noisy categories'
# words, in one pool for every kind of tool.
SUFFIX_POOL = [*VARIANT_SUFFIXES, "Preview", "Legacy", "V1", "Old", "Partner", "B2B", "Restricted", "Cached",
               "Mirror", "Replica", "Compat", "Alt", "Beta", "Estimate", "Draft"]
# One executable, its 5 noisy twins and its 6 explicit/implicit alternatives (3 of each: the mixed
# settings' pair and the single-type settings' further two) share one naming family.
FAMILY_SIZE = 12


def _family_names(base: str, n: int, key: str, taken: set[str]) -> list[str]:
    """`n` distinct names `base[_<Suffix>[_<Suffix>]]`, drawn before anyone knows which tool gets which.

    The paper's noisy tools follow the executable's naming rule "usually with a small suffix or
    version change" (App. B.2.2, e.g. `Get_Account_From_Payment_Intent_V3_Preview` beside
    `..._V3`), and explicit/implicit alternatives "may differ only in the optional suffix"
    (App. B.9.2); the prompt warns that suffixes "are not reliable signals of quality" (Fig. 21).
    If only noisy names extended another name, "my name + `_` prefixes another listed name" would
    pick out every executable (185 of 185, against 0 of 2,590 other tools). So a family is drawn as
    a whole, a suffix or a version change of a name already drawn, from one pool of words, and then
    shuffled: the caller assigns roles by position, so no name pattern or word goes with a role."""
    rng = random.Random(seed_of(WORLD_SEED, "names", key))
    out: list[str] = []
    depth: dict[str, int] = {}
    while len(out) < n:
        r = rng.random()
        parents = [x for x in out if depth[x] < 2]
        if parents and r < 0.45:
            parent = rng.choice(parents)
            cand, d = f"{parent}_{rng.choice(SUFFIX_POOL)}", depth[parent] + 1
        elif r < 0.55:
            cand, d = base, 0
        else:
            cand, d = f"{base}_{rng.choice(SUFFIX_POOL)}", 1
        if cand.lower() in taken:
            continue
        taken.add(cand.lower())
        depth[cand] = d
        out.append(cand)
    rng.shuffle(out)
    return out


def _fake_ok(value: str, real: set[str]) -> bool:
    v = norm_value(value)
    return len(v) >= 1 and not any(r in v for r in real)


def _fake_value(dt: str, key: tuple[Any, ...], real: set[str]) -> str:
    attempt = 0
    while True:
        rng = random.Random(seed_of(WORLD_SEED, *key, attempt))
        c = rng.randint(100, 999)
        value = _gen_value(dt, c, rng, fake=True)
        if _fake_ok(value, real):
            return value
        attempt += 1


def _build_tools(records: list[dict[str, str]]) -> tuple[list[Tool], list[Tool]]:
    from toolsweep.benchmarks.planbench_xl.retriever import phrase_vector, cosine

    real = {norm_value(v) for rec in records for v in rec.values()}
    taken: set[str] = set()

    def names(base: str, n: int, key: str) -> list[str]:
        return _family_names(base, n, key, taken)

    tools: list[Tool] = []
    execs: list[Tool] = []
    family_names: dict[str, tuple[str, list[str]]] = {}  # exec id -> (base, names by role)
    family_descs: dict[str, list[str]] = {}  # exec id -> functional descriptions by role (same order)
    for i, (family, ins, out) in enumerate(_executable_specs()):
        tid = f"t{i:03d}"
        alias = {d: random.Random(seed_of(WORLD_SEED, "alias", tid, d)).choice(DT[d].aliases) for d in (*ins, out)}
        base = f"Get_{_title(alias[out])}_From_" + "_And_".join(_title(alias[d]) for d in ins)
        family_names[tid] = (base, names(base, FAMILY_SIZE, tid))
        family_descs[tid] = [_desc(family, ins, out, [alias[d] for d in ins], tid, v)
                             for v in _family_variants(tid, FAMILY_SIZE)]
        title = family_names[tid][1][0]
        params = tuple((_snake(random.Random(seed_of(WORLD_SEED, "param", tid, d)).choice(DT[d].aliases)), d) for d in ins)
        note = _neutral_note(out, tid)
        desc = _with_note(family_descs[tid][0], note, tid)
        t = Tool(tid, title.lower(), title, "executable", ins, out, params, desc, None, family, None, note=note)
        execs.append(t)
    tools.extend(execs)

    # Noisy variants (5 per executable tool, one per category). App. B.2.2: the description "stays
    # close to the paired tool in task intent, but it also explicitly describes why the tool is
    # unavailable or unreliable", written by an LLM: so the disclosure is worded per tool, placed
    # before or after the functional description, and never a fixed marker a search can match.
    for t in execs:
        for j, cat in enumerate(NOISY_CATEGORIES):
            nid = f"{t.id}n_{cat}"
            title = family_names[t.id][1][1 + j]
            rng = random.Random(seed_of(WORLD_SEED, "disclosure", nid))
            prog = rng.choice(_CONDITION_PROGRAMS)
            note = rng.choice(_DISCLOSURES[cat]).format(out=DT[t.output].gloss.removeprefix("the "),
                                                        program=prog)
            if cat == "deprecated":
                value = "error: unsupported endpoint"
            elif cat == "condition_limited":
                value = "error: record does not meet the required condition for this endpoint"
            else:
                value = _fake_value(t.output, ("noise", nid), real)
            desc = _with_note(family_descs[t.id][1 + j], note, nid)
            tools.append(Tool(nid, title.lower(), title, f"noisy:{cat}", t.inputs, t.output, t.params,
                              desc, t.id, t.family, value, note=note))
    tools.extend(_blockers(execs, family_names, family_descs, names, real, variant=1))
    extras = (_blockers(execs, family_names, family_descs, names, real, variant=2)
              + _blockers(execs, family_names, family_descs, names, real, variant=3))
    return tools, extras


def _misleading_outputs(t: Tool, execs: list[Tool]) -> list[str]:
    """The different functions a misleading twin of `t` may support, best first (Tab. 4, App. B.9.4).

    The twin must be "semantically close ... but support a different function" whose response "is
    consistent with the tool's own description". A function is only real when the world has it, so
    the candidates are the outputs of executable tools with exactly `t`'s inputs (the same lookup,
    another field), same workflow first; a tool with no such sibling falls back to other fields of
    the record its inputs identify, then to any datatype, ranked by the phrase encoder."""
    from toolsweep.benchmarks.planbench_xl.retriever import cosine, phrase_vector

    target = phrase_vector(t.output.replace("_", " "))
    flow = DT[t.output].flow

    def rank(names: list[str]) -> list[str]:
        return sorted(names, key=lambda d: (DT[d].flow != flow,
                                            -cosine(target, phrase_vector(d.replace("_", " "))), DT[d].index))

    siblings = rank(sorted({e.output for e in execs if e.input_set == t.input_set
                            and e.output != t.output and e.output not in t.inputs}))
    entity = DT[t.inputs[0]].entity
    same_record = rank([d.name for d in DATATYPES if d.entity == entity and d.name != t.output
                        and d.name not in t.inputs and d.name not in siblings])
    rest = rank([d.name for d in DATATYPES if d.name != t.output and d.name not in t.inputs
                 and d.name not in siblings and d.name not in same_record])
    return siblings + same_record + rest


def _blockers(execs: list[Tool], family: dict[str, tuple[str, list[str]]], descs: dict[str, list[str]],
              names: Any, real: set[str], variant: int) -> list[Tool]:
    """The explicit, implicit and misleading alternative of every executable tool (App. B.9.2);
    `variant` 2 and 3 are the further same-type alternatives single-type settings inject."""
    out: list[Tool] = []
    sfx = "" if variant == 1 else str(variant)
    for t in execs:
        base, named = family[t.id]
        bid = f"{t.id}b_exp{sfx}"
        title = named[6 + 2 * (variant - 1)]
        err = random.Random(seed_of(WORLD_SEED, "exp", bid)).choice(_EXPLICIT_ERRORS)
        note = _neutral_note(t.output, bid)
        out.append(Tool(bid, title.lower(), title, "blocker:exp", t.inputs, t.output, t.params,
                        _with_note(descs[t.id][6 + 2 * (variant - 1)], note, bid), t.id, t.family, err, note=note))
        # Implicit failure: "an output that may be syntactically well-formed but is either irrelevant
        # ... or counterfactual" (App. B.9.4), "superficially plausible" (Takeaway 10): a value of the
        # declared datatype's own shape that no record holds.
        bid = f"{t.id}b_imp{sfx}"
        title = named[7 + 2 * (variant - 1)]
        note = _neutral_note(t.output, bid)
        out.append(Tool(bid, title.lower(), title, "blocker:imp", t.inputs, t.output, t.params,
                        _with_note(descs[t.id][7 + 2 * (variant - 1)], note, bid), t.id, t.family,
                        _fake_value(t.output, ("imp", bid), real), note=note))
        # Semantic misleading: same inputs, a different function, described truthfully; its value is
        # looked up on the record at call time (environment.py), so it never contradicts itself.
        d2 = _misleading_outputs(t, execs)[variant - 1]
        bid = f"{t.id}b_sem{sfx}"
        alias_out = random.Random(seed_of(WORLD_SEED, "alias", bid, d2)).choice(DT[d2].aliases)
        in_part = base.split("_From_", 1)[1]
        title = names(f"Get_{_title(alias_out)}_From_{in_part}", 1, bid)[0]
        in_phr = [a.replace("_", " ") for a, _ in t.params]
        desc = _desc("own" if DT[d2].entity == DT[t.inputs[0]].entity else "derived", t.inputs, d2, in_phr,
                     bid)
        note = _neutral_note(d2, bid)
        out.append(Tool(bid, title.lower(), title, "blocker:sem", t.inputs, d2, t.params,
                        _with_note(desc, note, bid), t.id, t.family, None, note=note))
    return out


@functools.lru_cache(maxsize=4)
def build_world(n_cases: int = N_CASES) -> World:
    """Build (once per process) the deterministic world of spec §1."""
    records = _build_records(n_cases)
    tools, extras = _build_tools(records)
    tools = [Tool(**{**t.__dict__, "num": i}) for i, t in enumerate(tools)]
    extras = [Tool(**{**t.__dict__, "num": len(tools) + i}) for i, t in enumerate(extras)]
    w = World(records=records, tools=tools, extra_blockers=extras)
    w.by_id = {t.id: t for t in tools + extras}
    w.by_name = {t.name: t for t in tools + extras}
    if len(w.by_name) != len(tools) + len(extras):
        raise RuntimeError("tool names are not unique; the world generator is broken")
    w.executable = [t for t in tools if t.is_exec]
    for t in tools:
        if t.kind.startswith("noisy:"):
            w.noisy_of.setdefault(t.paired, []).append(t)
        elif t.kind.startswith("blocker:"):
            w.blockers_of.setdefault(t.paired, {})[t.kind.split(":")[1]] = t
    for t in tools + extras:
        if t.kind.startswith("blocker:"):
            w.alternatives_of.setdefault(t.paired, {}).setdefault(t.kind.split(":")[1], []).append(t)
    for t in w.executable + [t for t in tools + extras if t.kind == "blocker:sem"]:
        table: dict[tuple[str, ...], str] = {}
        for rec in records:
            table[tuple(rec[d] for d in t.inputs)] = rec[t.output]
        w.lookup[t.id] = table
    relation = {(t.input_set, t.output): t.id for t in w.executable}
    w.sem_relation = {t.id: relation[(t.input_set, t.output)] for t in tools + extras
                      if t.kind == "blocker:sem" and (t.input_set, t.output) in relation}
    w.real_values = frozenset(norm_value(v) for rec in records for v in rec.values())
    blob = json.dumps(w.to_json(), sort_keys=True, separators=(",", ":")).encode()
    w.world_hash = hashlib.sha256(blob).hexdigest()
    return w
