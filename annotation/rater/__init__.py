"""Everything a participant touches, as one slice.

``forms`` parses what a request posts, once; ``flow`` has one function per action
(``show_trial``, ``answer_trial``, ``revise_trial``, ``undo_trial``, ``report_problem``,
``join``), each one transaction that looks the study's kind up once and returns the whole next
``screens.Screen``; ``views`` and ``api`` parse, call one flow function and render its Screen (a
page, an htmx fragment or JSON); ``images`` holds the trial's image pass and the image view.

Blinding (SECURITY.md row 9): nothing here renders a system, candidate, file name,
page id or repeat flag. The only identifiers a rater sees are the study's link token and the
per-trial tokens.
"""
