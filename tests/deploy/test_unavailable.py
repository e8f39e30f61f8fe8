"""config/unavailable.py: a request cut off from the database answers 503 + Retry-After; a bug stays 500."""

from __future__ import annotations

import pytest
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path


def lost_database(request: HttpRequest) -> HttpResponse:
    raise OperationalError("consuming input failed: server closed the connection unexpectedly")


def lost_connection(request: HttpRequest) -> HttpResponse:
    raise InterfaceError("connection already closed")


def bug(request: HttpRequest) -> HttpResponse:
    raise ValueError("a bug")


urlpatterns = [path("lost/", lost_database), path("closed/", lost_connection), path("bug/", bug)]


@pytest.fixture
def client_here(settings) -> Client:  # type: ignore[no-untyped-def]
    settings.ROOT_URLCONF = __name__
    settings.DEBUG_PROPAGATE_EXCEPTIONS = False
    return Client(raise_request_exception=False)


@pytest.mark.parametrize("url", ["/lost/", "/closed/"])
def test_a_database_out_of_reach_is_503_with_retry_after(client_here: Client, url: str) -> None:
    response = client_here.get(url)
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert b"database is unreachable" in response.content


def test_any_other_error_stays_500(client_here: Client) -> None:
    response = client_here.get("/bug/")
    assert response.status_code == 500
    assert not response.has_header("Retry-After")
