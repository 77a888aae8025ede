"""A small inventory module: stock records, restocking rules and a report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Item:
    sku: str
    name: str
    quantity: int = 0
    unit_price: float = 0.0
    tags: list[str] = field(default_factory=list)

    @property
    def value(self) -> float:
        return self.quantity * self.unit_price


class Inventory:
    def __init__(self, items: list[Item] | None = None) -> None:
        self._items = {item.sku: item for item in items or []}

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: Item) -> None:
        if item.sku in self._items:
            raise KeyError(f"duplicate SKU {item.sku!r}")
        self._items[item.sku] = item

    def restock(self, sku: str, amount: int) -> int:
        if amount <= 0:
            raise ValueError("amount must be positive")
        item = self._items[sku]
        item.quantity += amount
        return item.quantity

    def low_stock(self, threshold: int = 5) -> list[Item]:
        return sorted(
            (item for item in self._items.values() if item.quantity < threshold),
            key=lambda item: (item.quantity, item.sku),
        )

    def describe(self, sku: str) -> str:
        match self._items.get(sku):
            case None:
                return f"{sku}: unknown"
            case Item(quantity=0, name=name):
                return f"{sku}: {name} (out of stock)"
            case Item(quantity=q, name=name) if q < 5:
                return f"{sku}: {name} (only {q} left)"
            case item:
                return f"{sku}: {item.name} ({item.quantity} in stock)"

    def total_value(self) -> float:
        return sum(item.value for item in self._items.values())

    def save(self, path: Path) -> None:
        data = [vars(item) for item in self._items.values()]
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> "Inventory":
        return cls([Item(**row) for row in json.loads(path.read_text(encoding="utf-8"))])


if __name__ == "__main__":
    inv = Inventory([Item("A-1", "bolt", 3, 0.25, ["metal"]), Item("B-7", "washer", 40, 0.05)])
    inv.restock("A-1", 10)
    for line in map(inv.describe, ["A-1", "B-7", "Z-9"]):
        print(line)
    print(f"total value: {inv.total_value():.2f}")
