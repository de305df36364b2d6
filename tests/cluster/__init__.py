"""Several console processes on one PostgreSQL and one Redis (issue 7): the harness and its tests."""
