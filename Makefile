# Tasks for working on flaketui. Every target uses the project's virtual environment:
#   python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' -e ./pytest-flaketui
# (override with `make PY=python3 ...` to use another interpreter).

PY ?= .venv/bin/python
BIN = $(dir $(PY))

.PHONY: check test snapshots bench docs

# Lint, formatting, types and the import layering contracts.
check:
	$(PY) -m ruff check flaketui tests bench sample_data
	$(PY) -m ruff format --check flaketui tests bench sample_data
	$(PY) -m mypy
	$(BIN)lint-imports --no-cache
	$(PY) -m flaketui.cli.reference --check
	$(PY) -m flaketui.core.history.schema_file --check

# The whole test suite on two cores (what CI runs, in parallel).
test:
	$(PY) -m pytest -q -n 2

# Accept new app snapshots after reviewing snapshot_report.html.
snapshots:
	$(PY) -m pytest tests/tui --snapshot-update

# The benchmarks at the sizes of their targets (tens of minutes; an idle machine only).
bench:
	$(PY) bench/scoring.py --results 1000000 --repeat 3
	$(PY) bench/ingest.py --results 100000 --repeat 3
	$(PY) bench/plugin.py --tests 5000
	$(PY) bench/app.py --results 1000000 --repeat 11

# Regenerate docs/cli.md from the commands' --help, and the new history's schema script from the
# migrations.
docs:
	$(PY) -m flaketui.cli.reference
	$(PY) -m flaketui.core.history.schema_file
