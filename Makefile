# perfkit: `make run` runs the workbook, `make test` runs the tests, `make lab` opens JupyterLab.
# Each target creates .venv and installs perfkit (with its test extras) first if needed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.perfkit-installed

.PHONY: install run test lab clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/perfkit run --profile auto --quiet

test: $(STAMP)
	$(BIN)/python -m pytest

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

clean:
	rm -rf $(VENV) runs .pytest_cache
