# perfkit: `make run` runs the workbook, `make test` runs the tests, `make lab` opens JupyterLab.
# Each target creates .venv and installs perfkit (with its test extras) first if needed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.perfkit-installed
# torch (cuDNN and cuBLAS oracles, workload tracing on the meta device) is installed first, pinned
# so that a machine with no GPU takes the small CPU build where its pip index has one (it does
# here); with a GPU, or to use another build: make install TORCH="torch==2.11.0".
TORCH  ?= torch==2.13.0

.PHONY: install run static test lab sync clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/perfkit run --profile auto --quiet

# After changing a kernel: recompute the static store's stale entries (data/static/) and commit them.
static: $(STAMP)
	$(BIN)/perfkit static refresh --notebooks

# One worker per core: the simulator runs a kernel on one core (its threads share the GIL).
test: $(STAMP)
	$(BIN)/python -m pytest -n auto --dist worksteal --durations=25

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

# After editing a notebook's paired script (notebooks/NN_*.py, the source of truth in review),
# bring its .ipynb in step (JupyterLab with jupytext does this on save by itself).
sync: $(STAMP)
	$(BIN)/jupytext --sync notebooks/[0-9]*.py

clean:
	rm -rf $(VENV) runs .pytest_cache
