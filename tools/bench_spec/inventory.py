class InventoryLedger:
    """Tracks stock levels of items across several warehouses.

    Every change is recorded as an entry so that the history of an item
    can be replayed, audited or rolled back to an earlier point.
    """

    def __init__(self, warehouses, low_stock_threshold=5):
        if not warehouses:
            raise ValueError("at least one warehouse is required")
        self.warehouses = list(warehouses)
        self.low_stock_threshold = low_stock_threshold
        self._stock = {name: {} for name in self.warehouses}
        self._entries = []

    def _check_warehouse(self, warehouse):
        if warehouse not in self._stock:
            raise KeyError(f"unknown warehouse: {warehouse}")

    def receive(self, warehouse, sku, quantity, note=""):
        """Add quantity units of sku to a warehouse."""
        self._check_warehouse(warehouse)
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        items = self._stock[warehouse]
        items[sku] = items.get(sku, 0) + quantity
        self._entries.append(("receive", warehouse, sku, quantity, note))
        return items[sku]

    def ship(self, warehouse, sku, quantity, note=""):
        """Remove quantity units of sku from a warehouse."""
        self._check_warehouse(warehouse)
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        items = self._stock[warehouse]
        available = items.get(sku, 0)
        if available < quantity:
            raise ValueError(
                f"cannot ship {quantity} of {sku} from {warehouse}: only {available} left"
            )
        items[sku] = available - quantity
        if items[sku] == 0:
            del items[sku]
        self._entries.append(("ship", warehouse, sku, quantity, note))
        return items.get(sku, 0)

    def transfer(self, source, target, sku, quantity):
        """Move stock between two warehouses as one recorded operation."""
        self._check_warehouse(target)
        self.ship(source, sku, quantity, note=f"transfer to {target}")
        self.receive(target, sku, quantity, note=f"transfer from {source}")

    def level(self, sku, warehouse=None):
        """Units of sku in one warehouse, or in all of them together."""
        if warehouse is not None:
            self._check_warehouse(warehouse)
            return self._stock[warehouse].get(sku, 0)
        return sum(items.get(sku, 0) for items in self._stock.values())

    def low_stock(self):
        """The (warehouse, sku, level) triples at or below the threshold."""
        report = []
        for warehouse in self.warehouses:
            for sku, count in sorted(self._stock[warehouse].items()):
                if count <= self.low_stock_threshold:
                    report.append((warehouse, sku, count))
        return report

    def rollback(self, n_entries):
        """Undo the last n_entries operations in reverse order."""
        if n_entries > len(self._entries):
            raise ValueError("cannot roll back more entries than were recorded")
        for _ in range(n_entries):
            kind, warehouse, sku, quantity, _note = self._entries.pop()
            items = self._stock[warehouse]
            if kind == "receive":
                items[sku] -= quantity
                if items[sku] == 0:
                    del items[sku]
            else:
                items[sku] = items.get(sku, 0) + quantity

    def __len__(self):
        return len(self._entries)

