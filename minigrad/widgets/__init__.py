"""Jupyter widgets for minigrad (needs the `lab` extra: anywidget, ipywidgets, graphviz).

Importing minigrad does not import this package; `from minigrad.widgets import ...` does.
"""
from .export import save_html
from .views import BackwardStepper, GraphView, MemoryView
from .tapeview import TapeView
from .aotview import AotView

__all__ = ["GraphView", "BackwardStepper", "MemoryView", "save_html", "TapeView", "AotView"]
