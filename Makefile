# Two commands on a fresh machine:  `make demo`  and  `make test`.
# Both create .venv and install the package with its ROS 2 wheels first.
PYTHON ?= python3
VENV   ?= .venv
ROBOT  ?= go2
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# The demo and the tests run a graph on this machine only: keep DDS discovery on loopback.
export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST

.PHONY: demo test test-quick lint install clean

$(STAMP): setup.py setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e '.[ros,unitree,reality,ray,test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/sim2real demo --robot $(ROBOT) --lockstep

# Everything. The DDS graph, build and end-to-end tests run one at a time (in parallel they
# would time one another); beside them, the tests without a DDS graph run over every core at
# idle priority (SCHED_IDLE: only on a core the graph tests leave idle, most of the
# machine, which a graph's process takes back at once; tests/unit/test_ray.py's cluster at nice 10,
# as Ray's timeouts need some CPU). Their report follows the graph tests'.
# Last, alone on the machine, the graph tests marked timing_sensitive: they hold real-time
# deadlines (a 50 ms sensing gap trips the supervisor), which no priority keeps while the unit
# tests' numerics load the memory and caches both cores share. Any part failing fails the
# target (a part with no test selected, pytest's exit 5, does not), and Ctrl-C stops them.
test: $(STAMP)
	@log=$$(mktemp) || exit 1; \
	trap 'kill $$unit_pid 2>/dev/null; rm -f "$$log"' EXIT; \
	trap 'exit 130' INT; \
	echo "tests without a DDS graph: at idle priority beside the graph tests; their report follows"; \
	SIM2REAL_TEST_PRIORITY=idle $(BIN)/python -m pytest -n auto --dist loadgroup tests/unit > "$$log" 2>&1 & unit_pid=$$!; \
	$(BIN)/python -m pytest -m "not timing_sensitive" tests/ros tests/e2e; graph=$$?; \
	wait $$unit_pid; unit=$$?; unit_pid=; cat "$$log"; \
	echo "graph tests with real-time deadlines, alone on the machine"; \
	$(BIN)/python -m pytest -m timing_sensitive tests/ros tests/e2e; timing=$$?; \
	[ $$graph -eq 5 ] && graph=0; [ $$timing -eq 5 ] && timing=0; \
	exit $$(( unit || graph || timing ))

# Lint (pyflakes, bugbear, import order, function complexity), the format (`ruff format`), the
# import layers of pyproject.toml, spelling, and the types of the core and the sim (mypy, basic mode).
lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks launch
	$(BIN)/ruff format --check src tests benchmarks launch setup.py
	$(BIN)/lint-imports --no-cache
	$(BIN)/codespell src tests benchmarks launch config docs policies README.md CHANGELOG.md
	$(BIN)/mypy

# The quick loop: pure logic, no DDS graph, no training or build, over every core (pytest-xdist):
# under 1.5 minutes on 2 cores. The DDS graph tests stay serial (`make test`): in parallel they
# would share the machine's timing, which they measure.
test-quick: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not ros" -n auto --dist loadgroup tests/unit

clean:
	rm -rf $(VENV) runs ros2_ws/build ros2_ws/install ros2_ws/log
