from shelf import Inventory, Item
from shelf.report import format_price, summary


def test_format_price():
    assert format_price(0) == "$0.00"
    assert format_price(5) == "$0.05"
    assert format_price(1234) == "$12.34"


def test_summary_lines():
    inv = Inventory([
        Item("MUG-1", "Blue mug", "kitchen", 850, 4),
        Item("PEN-2", "Gel pen", "office", 199, 30),
    ])
    lines = summary(inv).splitlines()
    assert lines[0] == "MUG-1    Blue mug                4 x $8.50"
    assert lines[-1] == "2 items, 34 units, worth $93.70"
