"""The conformance suite: cases (``model``, ``parse``, ``cases``), the reader baselines
(``readers``), external systems over the JSON protocol (``external``), the pairs'
admissibility audit (``admissibility``), the runner and its report (``runner``), and the
StateBench importer (``statebench/``). Imports core, scoring and storage.
"""
