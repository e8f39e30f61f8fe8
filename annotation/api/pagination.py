"""One page of a list endpoint: the view's ``pagination_class`` (the project's LimitOffsetPagination),
answered as ``count, next, previous, results``; drf-spectacular documents the page and its
``limit`` / ``offset`` parameters from the same attribute."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


def paginated_response(
    view: APIView, request: Request, queryset: Any, serializer: type[serializers.Serializer]
) -> Response:
    pagination_class = getattr(view, "pagination_class", None)
    paginator = pagination_class() if pagination_class else None
    if paginator is None:
        return Response(serializer(queryset, many=True).data)
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(serializer(page, many=True).data)
