"""Study bundles (SPEC §8, §11): a folder or ZIP of ``study.json`` and its images.

``exchange`` imports and exports a bundle; ``reference_format`` reads and writes the SPEC §8
``study.json`` of ``pairwise_reference``, ``questionnaire_format`` the one of the other kinds (each
kind's keys are its design's bundle section, ``annotation.kinds``); ``images`` decodes and stores
the images; ``update`` replaces candidates of a study in place (``import_study --update``).
"""
