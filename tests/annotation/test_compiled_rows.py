"""compiled_rows: a hot values() query compiled once answers like the ORM for every argument."""

from __future__ import annotations

import pytest
from django.db import connection

from annotation.models import Trial
from annotation.selectors.compiled import compiled_instances, compiled_rows
from tests.annotation.test_rater_flow import scheduled

pytestmark = pytest.mark.django_db


def _query(assignment_id: int, token: str):  # type: ignore[no-untyped-def]
    return (
        Trial.objects.filter(assignment_id=assignment_id, assignment__state="open").exclude(token=token)
        .order_by("position").values("id", "position", "swapped", "assignment__block__study__slug")[:3]
    )


def test_compiled_rows_match_the_orm_for_every_argument() -> None:
    scheduled()
    trials = list(Trial.objects.order_by("assignment_id", "position")[:40])
    for trial in trials:
        expected = list(_query(trial.assignment_id, trial.token))
        got = compiled_rows("test:rows", _query, trial.assignment_id, trial.token)
        assert [{**r, "swapped": bool(r["swapped"])} for r in got] == expected
    assert compiled_rows("test:rows", _query, -1, "nothing") == []


def test_compiled_rows_bind_only_plain_arguments() -> None:
    with pytest.raises(TypeError):
        compiled_rows("test:float", lambda x: Trial.objects.filter(position=x).values("id"), 1.5)
    with pytest.raises(ValueError, match="plain parameter"):  # a transformed argument is not bound as given
        compiled_rows("test:lower", lambda t: Trial.objects.filter(token__icontains=t).values("id"), "ab")


def _trial_query(token: str):  # type: ignore[no-untyped-def]
    return Trial.objects.select_related("assignment__block__study", "comparison__page").filter(token=token).order_by("pk")[:1]


def test_compiled_instances_are_the_orm_instances_with_their_related_objects(django_assert_num_queries) -> None:  # type: ignore[no-untyped-def]
    scheduled()
    trials = list(Trial.objects.order_by("pk")[:30])
    compiled_instances("test:instances", _trial_query, trials[0].token)  # compiled here (the first call)
    for trial in trials:
        expected = _trial_query(trial.token)[0]
        with django_assert_num_queries(1):  # one query, and the related objects came with it
            [got] = compiled_instances("test:instances", _trial_query, trial.token)
            study, page = got.assignment.block.study, got.comparison.page
        assert (got.pk, got.token, got.position, got.swapped, got.shown_at) == (
            expected.pk, expected.token, expected.position, expected.swapped, expected.shown_at
        )
        assert (study.pk, study.slug, page.pk, page.targets) == (
            expected.assignment.block.study.pk, expected.assignment.block.study.slug,
            expected.comparison.page.pk, expected.comparison.page.targets,
        )
    assert compiled_instances("test:instances", _trial_query, "no-such-token") == []


@pytest.mark.django_db(transaction=True)  # the other threads' connections see the committed study
def test_compiled_instances_are_compiled_per_thread() -> None:
    import threading

    scheduled()
    tokens = list(Trial.objects.order_by("pk").values_list("token", flat=True)[:4])
    seen: list[str] = []
    errors: list[BaseException] = []

    def read(token: str) -> None:
        try:
            seen.extend(t.token for t in compiled_instances("test:threads", _trial_query, token))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            if threading.current_thread() is not threading.main_thread():
                connection.close()

    read(tokens[0])
    if connection.vendor == "sqlite":  # an in-memory test database is one connection's
        assert seen == tokens[:1]
        return
    threads = [threading.Thread(target=read, args=(t,)) for t in tokens[1:]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and sorted(seen) == sorted(tokens)


@pytest.mark.postgres
def test_postgresql_plans_a_hot_query_once_per_connection() -> None:
    """The compiled hot queries are prepared (DATABASE_PREPARED_STATEMENTS): the trial an answer
    is for is a prepared statement of the connection, and PostgreSQL keeps its plan."""
    from annotation.services.answers import vote_trial

    scheduled()
    token = Trial.objects.order_by("pk").values_list("token", flat=True).first()
    for _ in range(3):
        assert vote_trial(token).token == token
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s AND generic_plans + custom_plans > 0",
            ["%FROM \"annotation_trial\"%\"annotation_trial\".\"token\" = $1%"],
        )
        assert cursor.fetchone()[0] >= 1


def test_compiled_update_writes_what_the_orm_update_writes() -> None:
    from django.utils import timezone

    from annotation.selectors.compiled import compiled_update
    from annotation.services.candidate_versions import versions_now

    def shown(trial_id: int, now):  # type: ignore[no-untyped-def]
        return Trial.objects.filter(pk=trial_id, shown_at__isnull=True), {"shown_at": now, **versions_now()}

    scheduled()
    first, second = Trial.objects.filter(shown_at__isnull=True, comparison__isnull=False).order_by("pk")[:2]
    now = timezone.now()
    assert Trial.objects.filter(pk=first.pk, shown_at__isnull=True).update(shown_at=now, **versions_now()) == 1
    assert compiled_update("test:shown", shown, second.pk, now) == 1
    assert compiled_update("test:shown", shown, second.pk, timezone.now()) == 0  # already shown: the condition holds
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.shown_at == second.shown_at == now
    expected = (second.comparison.candidate_a.version, second.comparison.candidate_b.version)
    assert (second.version_a, second.version_b) == expected and None not in expected
    assert (first.version_a, first.version_b) == (first.comparison.candidate_a.version, first.comparison.candidate_b.version)


@pytest.mark.postgres
def test_other_queries_keep_client_side_binding_and_its_unlimited_parameters() -> None:
    """Only the compiled hot queries bind server-side: a 70,000-item ``__in`` (over the 65,535
    parameters a server-side-bound statement may carry) still runs, and nothing else is prepared."""
    scheduled()
    assert Trial.objects.filter(pk__in=list(range(-70_000, 0))).count() == 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ['%"id" IN (%'])
        assert cursor.fetchone()[0] == 0


@pytest.mark.django_db(transaction=True)
def test_a_compiled_locking_read_outside_a_transaction_is_refused_every_time() -> None:
    """Django checks ``select_for_update`` when it compiles; a compiled query checks on every call."""
    from django.db import transaction
    from django.db.transaction import TransactionManagementError

    from annotation.models import Assignment

    scheduled()
    pk = Assignment.objects.order_by("pk").values_list("pk", flat=True).first()

    def locked(assignment_id: int):  # type: ignore[no-untyped-def]
        return Assignment.objects.select_for_update().filter(pk=assignment_id).order_by()[:1]

    with transaction.atomic():
        assert [a.pk for a in compiled_instances("test:locked", locked, pk)] == [pk]
    if not connection.features.has_select_for_update:  # SQLite: Django does not check either
        assert [a.pk for a in compiled_instances("test:locked", locked, pk)] == [pk]
        return
    for _ in range(2):
        with pytest.raises(TransactionManagementError):
            compiled_instances("test:locked", locked, pk)


@pytest.mark.postgres
def test_a_prepared_hot_query_is_planned_once_not_per_call(settings) -> None:  # type: ignore[no-untyped-def]
    """Every connection plans its prepared statements generically (annotation.selectors.compiled
    .generic_plans): PostgreSQL's default would re-plan the 16-join trial read on each call for
    as long as a plan for the given values looks cheaper."""
    from django.db import connections

    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "force_generic_plan"
    settings.DATABASE_PREPARED_STATEMENTS = False  # behind a PgBouncer without prepared statements
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SHOW plan_cache_mode")
            assert cursor.fetchone()[0] == "auto"
    finally:
        other.close()


def test_compiled_create_stores_what_objects_create_stores(django_assert_num_queries) -> None:  # type: ignore[no-untyped-def]
    """The vote's compiled INSERT: same columns as the ORM's create (defaults, JSON, auto_now_add),
    one statement per call, the key returned; and a duplicate still hits the unique constraint."""
    from django.db import IntegrityError, transaction
    from django.forms.models import model_to_dict

    from annotation.models import Vote
    from annotation.selectors.compiled import compiled_create

    scheduled()
    first, second, third = Trial.objects.order_by("pk")[:3]
    values = {"label": "A", "confidence": 4, "axis_scores": {"GLOBAL_LAYOUT_FIDELITY": -2}, "rationale": "é \u00a0 ok",
              "response_ms": 1234, "idempotency_key": "k1", "request_hash": "h" * 64}
    expected = Vote.objects.create(trial_id=first.pk, **values)
    compiled_create("test:vote", Vote, trial_id=second.pk, **values)  # compiled here (the first call)
    with django_assert_num_queries(1):
        got = compiled_create("test:vote", Vote, trial_id=third.pk, **{**values, "answers": {"ratings": {"x": 3}}})
    assert got.pk is not None and not got._state.adding
    stored = Vote.objects.get(pk=got.pk)
    reference = Vote.objects.get(pk=expected.pk)
    skip = {"id", "trial", "answers"}
    assert {k: v for k, v in model_to_dict(stored).items() if k not in skip} == {
        k: v for k, v in model_to_dict(reference).items() if k not in skip
    }
    assert stored.trial_id == third.pk and stored.answers == {"ratings": {"x": 3}} and reference.answers == {}
    assert stored.history == [] and stored.created_at is not None and stored.created_at >= reference.created_at
    assert (got.created_at, got.axis_scores) == (stored.created_at, stored.axis_scores)
    with pytest.raises(IntegrityError), transaction.atomic():
        compiled_create("test:vote", Vote, trial_id=third.pk, **values)  # one vote per trial, still


def test_a_compiled_query_refuses_a_fetch_mode_that_tracks_peers() -> None:
    """Its related-object populators are built once and reused; tracking peers would make them
    collect every call's instances."""
    from django.db.models.fetch_modes import FETCH_PEERS

    with pytest.raises(ValueError, match="tracks peers"):
        compiled_instances("test:peers", lambda t: _trial_query(t).fetch_mode(FETCH_PEERS), "token")
