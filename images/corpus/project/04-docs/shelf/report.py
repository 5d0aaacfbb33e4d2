"""Plain-text reports of an inventory."""
from __future__ import annotations

from .inventory import Inventory


def format_price(cents: int) -> str:
    """Format an amount of cents as a dollar string: 1234 -> "$12.34"."""
    return f"${cents // 100}.{cents % 100:02d}"


def summary(inv: Inventory) -> str:
    """One line per item (sku, name, quantity, unit price), then a line of totals."""
    lines = []
    for item in inv:
        price = format_price(item.price_cents)
        lines.append(f"{item.sku:<8} {item.name:<20} {item.qty:>4} x {price}")
    lines.append(f"{len(inv)} items, {inv.count()} units, worth {format_price(inv.total_value())}")
    return "\n".join(lines)
