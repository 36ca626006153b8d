"""Ahead-of-time autodiff: capture a forward IR graph, derive its backward graph once,
plan its memory, run both from a compiled plan. Beside the eager engine, sharing kernels.py."""
from .capture import CaptureError, CaptureWarning, capture
from .derive import (DerivationStep, DeriveBackwardOptions, DeriveError, compute_required_saves,
                     dead_code_elimination, derive_backward_graph)
from .ir import Graph, Operation, TensorInfo
from .rules import (BackwardRuleContext, BackwardRuleRegistry, MissingRuleError, registry,
                    saved_ref)

__all__ = ["Graph", "Operation", "TensorInfo", "capture", "CaptureError", "CaptureWarning",
           "derive_backward_graph", "DeriveBackwardOptions", "DerivationStep", "DeriveError",
           "compute_required_saves", "dead_code_elimination",
           "BackwardRuleRegistry", "BackwardRuleContext", "MissingRuleError", "registry", "saved_ref"]
from .execute import ExecuteError, Executor  # noqa: E402
__all__ += ["Executor", "ExecuteError"]
from .plan import LiveRange, MemoryPlan, PlanError, plan_memory, recompute_saves  # noqa: E402
__all__ += ["plan_memory", "recompute_saves", "MemoryPlan", "LiveRange", "PlanError"]
# The op table (minigrad/optable.py) holds every op's rule and compilers. Most ops write theirs
# in their own family file (minigrad/ops/); the ops only this engine has, and the families whose
# aot half is still kept apart here, enter theirs when these modules are imported:
from . import graph_ops  # noqa: E402,F401  (identity, copy, zeros)
from . import compile_moe, rules_moe  # noqa: E402,F401  (mixture of experts)
from . import compile_transformer, rules_transformer  # noqa: E402,F401  (transformer ops)
