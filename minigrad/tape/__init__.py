"""minigrad.tape: the slot tape of design E, a second engine beside the eager one.

    from minigrad.tape import Tape, TensorTape
"""
from .core import Instr, SlotError, StaleSlotError, Tape, TapeStep
from .rules import OP_NAMES, RULES
from .slots import Slot
from .tensor import TensorTape

__all__ = ["Tape", "TensorTape", "Slot", "Instr", "TapeStep", "SlotError", "StaleSlotError",
           "OP_NAMES", "RULES"]
