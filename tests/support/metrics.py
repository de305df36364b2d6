"""This process's metrics as Prometheus reads them: the text exposition parsed by prometheus_client's own parser."""

from prometheus_client.parser import text_string_to_metric_families

from approvals.telemetry import metrics


def parse(text):
    """{(sample name, ((label, value), ...)): value} of an exposition, and the families' names."""
    samples, families = {}, set()
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples, families


def scrape():
    """Every sample this process exposes (reads the database's gauges: call it where the database may be read)."""
    return parse(metrics.exposition().decode())[0]


def value(samples, name, **labels):
    """One sample's value; 0 when it was never counted."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def moved(before, after):
    """The samples whose value changed, with by how much (the ages and timings, which move by themselves, left out)."""
    keys = set(before) | set(after)
    return {
        key: after.get(key, 0.0) - before.get(key, 0.0)
        for key in keys
        if after.get(key, 0.0) != before.get(key, 0.0)
        and not key[0].startswith(("console_database_gauges_read", "process_", "python_gc"))
        and not key[0].endswith("_age_seconds")
    }
