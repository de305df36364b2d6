from django.urls import path

from . import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("runs/<int:run_id>/", views.run_page, name="run"),
]
