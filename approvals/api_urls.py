from django.urls import path

from . import api

urlpatterns = [
    path("runs", api.create_run, name="api-create-run"),
    path("runs/<int:run_id>", api.get_run, name="api-run"),
    path("runs/<int:run_id>/cancel", api.cancel_run, name="api-cancel-run"),
    path("requests", api.list_requests, name="api-requests"),
    path("requests/<str:request_id>/answer", api.answer_request, name="api-answer"),
]
