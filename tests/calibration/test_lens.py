"""The disagreement lens (docs/protocol.md "The disagreement lens"): scripted judges with known biases
answer a study through the emulated provider on a loopback HTTP server; every figure is
recomputed here from the stored outputs and votes, with plain Python."""

from __future__ import annotations

import io
import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from annotation.models import (
    Assignment,
    AssignmentState,
    Block,
    BlockItem,
    Candidate,
    Comparison,
    ComparisonSet,
    Page,
    Rater,
    Study,
    System,
    Trial,
    Vote,
)
from judges.models import JudgeOutput
from tests.judges.factories import image_bytes, make_judge, store
from tests.judges.fake_provider import REFERENCE_COLOUR, SYSTEM_COLOURS, FakeProvider, Received

SLUG = "lens"
SYSTEMS = tuple(SYSTEM_COLOURS)  # alpha, beta, gamma
N_PAGES = 6
POINTS = {"A": 1.0, "TIE": 0.5, "B": 0.0}


class ScriptedJudge(FakeProvider):
    """The emulated provider answering by a rule on what it was shown: ``first`` always names the
    candidate shown first; ``taller`` names the taller candidate image; ``picky`` answers as
    ``first`` but in prose (an invalid reply) when the image shown first is 400 px tall."""

    def __init__(self, rule: str) -> None:
        super().__init__()
        self.rule = rule
        self._seen = threading.local()

    def _parse(self, path: str, headers: dict[str, str], body: bytes) -> Received:
        got = super()._parse(path, headers, body)
        self._seen.got = got  # the reply to this request is written next, on this thread
        return got

    def reply_text(self, behaviour: str, axes: list[str]) -> str:
        got: Received = self._seen.got
        if self.rule == "picky" and got.sizes[1][1] == _height(0, 0):
            return "Candidate B looks better to me."  # prose, never valid JSON
        if self.rule in ("first", "picky"):
            winner = "A"
        else:
            (_, first), (_, second) = got.sizes[1], got.sizes[2]
            winner = "A" if first > second else "B"
        answer = {
            "winner": winner,
            "confidence": 4,
            "reason": f"rule {self.rule}",
            "axes": [{"id": a, "score": 1 if winner == "A" else -1} for a in axes],
        }
        return json.dumps(answer)


def _height(page: int, system: int) -> int:
    return 400 + 60 * ((page + system) % 3)


def _text_blocks(page: int, system: int) -> list[dict[str, Any]]:
    # One text block whose height grows with (page + 2 system) mod 3, one figure block (not text).
    depth = 100 + 150 * ((page + 2 * system) % 3)
    return [
        {"type": "title", "bbox_1000": [50, 20, 950, 80]},
        {"type": "text", "bbox_1000": [50, 100, 950, 100 + depth]},
        {"type": "figure", "bbox_1000": [50, 700, 500, 900]},
    ]


def _people_label(page: int, a: int, b: int, rater: int) -> str:
    """People prefer the system earlier in SYSTEMS, with a tie and a dissent now and then."""
    if (page + rater) % 5 == 0:
        return "TIE"
    if (page + a + b + rater) % 4 == 0:
        return "B" if a < b else "A"
    return "A" if a < b else "B"


def build_study() -> Study:
    study = Study.objects.create(slug=SLUG, title="Lens study", neutralize_media=False, seed=5)
    systems = [
        System.objects.create(study=study, external_id=s, name=f"System {s}", position=i)
        for i, s in enumerate(SYSTEMS)
    ]
    reference, _ = store(image_bytes(REFERENCE_COLOUR, (400, 500)))
    blocks = [
        Block.objects.create(study=study, name=f"blk-{k}", position=k, target_raters=3) for k in range(2)
    ]
    members: dict[int, list[Comparison]] = {0: [], 1: []}
    for p in range(N_PAGES):
        page = Page.objects.create(study=study, external_id=f"p{p}", image=reference, position=p)
        cands = []
        for i, system in enumerate(systems):
            image, _ = store(image_bytes(SYSTEM_COLOURS[system.external_id], (400, _height(p, i))))
            cands.append(
                Candidate.objects.create(
                    page=page,
                    system=system,
                    image=image,
                    blocks=_text_blocks(p, i),
                    media=[{"kind": "photo", "bbox_1000": [50, 700, 500, 700 + 50 * ((p + i) % 3 + 1)]}],
                )
            )
        for a, b in ((0, 1), (1, 2), (0, 2)):
            first, second = (a, b) if p % 2 else (b, a)  # canonical A is sometimes the worse system
            comparison = Comparison.objects.create(
                study=study,
                external_id=f"c{p}-{SYSTEMS[first]}-{SYSTEMS[second]}",
                page=page,
                candidate_a=cands[first],
                candidate_b=cands[second],
                set=ComparisonSet.HUMAN,
            )
            members[p % 2].append(comparison)
    for k, block in enumerate(blocks):
        for pos, comparison in enumerate(members[k]):
            BlockItem.objects.create(block=block, position=pos, comparison=comparison)
        for r in range(3):
            rater = Rater.objects.create(study=study, external_id=f"{block.name}-r{r}")
            assignment = Assignment.objects.create(
                block=block, slot=r, rater=rater, state=AssignmentState.FINISHED
            )
            for pos, comparison in enumerate(members[k]):
                p = int(comparison.page.external_id[1:])
                a = SYSTEMS.index(comparison.candidate_a.system.external_id)
                b = SYSTEMS.index(comparison.candidate_b.system.external_id)
                trial = Trial.objects.create(
                    assignment=assignment, position=pos, comparison=comparison, swapped=bool(r % 2)
                )
                Vote.objects.create(trial=trial, label=_people_label(p, a, b, r), confidence=3)
    return study


@pytest.fixture(scope="module")
def lens_built(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    """The study and both judges' calls, made once for the module in a transaction rolled back
    after its last test (each test's own transaction nests in it). Returns the media folder."""
    from django.db import transaction
    from django.test.utils import override_settings

    media = tmp_path_factory.mktemp("lens-media")
    servers = {
        "always-first": ScriptedJudge("first").start(),
        "prefers-taller": ScriptedJudge("taller").start(),
        "picky": ScriptedJudge("picky").start(),
    }
    with (
        pytest.MonkeyPatch.context() as patch,
        django_db_blocker.unblock(),
        override_settings(MEDIA_ROOT=media, ARBITER_JUDGE_BACKOFF_BASE=0.01, ARBITER_JUDGE_BACKOFF_CAP=0.05),
        transaction.atomic(),
    ):
        patch.setenv("ARBITER_TEST_JUDGE_KEY", "sk-test-secret-0123456789")
        build_study()
        for name, server in servers.items():
            make_judge(name, base_url=server.url, concurrency=1, max_invalid_retries=0)
            call_command("run_judges", SLUG, "--judge", name, "--set", "human", stdout=io.StringIO())
        try:
            for server in servers.values():
                assert server.problems == []
            yield media
        finally:
            for server in servers.values():
                server.stop()
            transaction.set_rollback(True)


@pytest.fixture
def lens_study(lens_built: Path, settings) -> Study:  # type: ignore[no-untyped-def]
    settings.MEDIA_ROOT = lens_built
    return Study.objects.get(slug=SLUG)


@pytest.fixture
def staff(lens_study: Study, researcher) -> APIClient:  # type: ignore[no-untyped-def]
    lens_study.researchers.add(researcher)
    client = APIClient()
    client.force_authenticate(researcher)
    return client


def report_of(client: APIClient, judge: str, **query: str) -> dict[str, Any]:
    response = client.get(f"/api/studies/{SLUG}/disagreement/", {"judge": judge, **query})
    assert response.status_code == 200, response.content
    return response.json()


# -- independent computations from the stored rows --------------------------------------------------


def stored_outputs(judge: str) -> dict[str, dict[str, str]]:
    """{comparison: {order: canonical winner}} of a judge's valid outputs (repeat 0)."""
    out: dict[str, dict[str, str]] = {}
    for c, order, winner in JudgeOutput.objects.filter(judge__name=judge, status="valid").values_list(
        "comparison__external_id", "order", "winner"
    ):
        out.setdefault(c, {})[order] = winner
    return out


def stored_votes() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c, label in Vote.objects.filter(trial__comparison__study__slug=SLUG).values_list(
        "trial__comparison__external_id", "label"
    ):
        out.setdefault(c, []).append(label)
    return out


def plurality(labels: list[str]) -> str | None:
    counts = Counter(labels).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return counts[0][0]


def verdicts(judge: str) -> dict[str, str]:
    return {
        c: (o["primary"] if o["primary"] == o["swapped"] else "TIE") for c, o in stored_outputs(judge).items()
    }


# -- tests -------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_always_first_is_biased_toward_the_first_every_time(staff: APIClient) -> None:
    report = report_of(staff, "always-first")
    n = 3 * N_PAGES
    assert report["position"]["n_cases"] == n
    assert report["position"]["counts"] == {
        "consistent": 0,
        "biased_first": n,
        "biased_second": 0,
        "error": 0,
    }
    assert report["position"]["shares"]["biased_first"] == 1.0
    assert report["position"]["inconsistent"] == n  # both orders name a winner, opposite ones
    # Its verdicts are all TIE (Zheng's swap rule), so with ties dropped nothing is left.
    assert report["agreement"]["judge_vs_majority"]["without_ties"]["n"] == 0


@pytest.mark.django_db
def test_a_call_without_a_valid_reply_in_an_order_is_an_error(staff: APIClient, tmp_path: Path) -> None:
    report = report_of(staff, "picky")
    statuses: dict[str, set[str]] = {}
    for c, status in JudgeOutput.objects.filter(judge__name="picky").values_list(
        "comparison__external_id", "status"
    ):
        statuses.setdefault(c, set()).add(status)
    errors = sum(1 for s in statuses.values() if s != {"valid"})
    assert 0 < errors < len(statuses)
    assert report["position"]["counts"] == {
        "consistent": 0,
        "biased_first": len(statuses) - errors,
        "biased_second": 0,
        "error": errors,
    }
    row = next(r for r in report["drilldown"] if any(c["case"] == "error" for c in r["cases"]))
    assert any(
        o["status"] == "invalid" and o["winner"] is None and o["reason"] for o in row["judges"]["picky"]
    )
    out = tmp_path / "picky.json"
    call_command("judge_disagreement", SLUG, "--judge", "picky", "--json", str(out), stdout=io.StringIO())
    assert json.loads(out.read_text()) == report


@pytest.mark.django_db
def test_a_judge_preferring_the_taller_page_shows_it_in_the_conditioned_table(staff: APIClient) -> None:
    report = report_of(staff, "prefers-taller")
    assert report["position"]["counts"]["consistent"] == 3 * N_PAGES
    rows = {r["attribute"]: r for r in report["conditioned"]}
    assert rows["height"]["judge"] == {"p": 1.0, "n": 2 * 3 * N_PAGES, "n_comparisons": 3 * N_PAGES}
    # People, recomputed from the votes and the candidates' stored image heights.
    points = []
    for comparison in Comparison.objects.filter(study__slug=SLUG).select_related(
        "candidate_a__image", "candidate_b__image"
    ):
        taller = "A" if comparison.candidate_a.image.height > comparison.candidate_b.image.height else "B"
        for label in stored_votes()[comparison.external_id]:
            points.append(POINTS[label] if taller == "A" else 1 - POINTS[label])
    assert rows["height"]["people"]["n"] == len(points) == 3 * 3 * N_PAGES
    assert rows["height"]["people"]["p"] == pytest.approx(sum(points) / len(points), abs=1e-12)
    # The always-first judge has no such preference: each order favours the taller page half the time.
    first = {r["attribute"]: r for r in report_of(staff, "always-first")["conditioned"]}
    assert first["height"]["judge"]["p"] == pytest.approx(0.5)
    assert rows["failed"]["n_comparisons"] == 0 and rows["failed"]["judge"]["p"] is None


@pytest.mark.django_db
def test_text_and_media_areas_come_from_the_blocks_and_regions(staff: APIClient) -> None:
    report = report_of(staff, "prefers-taller")
    assert report["text_measure"] == "area"  # no candidate kept its page's text
    row = next(r for r in report["drilldown"] if r["comparison"].startswith("c1-"))
    comparison = Comparison.objects.select_related("candidate_a__image").get(
        study__slug=SLUG, external_id=row["comparison"]
    )
    image = comparison.candidate_a.image
    text = (
        sum(
            (b["bbox_1000"][2] - b["bbox_1000"][0]) * (b["bbox_1000"][3] - b["bbox_1000"][1])
            for b in comparison.candidate_a.blocks
            if b["type"] != "figure"
        )
        / 1e6
        * image.width
        * image.height
    )
    media = (
        sum(
            (m["bbox_1000"][2] - m["bbox_1000"][0]) * (m["bbox_1000"][3] - m["bbox_1000"][1])
            for m in comparison.candidate_a.media
        )
        / 1e6
        * image.width
        * image.height
    )
    assert row["attributes"]["text_a"] == pytest.approx(text)
    assert row["attributes"]["media_a"] == pytest.approx(media)
    assert row["attributes"]["height_a"] == image.height


@pytest.mark.django_db
@pytest.mark.parametrize("judge", ["always-first", "prefers-taller"])
def test_agreement_recomputed_from_the_stored_answers(staff: APIClient, judge: str) -> None:
    report = report_of(staff, judge)["agreement"]
    votes, verdict = stored_votes(), verdicts(judge)
    kept = dropped = kept_n = dropped_n = 0
    raters = raters_n = raters_nt = raters_nt_n = 0
    pairs = pairs_n = pairs_nt = pairs_nt_n = 0
    for c, v in verdict.items():
        label = plurality(votes[c])
        if label is not None:
            kept_n += 1
            kept += v == label
            if v != "TIE" and label != "TIE":
                dropped_n += 1
                dropped += v == label
        for x in votes[c]:
            raters_n += 1
            raters += v == x
            if "TIE" not in (v, x):
                raters_nt_n += 1
                raters_nt += v == x
        labels = votes[c]
        for i in range(len(labels)):
            for j in range(i + 1, len(labels)):
                pairs_n += 1
                pairs += labels[i] == labels[j]
                if "TIE" not in (labels[i], labels[j]):
                    pairs_nt_n += 1
                    pairs_nt += labels[i] == labels[j]
    got = report["judge_vs_majority"]
    assert (got["with_ties"]["agree"], got["with_ties"]["n"]) == (kept, kept_n)
    assert (got["without_ties"]["agree"], got["without_ties"]["n"]) == (dropped, dropped_n)
    got = report["judge_vs_raters"]
    assert (got["with_ties"]["agree"], got["with_ties"]["n"]) == (raters, raters_n)
    assert (got["without_ties"]["agree"], got["without_ties"]["n"]) == (raters_nt, raters_nt_n)
    got = report["human_vs_human"]
    assert (got["with_ties"]["agree"], got["with_ties"]["n"]) == (pairs, pairs_n)
    assert (got["without_ties"]["agree"], got["without_ties"]["n"]) == (pairs_nt, pairs_nt_n)
    assert report["judge_vs_majority"]["with_ties"]["value"] == pytest.approx(kept / kept_n)


@pytest.mark.django_db
def test_agreement_by_gap_recomputed(staff: APIClient) -> None:
    section = report_of(staff, "prefers-taller")["agreement_by_gap"]
    points: dict[str, list[float]] = {}
    for comparison in Comparison.objects.filter(study__slug=SLUG).select_related(
        "candidate_a__system", "candidate_b__system"
    ):
        for label in stored_votes()[comparison.external_id]:
            points.setdefault(comparison.candidate_a.system.external_id, []).append(POINTS[label])
            points.setdefault(comparison.candidate_b.system.external_id, []).append(1 - POINTS[label])
    rates = {s: sum(p) / len(p) for s, p in points.items()}
    assert section["system_win_rates"] == pytest.approx(rates)
    expected: Counter[int] = Counter()
    agree: Counter[int] = Counter()
    votes, verdict = stored_votes(), verdicts("prefers-taller")
    for comparison in Comparison.objects.filter(study__slug=SLUG).select_related(
        "candidate_a__system", "candidate_b__system"
    ):
        label = plurality(votes[comparison.external_id])
        if label is None:
            continue
        gap = abs(
            rates[comparison.candidate_a.system.external_id]
            - rates[comparison.candidate_b.system.external_id]
        )
        k = min(int(gap * 10 + 1e-12), 9)
        expected[k] += 1
        agree[k] += verdict[comparison.external_id] == label
    assert [b["with_ties"]["n"] for b in section["bins"]] == [expected[k] for k in range(10)]
    assert [b["with_ties"]["agree"] for b in section["bins"]] == [agree[k] for k in range(10)]


@pytest.mark.django_db
def test_drilldown_order_filters_and_pages(staff: APIClient) -> None:
    report = report_of(staff, "prefers-taller")
    votes = stored_votes()
    rows = []
    for c, o in stored_outputs("prefers-taller").items():
        x = sum(POINTS[w] for w in o.values()) / len(o)
        h = sum(POINTS[v] for v in votes[c]) / len(votes[c])
        rows.append((-abs(x - h), -len(votes[c]), c))
    assert [r["comparison"] for r in report["drilldown"]] == [c for _, _, c in sorted(rows)]
    assert report["drilldown"][0]["disagreement"] == pytest.approx(-sorted(rows)[0][0])
    first = report["drilldown"][0]
    assert set(first["judges"]) == {"always-first", "prefers-taller", "picky"}
    assert sorted((o["order"], o["winner"] is not None) for o in first["judges"]["always-first"]) == [
        ("primary", True),
        ("swapped", True),
    ]
    assert first["residual"] is not None and report["calibration"]["residual"] == "out_of_fold"
    # Filtered by a pair and by a condition: the same order, only matching rows.
    pair = "alpha | gamma"
    narrowed = report_of(staff, "prefers-taller", pair=pair)["drilldown"]
    assert [r["comparison"] for r in narrowed] == [
        r["comparison"] for r in report["drilldown"] if r["pair"] == pair
    ]
    assert narrowed and all(
        r["system_a"] in ("alpha", "gamma") and r["system_b"] in ("alpha", "gamma") for r in narrowed
    )
    taller = report_of(staff, "prefers-taller", condition="taller")["drilldown"]
    expected = [
        r["comparison"] for r in report["drilldown"] if (r["judge_mean"] - 0.5) * (r["h"] - 0.5) < 0
    ]  # the judge always leans to the taller page: every opposite lean is the 'taller' condition
    assert [r["comparison"] for r in taller] == expected and expected
    # Pages keep the order.
    paged = report_of(staff, "prefers-taller", page="2", page_size="5")
    assert [r["comparison"] for r in paged["drilldown"]] == [r["comparison"] for r in report["drilldown"]][
        5:10
    ]
    assert paged["drilldown_page"]["pages"] == -(-len(report["drilldown"]) // 5)


@pytest.mark.django_db
def test_command_json_equals_the_api(staff: APIClient, tmp_path: Path) -> None:
    out = tmp_path / "lens.json"
    stdout = io.StringIO()
    call_command("judge_disagreement", SLUG, "--judge", "always-first", "--json", str(out), stdout=stdout)
    assert json.loads(out.read_text()) == report_of(staff, "always-first")
    assert "18 biased toward the first" in stdout.getvalue()


@pytest.mark.django_db
def test_page_shows_the_tables_images_and_pages(lens_study: Study, researcher) -> None:  # type: ignore[no-untyped-def]
    lens_study.researchers.add(researcher)
    client = Client()
    client.force_login(researcher)
    shell = client.get(f"/studies/{SLUG}/disagreement/", {"judge": "prefers-taller", "condition": "taller"})
    assert shell.status_code == 200
    # The page answers at once; its body comes on its own request, with the same choices.
    assert 'hx-get="/studies/lens/disagreement/?part=body&amp;judge=prefers-taller&amp;condition=taller"' in (
        shell.content.decode()
    )
    response = client.get(f"/studies/{SLUG}/disagreement/", {"judge": "prefers-taller", "part": "body"})
    assert response.status_code == 200
    html = response.content.decode()
    for anchor in ('id="position"', 'id="agreement"', 'id="gap"', 'id="conditioned"', 'id="drilldown"'):
        assert anchor in html
    assert html.count('<article class="card"') == 3 * N_PAGES
    assert "Page 1 of" not in html  # 18 rows, 20 a page: one page, no page links
    first = report_of_client(client)["drilldown"][0]
    assert first["images"]["a"] in html
    image = client.get(first["images"]["a"])
    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    assert b"".join(image.streaming_content).startswith(b"\x89PNG")
    # A filter narrows the list; a bad one is said in place of the body.
    narrowed = client.get(
        f"/studies/{SLUG}/disagreement/", {"judge": "prefers-taller", "part": "body", "condition": "taller"}
    ).content.decode()
    taller = [r for r in report_of_client(client)["drilldown"] if "taller" in r["conditions"]]
    assert narrowed.count('<article class="card"') == len(taller) > 0
    bad = client.get(
        f"/studies/{SLUG}/disagreement/", {"judge": "prefers-taller", "part": "body", "condition": "x"}
    )
    assert "field &#x27;condition&#x27;: expected one of inconsistent" in bad.content.decode()


def report_of_client(client: Client) -> dict[str, Any]:
    return client.get(f"/api/studies/{SLUG}/disagreement/", {"judge": "prefers-taller"}).json()


@pytest.mark.django_db
def test_raters_and_other_researchers_cannot_reach_the_lens(
    lens_study: Study, rater_user, other_researcher
) -> None:  # type: ignore[no-untyped-def]
    comparison = Comparison.objects.filter(study=lens_study).first()
    assert comparison is not None
    paths = [
        f"/studies/{SLUG}/disagreement/?judge=always-first",
        f"/api/studies/{SLUG}/disagreement/?judge=always-first",
        f"/studies/{SLUG}/comparisons/{comparison.pk}/a.png",
        f"/studies/{SLUG}/candidates/{comparison.candidate_a_id}.png",
    ]
    for user, statuses in ((rater_user, {403}), (other_researcher, {404})):
        client = Client()
        client.force_login(user)
        for path in paths:
            assert client.get(path).status_code in statuses, (user, path)
    anonymous = Client()
    for path in paths:
        assert anonymous.get(path).status_code in (302, 401, 403)


@pytest.mark.django_db
def test_empty_states_say_what_to_do(researcher) -> None:  # type: ignore[no-untyped-def]
    study = Study.objects.create(slug="lens-empty", title="Empty lens")
    study.researchers.add(researcher)
    client = Client()
    client.force_login(researcher)
    html = client.get("/studies/lens-empty/disagreement/").content.decode()
    assert "No judge has answered" in html and "run_judges lens-empty" in html
    # A judge with calls but no votes: the report says votes are missing, and what to do.
    system = System.objects.create(study=study, external_id="s", name="s")
    other = System.objects.create(study=study, external_id="t", name="t")
    page = Page.objects.create(study=study, external_id="p")
    comparison = Comparison.objects.create(
        study=study,
        external_id="c",
        page=page,
        candidate_a=Candidate.objects.create(page=page, system=system),
        candidate_b=Candidate.objects.create(page=page, system=other),
    )
    judge = make_judge("quiet", base_url="http://127.0.0.1:9/v1")
    for order, winner in (("primary", "A"), ("swapped", "A")):
        JudgeOutput.objects.create(
            judge=judge, comparison=comparison, order=order, status="valid", winner=winner
        )
    api = APIClient()
    api.force_authenticate(researcher)
    report = api.get("/api/studies/lens-empty/disagreement/", {"judge": "quiet"}).json()
    assert report["position"]["counts"]["consistent"] == 1
    assert any(step.startswith("no human votes yet") for step in report["next_steps"])
    assert report["drilldown"] == []
    html = client.get(
        "/studies/lens-empty/disagreement/", {"judge": "quiet", "part": "body"}
    ).content.decode()
    assert "no human votes yet" in html
    # A `pairwise` study (no reference image) with a vote: the row has no reference to show.
    study.kind = "pairwise"
    study.save(update_fields=["kind"])
    block = Block.objects.create(study=study, name="b", position=0)
    assignment = Assignment.objects.create(
        block=block,
        slot=0,
        rater=Rater.objects.create(study=study, external_id="r"),
        state=AssignmentState.FINISHED,
    )
    Vote.objects.create(
        trial=Trial.objects.create(assignment=assignment, position=0, comparison=comparison), label="B"
    )
    (row,) = api.get("/api/studies/lens-empty/disagreement/", {"judge": "quiet"}).json()["drilldown"]
    assert row["images"]["reference"] is None and row["images"]["a"].endswith(f"/{comparison.pk}/a.png")
    assert (row["judge_mean"], row["h"], row["disagreement"]) == (1.0, 0.0, 1.0)
    unknown = api.get("/api/studies/lens-empty/disagreement/", {"judge": "nobody"})
    assert unknown.status_code == 400 and "quiet" in unknown.json()["detail"]
