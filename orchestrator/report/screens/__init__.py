"""What the command line prints about a store: `status`, `plan`, the score table after a run
(scores) and `compare-backends` (compare). Reads the tables wing only."""
