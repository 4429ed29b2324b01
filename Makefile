# The two commands of the README, plus the pieces they are made of.
#   make run   set up, fetch the model, build, and stream a sample answer
#   make test  set up, fetch the model, build, and run every test that needs no GPU
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
PROMPT ?= What is the capital of France? Answer in one sentence.

.PHONY: all setup model configure build test run bench-engine clean

all: build

setup:
	@scripts/setup.sh

model:
	@scripts/fetch-model.sh

configure: setup
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@ninja -C $(BUILD_DIR) -j $(JOBS)

test: build model
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 900

run: build model
	@$(BUILD_DIR)/bin/pdserve run --chat --max_tokens 96 --prompt "$(PROMPT)"

bench-engine: build model
	@$(BUILD_DIR)/bin/pdserve bench-engine

clean:
	rm -rf $(BUILD_DIR)
