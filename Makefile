# The two commands the README promises: `make demo` and `make test`. Both set up first.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test check docs bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(BIN)/pgsteady lab pool-drain --strategy naive,steady --out lab-report
	$(BIN)/pgsteady lab lock-queue --strategy naive,steady --out lab-report
	$(BIN)/pgsteady report lab-report --out lab-report/index.html

check: setup
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy

test: check
	$(BIN)/pytest

# The docs site (mkdocs-material) into site/, offline; `make test` builds it too
# (tests/docs/test_site.py), so a broken link fails CI.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) lab-report site .pytest_cache .mypy_cache .ruff_cache
