"""The synthetic demo study (``make_demo_study``): drawn pages, systems of known ability, simulated
raters and judges. ``drawing``, ``bundle`` and ``simulation`` are pure (no Django); ``service``
imports the bundle and replays the simulated answers through the same services real users use.
"""
