"""Reading and writing an inventory as CSV (sku,name,category,price_cents,qty)."""
from __future__ import annotations

import csv
import io

from .inventory import Inventory, Item

FIELDS = ["sku", "name", "category", "price_cents", "qty"]


def load_csv(text: str) -> Inventory:
    """An inventory from CSV text with a header row."""
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames != FIELDS:
        raise ValueError(f"expected columns {FIELDS}, got {reader.fieldnames}")
    return Inventory(
        Item(row["sku"], row["name"], row["category"], int(row["price_cents"]), int(row["qty"]))
        for row in reader
    )


def dump_csv(inv: Inventory) -> str:
    """CSV text with a header row, one row per item, in inventory order."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(FIELDS)
    for item in inv:
        writer.writerow([item.sku, item.name, item.category, item.price_cents, item.qty])
    return out.getvalue()
