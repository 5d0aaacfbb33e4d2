import pytest

from shelf import Inventory, Item


def make_inventory():
    return Inventory([
        Item("MUG-1", "Blue mug", "kitchen", 850, 4),
        Item("PEN-2", "Gel pen", "office", 199, 30),
        Item("LMP-3", "Desk lamp", "lighting", 2499, 2),
    ])


def test_add_and_get():
    inv = make_inventory()
    inv.add(Item("CUP-4", "Tea cup", "kitchen", 450, 6))
    assert len(inv) == 4
    assert inv.get("CUP-4").name == "Tea cup"


def test_duplicate_sku_rejected():
    inv = make_inventory()
    with pytest.raises(KeyError):
        inv.add(Item("MUG-1", "Red mug", "kitchen", 850, 1))


def test_remove():
    inv = make_inventory()
    removed = inv.remove("PEN-2")
    assert removed.name == "Gel pen"
    assert "PEN-2" not in inv
    assert len(inv) == 2


def test_count_and_value():
    inv = make_inventory()
    assert inv.count() == 36
    assert inv.total_value() == 4 * 850 + 30 * 199 + 2 * 2499


def test_item_validation():
    with pytest.raises(ValueError):
        Item("", "nameless", "misc", 100)
    with pytest.raises(ValueError):
        Item("BAD-1", "Broken", "misc", -1)
    with pytest.raises(ValueError):
        Item("BAD-2", "Broken", "misc", 100, -3)
