"""The judge-free metrics: salient tokens (``lexicon``, ``tokens``), a response's findings
and the validator (``findings``), closed-pool grading (``grading``) and the rates over a
file of responses (``metrics``). Imports core only; callers hand it events, never paths.
"""
