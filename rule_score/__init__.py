"""AesCode's rule score (docs/protocol.md "AesCode's rule score"): a brief's verifiable requirements
(:mod:`rule_score.requirements`), the deterministic verifiers that score a render against them
(:mod:`rule_score.verifiers`) and the per-system summary with brief-block bootstrap intervals
(:mod:`rule_score.summary`).

No Django here: plain data in, plain data out, as ``stats`` (the apps read and store it:
``annotation`` keeps a brief's requirements and an output's result, ``kind_reports`` reports them).
"""
