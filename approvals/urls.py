from django.urls import path

from approvals.web import audit_views, views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("runs/<int:run_id>/", views.run_page, name="run"),
    path("requests/<str:request_id>/", views.request_page, name="request"),
    path("tokens/", views.tokens_page, name="tokens"),
    path("audit/", audit_views.audit_page, name="audit"),
    path("audit/export.<str:fmt>", audit_views.audit_export, name="audit-export"),
    path("tokens/<int:token_id>/revoke", views.revoke_token_page, name="token-revoke"),
]
