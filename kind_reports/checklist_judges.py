"""The checklist report's judge sections (docs/protocol.md "Checklist judges", "Judge reliability against
people"; AesCode §E.1, §E.3, §4.4).

Per judge that answered the study's checklist:

- ``scores``: per system the pass rate per dimension and the Visual score, with brief-bootstrap
  intervals (``stats.checklist_judges``);
- ``reliability``: agreement with the three-person human majority on Yes/No-majority questions, overall
  and per dimension, cluster bootstrap by brief (``stats.checklist``, the judge as one automatic
  source: its passes are YES, its unclear answers UNCLEAR, every other answer NO; a human UNCLEAR is
  missing);
- ``score_preference``: where the study names a pairwise study on the same briefs and systems
  (``options.preference_study``, its slug), the share of that study's unequal-score pairs where people
  chose the image the judge's Visual score puts higher (ties ½), equal-score pairs apart, by relative
  gap < 5, 5–15, ≥ 15 points of the 0–100 range (``stats.score_preference``). The pairwise study's
  votes are its kept data answers (its own exclusion rules applied), and an image is matched to a
  checklist rendering by brief and system id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from annotation.errors import ValidationFailed
from annotation.models import Candidate, Study

if TYPE_CHECKING:
    import pandas as pd

SOURCE_PREFIX = "automatic:"
VISUAL_RANGE = (0.0, 100.0)


def judge_source(answer: str, passed: bool) -> str:
    """A judge's answer as an automatic source of the agreement (module docstring)."""
    if passed:
        return "YES"
    return "UNCLEAR" if answer == "UNCLEAR" else "NO"


def with_judge_sources(predicates: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """The predicates frame with one ``automatic:<judge>`` column per judge (empty where it has no answer)."""
    out = predicates.copy()
    for judge, rows in answers.groupby("judge", sort=True):
        mapping = {
            p: judge_source(a, bool(ok))
            for p, a, ok in zip(rows["predicate"], rows["answer"], rows["passed"], strict=True)
        }
        out[SOURCE_PREFIX + str(judge)] = [mapping.get(p) for p in out["predicate"]]
    return out


def preference_votes(study: Study) -> tuple[str, pd.DataFrame, dict[str, tuple[str, str]]] | None:
    """The linked pairwise study's kept votes (``score_preference`` frame) and each of its images'
    (brief, system); None when the study names none."""
    slug = str((study.options or {}).get("preference_study") or "").strip()
    if not slug:
        return None
    from calibration.services.exclusion_rules import hygiene_rules
    from kind_reports.kinds.pairwise import pairwise_votes_frame
    from kind_reports.services import kind_frames
    from stats.hygiene import apply_hygiene

    other = Study.objects.filter(slug=slug).first()
    if other is None or other.kind != "pairwise":
        raise ValidationFailed(
            f"options.preference_study: {slug!r} is not a pairwise study", field="preference_study"
        )
    frames = kind_frames(other)
    if frames.hygiene.empty:
        return slug, pairwise_votes_frame(frames.data), {}
    kept = apply_hygiene(frames.hygiene, hygiene_rules(other, None, where="")).kept
    data = frames.data[frames.data["trial_id"].isin(set(kept["trial_id"].tolist()))].reset_index(drop=True)
    items = {
        external_id: (brief, system)
        for external_id, brief, system in Candidate.objects.filter(page__study=other)
        .exclude(external_id="")
        .values_list("external_id", "page__external_id", "system__external_id")
    }
    return slug, pairwise_votes_frame(data), items


def checklist_judges_section(
    *,
    study: Study,
    predicates: pd.DataFrame,
    answers: pd.DataFrame,
    human: pd.DataFrame,
    k: int,
    resamples: int,
    seed: int,
) -> list[dict[str, Any]]:
    """One entry per judge (module docstring). ``predicates`` and ``human`` are the frames of
    ``stats.checklist.checklist_agreement``; ``answers`` is ``judges.selectors.checklist_judge_answers``."""
    import pandas as pd

    from stats.checklist import checklist_agreement
    from stats.checklist_judges import checklist_judge_scores
    from stats.score_preference import score_preference

    if answers.empty:
        return []
    reliability: dict[str, Any] = {}
    if not human.empty:
        agreement = checklist_agreement(
            human,
            with_judge_sources(predicates[["predicate", "brief", "question_type"]], answers),
            resamples=resamples,
            seed=seed,
            k=k,
        )
        reliability = {s.source: s.to_dict() for s in agreement.sources}
    linked = preference_votes(study)
    out = []
    for judge, rows in answers.groupby("judge", sort=True):
        frame = pd.DataFrame(
            {
                "brief": rows["brief"],
                "system": rows["system"],
                "item": rows["item"],
                "predicate": rows["predicate"],
                "dimension": rows["question_type"],
                "passed": rows["passed"],
            }
        )
        scores = checklist_judge_scores(frame, resamples=resamples, seed=seed)
        entry: dict[str, Any] = {
            "judge": str(judge),
            "n_questions": len(rows),
            "n_unclear": int((rows["answer"] == "UNCLEAR").sum()),
            "n_without_evidence": int(
                ((rows["answer"] != "UNCLEAR") & (rows["evidence"].str.strip() == "")).sum()
            ),
            "n_passed": int(rows["passed"].sum()),
            "input_tokens": int(rows.drop_duplicates("output_id")["input_tokens"].fillna(0).sum()),
            "output_tokens": int(rows.drop_duplicates("output_id")["output_tokens"].fillna(0).sum()),
            "scores": scores.to_dict(),
            "reliability": reliability.get(str(judge)),
            "score_preference": None,
        }
        if linked is not None:
            slug, votes, items = linked
            visual = {(i["brief"], i["system"]): i["visual"] for i in scores.items}
            metric = f"visual:{judge}"
            score_rows = [
                {"item": item, "metric": metric, "score": visual[key]}
                for item, key in items.items()
                if key in visual
            ]
            if votes.empty or not score_rows:
                entry["score_preference"] = {"study": slug, "metric": metric, "n_pairs": 0}
            else:
                result = score_preference(
                    votes,
                    pd.DataFrame(score_rows, columns=["item", "metric", "score"]),
                    resamples=resamples,
                    seed=seed,
                    ranges={metric: VISUAL_RANGE},
                )
                entry["score_preference"] = {"study": slug, **result.to_dict()}
        out.append(entry)
    return out
