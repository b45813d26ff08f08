"""HumanEvalFix (Python) exactly as the BigCode evaluation harness runs it."""
