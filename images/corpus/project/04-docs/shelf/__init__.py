"""shelf: a tiny inventory library."""
from .inventory import Inventory, Item

__all__ = ["Inventory", "Item"]
__version__ = "0.2.0"
