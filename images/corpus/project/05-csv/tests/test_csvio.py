import pytest

from shelf import Inventory, Item
from shelf.csvio import dump_csv, load_csv

TEXT = """sku,name,category,price_cents,qty
MUG-1,Blue mug,kitchen,850,4
PEN-2,"Gel pen, black",office,199,30
"""


def test_load_csv():
    inv = load_csv(TEXT)
    assert len(inv) == 2
    assert inv.get("PEN-2").name == "Gel pen, black"
    assert inv.count() == 34


def test_round_trip():
    assert dump_csv(load_csv(TEXT)) == TEXT


def test_bad_header():
    with pytest.raises(ValueError):
        load_csv("sku,name\nMUG-1,Blue mug\n")


def test_dump_empty():
    assert dump_csv(Inventory()) == "sku,name,category,price_cents,qty\n"
