"""Items and the inventory that holds them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator


@dataclass(frozen=True)
class Item:
    """One stock-keeping unit: what it is, where it belongs, what it costs."""

    sku: str
    name: str
    category: str
    price_cents: int
    qty: int = 0

    def __post_init__(self) -> None:
        if not self.sku:
            raise ValueError("an item needs a sku")
        if self.price_cents < 0:
            raise ValueError(f"{self.sku}: negative price")
        if self.qty < 0:
            raise ValueError(f"{self.sku}: negative quantity")

    @property
    def value_cents(self) -> int:
        return self.price_cents * self.qty


class Inventory:
    """Items by sku, in the order they were added."""

    def __init__(self, items: Iterable[Item] = ()) -> None:
        self._items: dict[str, Item] = {}
        for item in items:
            self.add(item)

    def add(self, item: Item) -> None:
        if item.sku in self._items:
            raise KeyError(f"duplicate sku {item.sku!r}")
        self._items[item.sku] = item

    def remove(self, sku: str) -> Item:
        return self._items.pop(sku)

    def get(self, sku: str) -> Item:
        return self._items[sku]

    def __contains__(self, sku: object) -> bool:
        return sku in self._items

    def __iter__(self) -> Iterator[Item]:
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def count(self) -> int:
        """Total units."""
        return sum(item.qty for item in self)

    def total_value(self) -> int:
        """Total value, in cents."""
        return sum(item.value_cents for item in self)

    def by_category(self, category: str) -> list[Item]:
        """Items of one category, in the order they were added."""
        return [item for item in self if item.category == category]

    def low_stock(self, threshold: int = 5) -> list[Item]:
        """Items with fewer than `threshold` units left."""
        return [item for item in self if item.qty < threshold]
