"""The store's results in other tools' formats: Every Eval Ever records (eee, eee_literature,
eee_export) and MLflow runs (mlflow_runs). Reads the tables wing only."""
