"""URL map. Each area owns one URL module; web pages and their REST endpoints (under api/) sit together."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from annotation.views.auth import ThrottledLoginView, ThrottledObtainAuthToken
from annotation.views.home import home
from config.metrics import metrics_view

urlpatterns = [
    path("", home, name="home"),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Set-password links of rater accounts created on the study pages (annotation.services.accounts).
    path(
        "accounts/set-password/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(
            template_name="registration/set_password.html", success_url="/accounts/set-password/done/"
        ),
        name="password_reset_confirm",
    ),
    path(
        "accounts/set-password/done/",
        auth_views.PasswordResetCompleteView.as_view(template_name="registration/set_password_done.html"),
        name="password_reset_complete",
    ),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("api/auth/token/", ThrottledObtainAuthToken.as_view(), name="api-token"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include("annotation.urls.studies")),
    path("", include("annotation.urls.rater")),
    path("", include("annotation.urls.research")),
    path("", include("annotation.urls.votes")),
    path("", include("judges.urls")),
    path("", include("calibration.urls.agreement")),
    path("", include("calibration.urls.calibration")),
    path("", include("calibration.urls.lens")),
    path("", include("kind_reports.urls")),
    path("", include("ranking.urls")),
]

handler400 = "annotation.views.errors.bad_request"
