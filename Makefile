# The two commands: `make demo` and `make test`. Both create .venv when it is missing.
# The venv uses Debian's Python with system site packages so ROS1's rospy (apt) imports.
PYTHON_BASE ?= /usr/bin/python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
EXTRAS ?= dev,all,cluster

.PHONY: demo test bench lint venv clean train

$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON_BASE) -m venv --system-site-packages $(VENV)
	$(PIP) install -q --upgrade pip 2>&1 | grep -v "is ignored" || true
	# the CPU build of torch first, from this machine's disk; later ranges accept it
	$(PIP) install -q torch==2.13.0 2>&1 | grep -v "is ignored" || true
	$(PIP) install -q -e ".[$(EXTRAS)]" 2>&1 | grep -v "is ignored" || true
	$(PY) -c "import cableload_sim, numba, casadi, torch"
	touch $@

venv: $(VENV)/.installed

DEMO ?= runs/demo

demo: venv
	mkdir -p $(DEMO)
	$(VENV)/bin/cableload simulate --planner formation,teacher,student --trajectory eight-medium \
		--duration 60 --log $(DEMO)/eight-medium.bag --overwrite
	$(VENV)/bin/cableload replay $(DEMO)/eight-medium-student.bag --video $(DEMO)/eight-medium-student.mp4 --speed 2
	@echo "demo: run logs $(DEMO)/eight-medium-{formation,teacher,student}.bag, video $(DEMO)/eight-medium-student.mp4"

train: venv
	# an earlier run of the same config is resumed (finished: only re-exported), never overwritten
	$(VENV)/bin/cableload train --config learners/configs/paper-eight-medium.toml --out runs/train-paper-eight-medium \
		$(if $(wildcard runs/train-paper-eight-medium/config.json),--resume,)
	rm -rf learners/policies/paper-eight-medium
	mkdir -p learners/policies
	cp -r runs/train-paper-eight-medium/policy learners/policies/paper-eight-medium
	cp runs/train-paper-eight-medium/training_summary.png runs/train-paper-eight-medium/summary.json learners/policies/paper-eight-medium/

test: venv
	$(PY) -m pytest -q -p no:cacheprovider tests

bench: venv
	$(PY) -m pytest -q benchmarks --benchmark-enable --benchmark-only

lint: venv
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
