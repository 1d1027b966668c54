# The two commands: `make demo` and `make test`. Both create .venv when it is missing.
# The venv uses Debian's Python with system site packages so ROS1's rospy (apt) imports.
PYTHON_BASE ?= /usr/bin/python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
EXTRAS ?= dev,all,cluster,compare

SHELL := /bin/bash

.PHONY: demo test test-slow check bench bench-baseline lint typecheck docs venv clean train train-generalist system-deps

# Debian's ROS1 middleware, SDFormat and a C++ compiler (the ROS tests and the Gazebo world
# check need them). Installed with apt when running as root; anyone else gets the command to run,
# and the ROS tests skip with that reason (in CI a skipped ROS test fails).
ROS_DEBS := ros-core python3-rospy python3-rosmaster python3-rosbag python3-roslaunch \
	python3-genpy python3-genmsg python3-std-msgs python3-std-srvs python3-geometry-msgs \
	python3-nav-msgs python3-rosgraph-msgs python3-visualization-msgs libsdformat-dev g++ pkg-config

system-deps:
	@if dpkg -s $(ROS_DEBS) >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(ROS_DEBS); \
	else echo "note: ROS1 tests need: sudo apt-get install $(ROS_DEBS)"; fi

# pip's only noise here is a note about this machine's local index; a failing pip stops make
PIPQ = 2>&1 | { grep -v "is ignored" || true; }; test $${PIPESTATUS[0]} -eq 0

$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON_BASE) -m venv --system-site-packages $(VENV)
	$(PIP) install -q --upgrade pip $(PIPQ)
	# the CPU build of torch first, from this machine's disk; later ranges accept it
	$(PIP) install -q torch==2.13.0 $(PIPQ)
	$(PIP) install -q -e ".[$(EXTRAS)]" $(PIPQ)
	$(PY) -c "import cableload_sim, numba, casadi, torch"
	touch $@

# the message packages rostopic and rosbag need for agiros topics (ROS_PACKAGE_PATH=$PWD/ros)
ROS_MSGS := ros/msgs/agiros_msgs/manifest.xml
$(ROS_MSGS): $(VENV)/.installed $(wildcard cableload_sim/msgs/*/*)
	@if $(PY) -c "import sys; from backends.ros1 import ros_available; sys.exit(not ros_available()[0])"; \
	then $(VENV)/bin/cableload ros-messages --out ros/msgs > /dev/null; fi

venv: system-deps $(VENV)/.installed $(ROS_MSGS)

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

train-generalist: venv
	# the shipped generalist for 3 quadrotors (the default policy off eight-medium); resumed, never overwritten
	$(VENV)/bin/cableload train --config learners/configs/generalist.toml --out runs/train-generalist-n3 \
		$(if $(wildcard runs/train-generalist-n3/config.json),--resume,)
	rm -rf learners/policies/generalist-n3
	mkdir -p learners/policies
	cp -r runs/train-generalist-n3/policy learners/policies/generalist-n3
	cp runs/train-generalist-n3/training_summary.png runs/train-generalist-n3/summary.json learners/policies/generalist-n3/

# two workers for the tests that do not depend on the wall clock, then those that do (a ROS
# world in real time) alone; both parts always run, and either failing fails the target.
# The tests marked slow (ten seconds or more each) are `make test-slow`; `make check` and CI
# run both. The teacher's C at -O0 for the tests: builds 10x faster, plans 2.4x slower
# (planners/codegen.py)
test: venv
	@export CABLELOAD_CC_OPT=$${CABLELOAD_CC_OPT:--O0}; status=0; \
	$(PY) -m pytest -q -p no:cacheprovider -n 2 -m "not realtime and not slow" --durations=10 tests || status=1; \
	$(PY) -m pytest -q -p no:cacheprovider -m "realtime and not slow" --durations=5 tests || status=1; \
	exit $$status

# (pytest's status 5: no test is both slow and paced by the clock)
test-slow: venv
	@export CABLELOAD_CC_OPT=$${CABLELOAD_CC_OPT:--O0}; status=0; \
	$(PY) -m pytest -q -p no:cacheprovider -n 2 -m "slow and not realtime" --durations=10 tests || status=1; \
	$(PY) -m pytest -q -p no:cacheprovider -m "slow and realtime" tests; rc=$$?; \
	[ $$rc = 0 ] || [ $$rc = 5 ] || status=1; \
	exit $$status

check: lint typecheck test test-slow

# the benchmarks, compared with the baseline stored for this machine kind: a best time (min of
# the rounds) 20 % slower than the baseline's, twice, fails (benchmarks/compare.py). `make
# bench-baseline` replaces the baseline (docs/speed.md).
MACHINE_KIND ?= python
bench: venv
	$(PY) benchmarks/compare.py --baseline benchmarks/baselines/$(MACHINE_KIND).json

bench-baseline: venv
	$(PY) benchmarks/compare.py --baseline benchmarks/baselines/$(MACHINE_KIND).json --save

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# the type checker on the packages setup.cfg's [mypy] names
typecheck: venv
	$(VENV)/bin/mypy

# the generated references (docs/commands.md, docs/configuration.md); a test checks them
docs: venv
	$(PY) -m cableload_sim.cli.reference_docs

clean:
	rm -rf $(VENV) build *.egg-info
