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

# A local cluster (1 router, 1 prefill, 1 decode on loopback) that streams a
# sample answer, then keeps serving on 127.0.0.1:50051 until Ctrl-C.
run: build model
	@$(BUILD_DIR)/bin/pdserve up --prefill 1 --decode 1 --threads 1 --gen_max_tokens 96 \
	  --demo_prompt "$(PROMPT)"

bench-engine: build model
	@$(BUILD_DIR)/bin/pdserve bench-engine

clean:
	rm -rf $(BUILD_DIR)
