"""Audit records: writing what an actor was allowed to see (``replay``), replaying them
against a log under the policy they were made with, and explaining two records' difference
(``diff``). Imports core and storage.
"""
