# The two commands the README promises: `make demo` and `make test`. Both set up first.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test check bench clean

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

clean:
	rm -rf $(VENV) lab-report .pytest_cache .mypy_cache .ruff_cache
