"""What on-call sees of a console: its metrics and its structured log lines.

The bottom layer, beside ``hotpath``: it imports nothing of the app, so every layer may count and log
through it. It hears of state changes from ``events`` after their commit (``Publishing.observers``),
never inside the door's transaction.
"""
