"""``oxport.verification``: torch.onnx's verification API (checking an export against eager
PyTorch, and finding where they part). It lives in :mod:`oxport.diagnose.verification`."""

from oxport.diagnose.verification import (
    AxisProblem,
    GraphInfo,
    OutputComparison,
    ShapeRun,
    VerificationError,
    VerificationOptions,
    VerificationResult,
    compare,
    find_mismatch,
    ort_session,
    run_ort,
    trace_differences,
    verify,
)

__all__ = ["AxisProblem", "GraphInfo", "OutputComparison", "ShapeRun", "VerificationError",
           "VerificationOptions", "VerificationResult", "compare", "find_mismatch",
           "ort_session", "run_ort", "trace_differences", "verify"]
