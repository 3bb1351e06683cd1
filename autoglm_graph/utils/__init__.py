"""What every area shares: parameter and input checks, thread limits, the
fit's phase clock, and torch imported at its first use.

Imports no other area of the package (and no torch at import).
"""

from __future__ import annotations

from ._lazy import LazyModule, lazy_exports, torch
from ._threads import limit_threads, n_threads, with_thread_limit
from ._timing import PHASES, PhaseTimes
from ._validation import (
    DEVICE_TYPES,
    MESSAGE_PASSING,
    PRECISIONS,
    OffsetWarning,
    align_to_rows,
    caller_stacklevel,
    check_callbacks,
    check_number,
    check_offset,
    check_option,
    resolve_device,
    resolve_precision,
)
from ._version import package_version

__all__ = [
    "DEVICE_TYPES",
    "MESSAGE_PASSING",
    "PHASES",
    "PRECISIONS",
    "LazyModule",
    "OffsetWarning",
    "PhaseTimes",
    "align_to_rows",
    "caller_stacklevel",
    "check_callbacks",
    "check_number",
    "check_offset",
    "check_option",
    "lazy_exports",
    "limit_threads",
    "n_threads",
    "package_version",
    "resolve_device",
    "resolve_precision",
    "torch",
    "with_thread_limit",
]
