"""Ahead-of-time autodiff: capture a forward IR graph, derive its backward graph once,
plan its memory, run both from a compiled plan. Beside the eager engine, sharing kernels.py."""
from .capture import CaptureError, capture
from .derive import (DerivationStep, DeriveBackwardOptions, DeriveError, compute_required_saves,
                     dead_code_elimination, derive_backward_graph)
from .ir import Graph, Operation, TensorInfo
from .rules import (BackwardRuleContext, BackwardRuleRegistry, MissingRuleError, registry,
                    saved_ref)

__all__ = ["Graph", "Operation", "TensorInfo", "capture", "CaptureError",
           "derive_backward_graph", "DeriveBackwardOptions", "DerivationStep", "DeriveError",
           "compute_required_saves", "dead_code_elimination",
           "BackwardRuleRegistry", "BackwardRuleContext", "MissingRuleError", "registry", "saved_ref"]
from .execute import ExecuteError, Executor  # noqa: E402
__all__ += ["Executor", "ExecuteError"]
from .plan import LiveRange, MemoryPlan, PlanError, plan_memory, recompute_saves  # noqa: E402
__all__ += ["plan_memory", "recompute_saves", "MemoryPlan", "LiveRange", "PlanError"]
from . import rules_moe  # noqa: E402,F401  (mixture-of-experts backward rules)
from .compile_moe import MOE_COMPILERS  # noqa: E402
from .execute import COMPILERS  # noqa: E402
COMPILERS.update(MOE_COMPILERS)
from . import rules_transformer  # noqa: E402,F401  (transformer backward rules)
from .compile_transformer import TRANSFORMER_COMPILERS  # noqa: E402
COMPILERS.update(TRANSFORMER_COMPILERS)
