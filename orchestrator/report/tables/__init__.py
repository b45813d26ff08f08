"""The report's tables: a store's rows read into typed tables (settings, scores, the literature
join, answers, findings, the pivot, provenance), and `build`, which assembles them into the
report's data. The lowest floor of the report wing: it imports no other sub-wing."""
