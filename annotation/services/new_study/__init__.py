"""``new_study``: a study from the researcher's own folders or manifest (issue 29).

The researcher has one folder of images per system (plus the references for
``pairwise_reference``), or a CSV / JSONL manifest listing them. This package turns either into
the same bundle ``import_study`` reads (``study.json`` + images, docs/protocol.md "Files" and
docs/bundle-kinds.md), then imports it through
:func:`~annotation.services.bundles.importing.study_import_bundle`, all or nothing, and keeps the bundle for
the record.

Three steps:

1. :func:`~annotation.services.new_study.create.new_study_plan` reads the folders or the manifest
   (:mod:`~annotation.services.new_study.inputs`), renders HTML outputs
   (:mod:`~annotation.services.new_study.html_outputs`) and reads each image's header (format,
   size, colour mode; no pixels; :mod:`~annotation.services.new_study.sources`): pages, systems,
   the images of each, and what looks wrong — pages missing a system's image (with a ``--match``
   hint when a stray file has the page's number under another separator), stray files (a file
   not named like an image, ``notes.txt``, is one: listed and left out), duplicate stems,
   image-named files that are not images, size and colour-mode outliers. It writes nothing
   (``--dry-run`` prints :meth:`~annotation.services.new_study.plan.NewStudyPlan.report`).
2. :meth:`~annotation.services.new_study.plan.NewStudyPlan.document` is the ``study.json``: the
   files' pages, systems and images plus the options (every other top-level bundle key, passed
   through unchanged, so whatever the bundle validator accepts, ``new_study`` accepts;
   :mod:`~annotation.services.new_study.options`).
3. :func:`~annotation.services.new_study.create.new_study_create` refuses a plan with errors (one
   line naming the file), writes the bundle (images hard-linked or copied, never changed), imports
   it and moves the bundle into ``ARBITER_BUNDLE_ARCHIVE/<slug>-<UTC time>/`` (or
   ``keep_bundle``). A failed import leaves no bundle, no rows and no media files.

The upload page and the API go through the same steps from a ZIP
(:mod:`~annotation.services.new_study.uploads`).

Page ids are file stems, or the first (or ``page``-named) group of ``--match``. A page of
``pairwise_reference`` missing a system's image is that system's failed render (``rendered:
false``, docs/protocol.md "Files"); the other kinds have no failed renders, so the page simply has no item of
it.
"""

from __future__ import annotations

from annotation.services.new_study.create import new_study_create, new_study_plan
from annotation.services.new_study.options import merged_options, options_from_json, with_failure_rule
from annotation.services.new_study.plan import KINDS, NewStudyInput, NewStudyPlan
from annotation.services.new_study.uploads import new_study_from_upload, upload_options

__all__ = [
    "KINDS",
    "NewStudyInput",
    "NewStudyPlan",
    "merged_options",
    "new_study_create",
    "new_study_from_upload",
    "new_study_plan",
    "options_from_json",
    "upload_options",
    "with_failure_rule",
]
