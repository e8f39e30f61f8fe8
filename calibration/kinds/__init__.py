"""Analyses of the other study kinds (SPEC §11): pure modules, no Django and no project app.

- ``score_preference``: kind ``pairwise``, agreement of human choices with imported metric scores;
- ``checklist``: kind ``checklist``, human majority per predicate vs imported automatic answers;
- ``rating``: kind ``rating``, paired system differences per dimension and the equivalence verdict;
- ``agreement_any``: inter-rater agreement (Fleiss-type κ, Krippendorff α, hidden repeats) for any kind;
- ``hygiene``: crowd questionnaire exclusion rules and their report.

Every module takes pandas frames and returns frozen dataclasses whose ``to_dict()`` is plain JSON
(NaN → None). Bad input raises ``ValueError`` (``InvalidKindData``) naming the column and row.
"""
