"""minigrad.tape: the slot tape, a second engine beside the eager one.

    from minigrad.tape import Tape, TensorTape
"""
from .core import Instr, SlotValueError, Tape, TapeStep
from .rules import OP_NAMES, RULES
from .slots import Slot, SlotError, StaleSlotError
from .tensor import TensorTape

__all__ = ["Tape", "TensorTape", "Slot", "Instr", "TapeStep", "SlotError", "SlotValueError", "StaleSlotError",
           "OP_NAMES", "RULES"]
