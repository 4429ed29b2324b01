# The two commands of the README, plus the pieces they are made of.
#   make run   set up, fetch the model, build, and stream a sample answer
#   make test  set up, fetch the model, build, and run every test that needs no GPU,
#              check the thread-safety annotations with clang, then run the unit,
#              fuzz and integration tests again under ASan + UBSan
BUILD_DIR ?= build
ASAN_BUILD_DIR ?= build-asan
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
PROMPT ?= What is the capital of France? Answer in one sentence.
# The model `make run` and `make bench-engine` use: smollm2 (default),
# qwen2.5-coder or gemma3 (scripts/fetch-model.sh fetches it on first use).
# Gemma 3 270M is a base model without a chat template: its demo prompt goes
# in as plain text.
MODEL ?= smollm2
MODEL_PATH = $(shell scripts/fetch-model.sh $(MODEL) | tail -n 1)
DEMO_CHAT = $(if $(filter gemma3,$(MODEL)),--chat=false,--chat=true)
# Tests the sanitizer pass runs (ctest label regexes).
ASAN_TEST_LABELS ?= unit|integration
ASAN_EXCLUDE_LABELS ?= k8s|golden|model|soak
# The Python venv with the pinned `openai` SDK that the OpenAI-API integration
# test runs (tests/integration/openai_sdk_requirements.txt); both test passes
# use this one, handed to the test as PDSERVE_OPENAI_PYTHON.
VENV_DIR ?= $(BUILD_DIR)/venv
OPENAI_PYTHON ?= $(abspath $(VENV_DIR))/bin/python
# ccache hits from any checkout path (CI builds a fresh clone elsewhere):
# paths under the checkout are hashed relative to it, and -g builds do not
# hash the working directory.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

.PHONY: all setup venv model models vocab configure build build-run test test-default test-thread-safety test-asan configure-asan build-asan run bench-engine clean

all: build

setup:
	@scripts/setup.sh

model:
	@scripts/fetch-model.sh $(MODEL) >/dev/null

# Every model the tests run on.
models:
	@for m in smollm2 qwen2.5-coder gemma3; do scripts/fetch-model.sh $$m >/dev/null || exit 1; done

# llama.cpp's LLaMA 2 / LLaMA 3 tokenizer fixtures for the tokenizer tests.
vocab:
	@scripts/fetch-vocab.sh

# Quiet and instant when the venv is already there with these pins.
venv: setup
	@scripts/setup-venv.sh $(VENV_DIR)

configure: setup
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@ninja -C $(BUILD_DIR) -j $(JOBS)

# Only what `make run` runs: the CLI and the three processes `pdserve up`
# starts (no tests, benchmarks or CUDA test binaries).
RUN_TARGETS = pdserve pdserve-router pdserve-prefill pdserve-decode
build-run: configure
	@ninja -C $(BUILD_DIR) -j $(JOBS) $(RUN_TARGETS)

test: test-default test-thread-safety test-asan

test-default: build models vocab venv
	@cd $(BUILD_DIR) && PDSERVE_OPENAI_PYTHON='$(OPENAI_PYTHON)' ctest --output-on-failure -j $(JOBS) --timeout 900

# The ABSL_GUARDED_BY-style annotations, which GCC ignores: every C++ source
# of $(BUILD_DIR)/compile_commands.json through clang's -Wthread-safety
# analysis (syntax only, no code generated); a violation fails it. After
# build: the sources include the generated proto headers.
test-thread-safety: build
	@scripts/check-thread-safety.sh $(BUILD_DIR) $(JOBS)

# The same sources with -fsanitize=address,undefined (CUDA off: the GPU code
# is not run here). A sanitizer report makes its test fail.
configure-asan: setup
	@cmake -S . -B $(ASAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DPDSERVE_SANITIZE=ON -DPDSERVE_CUDA=OFF $(CMAKE_FLAGS) >/dev/null

build-asan: configure-asan
	@ninja -C $(ASAN_BUILD_DIR) -j $(JOBS)

test-asan: build-asan models vocab venv
	@PDSERVE_OPENAI_PYTHON='$(OPENAI_PYTHON)' scripts/test-sanitized.sh $(ASAN_BUILD_DIR) '$(ASAN_TEST_LABELS)' '$(ASAN_EXCLUDE_LABELS)' $(JOBS)

# A local cluster (1 router, 1 prefill, 1 decode on loopback) that streams a
# sample answer, then keeps serving on 127.0.0.1:50051 until Ctrl-C.
run: build-run model
	@$(BUILD_DIR)/bin/pdserve up --model "$(MODEL_PATH)" --prefill 1 --decode 1 --threads 1 \
	  --max_tokens 96 $(DEMO_CHAT) --demo_prompt "$(PROMPT)"

bench-engine: build model
	@$(BUILD_DIR)/bin/pdserve bench-engine --model "$(MODEL_PATH)"

clean:
	rm -rf $(BUILD_DIR) $(ASAN_BUILD_DIR)
