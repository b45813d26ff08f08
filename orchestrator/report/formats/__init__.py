"""The report's files: what each table shows (display), markdown, CSV, JSON and HTML (render,
html), LaTeX (tex, textables, texescape) and the figures (plots). Reads the tables wing only."""
