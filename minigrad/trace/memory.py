"""MemoryEvents: the arenas and pools a trace meets, their blocks, and what happens to them."""
from __future__ import annotations

from ..arena import Pool
from .events import EventLog
from .tables import Ids


class MemoryEvents:
    """Arena and block tables, and the alloc, free and pop events."""

    def __init__(self, ids: Ids, log: EventLog):
        self.ids, self.log = ids, log
        self.arenas: dict[int, dict] = {}
        self.blocks: dict[str, dict] = {}
        self.in_order: list[dict] = []      # the same entries, as met (a live view sends the new)

    def on_alloc(self, block) -> None:
        entry = self.block(block, fresh=True)
        event = {"type": "alloc", "block": entry["id"], "arena": entry["arena"],
                 "used": int(block.allocator.used), "high_water": int(block.allocator.high_water),
                 "text": f"{entry['kind']} block of {block.nbytes} bytes for "
                         f"{block.owner or 'an unnamed array'} on {block.allocator.name}."}
        self.log.write_or_hold(event)

    def on_free(self, block) -> None:
        self.log.keep_values()
        entry = self.block(block)
        event = {"type": "free", "block": entry["id"], "arena": entry["arena"],
                 "used": int(block.allocator.used), "high_water": int(block.allocator.high_water),
                 "text": f"{block.owner}'s {entry['kind']} block freed: its last user has run."}
        self.log.write_or_hold(event)

    def on_pop(self, allocator, blocks: list) -> None:
        log = self.log
        log.keep_values()
        log.phase = "release"
        ids = [self.block(b)["id"] for b in blocks]
        freed = sum(b.nbytes for b in blocks)
        log.event("pop", arena=self.arena(allocator), blocks=ids, used=int(allocator.used),
                  high_water=int(allocator.high_water),
                  text=f"scope of {allocator.name} ends: {len(ids)} blocks ({freed} bytes) "
                       f"taken back at once.")
        log.close_frame()

    def arena(self, allocator) -> str:
        """The allocator's id; meeting it writes down what is already on it."""
        key = id(allocator)
        if key not in self.arenas:
            self.ids.keep(allocator)
            self.arenas[key] = {"id": f"a{len(self.arenas)}", "name": allocator.name,
                                "type": "pool" if isinstance(allocator, Pool) else "arena",
                                "capacity": int(allocator.capacity)}
            # What was already on it when the trace first met it (parameters, their grads):
            # written as allocations read from the ledger, so the picture has no false gaps.
            for block in list(allocator.blocks):
                if block.alive:
                    self.block(block)
        self.arenas[key]["capacity"] = int(allocator.capacity)
        return self.arenas[key]["id"]

    def block(self, block, fresh: bool = False) -> dict:
        """The block's entry; a block met for the first time that is not being allocated right
        now (fresh) existed before: it gets a reconstructed allocation event."""
        if not fresh and id(block.allocator) not in self.arenas:
            # Meet its allocator first: its blocks are written down in address order, this one
            # among them, so that the last one's `used` is the arena's (this one written after
            # them told the strip a `used` the arena never had: the end of this block).
            self.arena(block.allocator)
        block_id, new = self.ids.get(block, "b")
        if new:
            self.blocks[block_id] = {"id": block_id, "arena": None,
                                     "offset": int(block.offset), "nbytes": int(block.nbytes),
                                     "kind": block.kind, "owner": str(block.owner or "")}
            self.in_order.append(self.blocks[block_id])
            self.blocks[block_id]["arena"] = self.arena(block.allocator)
            if not fresh:
                self._reconstructed_alloc(block)
        return self.blocks[block_id]

    def block_id(self, block) -> str | None:
        return None if block is None else self.block(block)["id"]

    def _reconstructed_alloc(self, block) -> None:
        """A block that existed before the trace met it, written as an allocation read from
        the ledger (an arena's `used` after a block is the block's end)."""
        entry = self.blocks[self.ids.known(block)]
        allocator, arena = block.allocator, self.arenas[id(block.allocator)]
        if isinstance(allocator, Pool):
            used, high = int(allocator.used), int(allocator.high_water)
        else:
            used = int(block.offset + block.nbytes)
            high = arena["_high"] = max(arena.get("_high", 0), used)
        self.log.event("alloc", block=entry["id"], arena=entry["arena"], used=used,
                       high_water=high, reconstructed=True,
                       text=f"{entry['kind']} block of {block.nbytes} bytes for "
                            f"{block.owner or 'an unnamed array'} on {allocator.name} (already "
                            f"there; read from the ledger).")
