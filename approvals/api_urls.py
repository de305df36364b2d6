from django.urls import path, re_path

from approvals.web import api

urlpatterns = [
    path("openapi.json", api.openapi_document, name="api-openapi"),
    path("runs", api.create_run, name="api-create-run"),
    path("runs/<int:run_id>", api.get_run, name="api-run"),
    path("runs/<int:run_id>/cancel", api.cancel_run, name="api-cancel-run"),
    path("runs/<int:run_id>/retry", api.retry_run, name="api-retry-run"),
    path("runs/<int:run_id>/transcript", api.get_transcript, name="api-run-transcript"),
    path("requests", api.requests_collection, name="api-requests"),
    path("requests/bulk", api.bulk_answer, name="api-bulk-answer"),
    path("requests/<str:request_id>", api.get_request, name="api-request"),
    path("requests/<str:request_id>/answer", api.request_answer, name="api-answer"),
    path("requests/<str:request_id>/cancel", api.cancel_request, name="api-cancel-request"),
    path("requests/<str:request_id>/claim", api.claim_request, name="api-claim-request"),
    path("requests/<str:request_id>/release", api.release_request, name="api-release-request"),
    path("requests/<str:request_id>/hand", api.hand_request, name="api-hand-request"),
    # Last: any other path under /api/v1/ is a JSON 404, not the HTML page a program cannot read.
    re_path(r"", api.no_such_endpoint, name="api-not-found"),
]
