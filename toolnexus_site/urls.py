from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from approvals.web.password_reset import offered_only

urlpatterns = [
    path("admin/", admin.site.urls),
    # Reset by email only where the console can send email (approvals/web/password_reset.py).
    path("accounts/password_reset/", offered_only(auth_views.PasswordResetView.as_view()), name="password_reset"),
    path(
        "accounts/password_reset/done/",
        offered_only(auth_views.PasswordResetDoneView.as_view()),
        name="password_reset_done",
    ),
    path(
        "accounts/reset/<uidb64>/<token>/",
        offered_only(auth_views.PasswordResetConfirmView.as_view()),
        name="password_reset_confirm",
    ),
    path(
        "accounts/reset/done/",
        offered_only(auth_views.PasswordResetCompleteView.as_view()),
        name="password_reset_complete",
    ),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include("approvals.api_urls")),
    path("", include("approvals.urls")),
]
