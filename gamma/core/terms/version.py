"""The engine's version, a constant: reading package metadata at import costs more than Γ
on a small log, and audit records must name the version without a lookup."""

__version__ = "0.1.0"
