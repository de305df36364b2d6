from django.db import models


class Suspension(models.Model):
    """A run waiting on its request: the one row a suspension writes and an answer updates."""

    tool = models.CharField(max_length=100)
    args = models.JSONField(default=dict)
    status = models.CharField(max_length=10, default="open")
    answer_ok = models.BooleanField(null=True)
