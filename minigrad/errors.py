"""Exceptions and warnings. Every message says what was done, which rule it broke, and how to fix it."""


class MinigradError(Exception):
    """Base class of every error minigrad raises on purpose."""


class ShapeError(MinigradError, ValueError):
    """Operand shapes do not fit the op (broadcasting, matmul, reshape, ...)."""


class DtypeError(MinigradError, TypeError):
    """Data of the wrong kind: strings, objects, integers that should be floats, float class targets."""


class TargetError(MinigradError, ValueError):
    """Class targets outside [0, num_classes)."""


class BackwardError(MinigradError, RuntimeError):
    """backward() called where it is not defined: non-scalar loss, nothing requires grad, graph already consumed."""


class InplaceError(MinigradError, RuntimeError):
    """An in-place change to a Variable that takes part in autograd."""


class GradcheckError(MinigradError, AssertionError):
    """Analytic and numeric gradients disagree."""


class AnomalyError(MinigradError, RuntimeError):
    """A backward produced NaN or Inf (raised inside detect_anomaly())."""


class InvariantError(MinigradError, AssertionError):
    """An engine invariant was broken (checked in debug mode only): a bug in the engine or in a custom op."""


class NonLeafGradWarning(UserWarning):
    """.grad was read on a non-leaf Variable; only leaf gradients are kept."""


class DomainError(MinigradError, ValueError):
    """A value outside the domain where the op is defined (a non-positive base of base ** x)."""


class ConversionError(MinigradError, TypeError):
    """A Variable used where numpy wanted an array (np.asarray, numpy functions): use .data or .numpy()."""
