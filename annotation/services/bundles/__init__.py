"""Study bundles (docs/protocol.md "Files", docs/bundle-kinds.md "Study bundles of the other kinds"): a folder
or ZIP of ``study.json`` and its images.

``exchange`` imports and exports a bundle; ``reference_format`` reads and writes the docs/protocol.md "Files"
``study.json`` of ``pairwise_reference``, ``questionnaire_format`` the one of the other kinds (each
kind's keys are its design's bundle section, ``annotation.kinds``); ``images`` decodes and stores
the images; ``update`` replaces candidates of a study in place (``import_study --update``).
"""
