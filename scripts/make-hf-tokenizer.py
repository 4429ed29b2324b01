#!/usr/bin/env python3
"""Writes a Hugging Face tokenizer folder built from a GGUF model's own vocabulary.

Usage: python3 scripts/make-hf-tokenizer.py MODEL.gguf OUT_DIR

Benchmark clients such as aiperf count and synthesise tokens with a Hugging
Face tokenizer (`--tokenizer DIR`), which they cannot download offline.
This script reads the tokenizer from the GGUF file pdserve serves, so the
folder always matches the model and no copy of the vocabulary is kept in the
repository. It writes into OUT_DIR (created if missing):

  tokenizer.json           the `tokenizers` pipeline (vocabulary, merges,
                           pre-tokenizer, added tokens, decoder)
  tokenizer_config.json    bos/eos/unk/pad tokens, the other control tokens
                           (additional_special_tokens), add_bos_token,
                           model_max_length and the GGUF's
                           tokenizer.chat_template
  special_tokens_map.json  the same special tokens

`tokenizers.Tokenizer.from_file(OUT_DIR + "/tokenizer.json")` and
`transformers.AutoTokenizer.from_pretrained(OUT_DIR)` both load it.

The pipeline reproduces llama.cpp's tokenizer (the engine pdserve mirrors,
see common/text/pre_tokenizer.cc), not the model's original Hugging Face
one where the two differ: there is no Unicode normaliser, and characters the
vocabulary has no token for are dropped rather than mapped to <unk>.

Supported `tokenizer.ggml.model` values:

  gpt2   byte-level BPE. `tokenizer.ggml.pre` picks the pre-tokenizer regexes
         as llama.cpp does: smollm (and starcoder, refact, command-r,
         codeshell, exaone, minerva-7b), llama-bpe (llama3, llama-v3,
         falcon3: BOS added, and merges skipped for pieces that are tokens,
         llama.cpp's ignore_merges; dbrx and smaug-bpe share the regex only),
         qwen2 (deepseek-r1-qwen, megrez, stablelm2), gpt-2 (gpt2, mpt, olmo,
         jais, phi-2) and default (also a file without the key).
  llama  SentencePiece BPE (LLaMA 1/2, Mistral v1): merges ranked by the
         token scores, byte fallback, "▁" for spaces and the
         add_space_prefix flag. Checked on llama.cpp's LLaMA 2 fixture only;
         Gemma (add_space_prefix false) takes the same path, unchecked.

Anything else is refused with an error. Control (type 3), unknown (2) and
user-defined (4) tokens become added tokens, matched before pre-tokenization
so they are never split; control and unknown ones are "special" (dropped by
decode(skip_special_tokens=True); `tokenizer.encode_special_tokens = True`
treats them as plain text, llama.cpp's parse_special=false), user-defined
ones are always matched, as in llama.cpp.

The GGUF metadata is read by a small reader below (GGUF v2/v3, little
endian); the file's tensors are never loaded. Requirements, tested with:

  pip install tokenizers==0.23.3                   # to write the folder
  pip install transformers==5.25.0 jinja2==3.1.6   # only to load it with AutoTokenizer

With aiperf (0.13.0), pass the folder as `--tokenizer OUT_DIR` and leave
HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE unset: with them set it looks a local
path up in the hub cache and fails; without them it loads the folder
directly, with no network access.

tests/scripts/hf_tokenizer_check.py compares the result with llama.cpp's
token ids in tests/data/tokenizer_golden.json.
"""

import json
import os
import struct
import sys

# ---------------------------------------------------------------------------
# GGUF metadata

GGUF_MAGIC = b"GGUF"
# value type -> struct format of one scalar
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}
_STRING, _ARRAY = 8, 9


class GgufError(Exception):
    pass


def read_gguf_metadata(path):
    """Returns the GGUF file's key/value metadata as a dict.

    Strings are decoded as UTF-8 (invalid bytes replaced); arrays become lists.
    """
    with open(path, "rb") as f:
        data = f.read(24)
        if len(data) < 24 or data[:4] != GGUF_MAGIC:
            raise GgufError("%s is not a GGUF file" % path)
        version, _n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
        if version not in (2, 3):
            raise GgufError("unsupported GGUF version %d (need 2 or 3, little endian)" % version)

        def read(n):
            b = f.read(n)
            if len(b) != n:
                raise GgufError("%s: metadata ends early" % path)
            return b

        def read_string():
            (n,) = struct.unpack("<Q", read(8))
            return read(n).decode("utf-8", errors="replace")

        def read_value(vtype):
            if vtype == _STRING:
                return read_string()
            if vtype == _ARRAY:
                etype, count = struct.unpack("<IQ", read(12))
                if etype == _STRING:
                    return [read_string() for _ in range(count)]
                if etype == _ARRAY:
                    return [read_value(_ARRAY) for _ in range(count)]
                if etype not in _SCALARS:
                    raise GgufError("unknown GGUF array type %d" % etype)
                fmt = _SCALARS[etype]
                return list(struct.unpack("<%d%s" % (count, fmt),
                                          read(count * struct.calcsize(fmt))))
            if vtype not in _SCALARS:
                raise GgufError("unknown GGUF value type %d" % vtype)
            fmt = "<" + _SCALARS[vtype]
            return struct.unpack(fmt, read(struct.calcsize(fmt)))[0]

        meta = {}
        for _ in range(n_kv):
            key = read_string()
            (vtype,) = struct.unpack("<I", read(4))
            meta[key] = read_value(vtype)
        return meta


# ---------------------------------------------------------------------------
# Pre-tokenizer regexes, as llama.cpp's llm_tokenizer_bpe picks them
# (llama-vocab.cpp). Each regex splits the pieces of the one before; text a
# regex does not match stays a piece of its own ("isolated" in tokenizers).

GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# name -> (regexes, ignore_merges, add_bos default)
PRE_TOKENIZERS = {}
for _name in ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"):
    # Every number code point is a piece of its own, then GPT-2's regex.
    PRE_TOKENIZERS[_name] = ([r"\p{N}", GPT2_REGEX], False, False)
for _name in ("llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe"):
    # dbrx and smaug-bpe keep merges and no BOS in llama.cpp; only the regex is shared.
    _llama3 = _name in ("llama3", "llama-v3", "llama-bpe", "falcon3")
    PRE_TOKENIZERS[_name] = ([LLAMA3_REGEX], _llama3, _llama3)
for _name in ("qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"):
    PRE_TOKENIZERS[_name] = ([QWEN2_REGEX], False, False)
for _name in ("gpt2", "gpt-2", "mpt", "olmo", "jais", "phi-2"):
    PRE_TOKENIZERS[_name] = ([GPT2_REGEX], False, False)
PRE_TOKENIZERS["default"] = (
    [r"[\p{P}\$\+<=>\^~\|]+", GPT2_REGEX, r"\p{N}+", r"[0-9][0-9][0-9]"], False, False)

# transformers' name -> tokenizer.ggml.<name>_token_id
GGUF_ID_KEYS = {"bos": "bos", "eos": "eos", "unk": "unknown", "pad": "padding"}
# llama.cpp's token types (tokenizer.ggml.token_type)
TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL, TYPE_USER_DEFINED = 1, 2, 3, 4  # 5 unused, 6 byte


def fail(message):
    sys.exit("make-hf-tokenizer: " + message)


def byte_level_bpe(tk, meta, tokens):
    """The byte-level BPE (tokenizer.ggml.model = gpt2) pipeline."""
    from tokenizers import Regex, decoders, models, pre_tokenizers

    pre = meta.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        fail("pre-tokenizer %r is not supported (known: %s)"
             % (pre, ", ".join(sorted(PRE_TOKENIZERS))))
    regexes, ignore_merges, add_bos = PRE_TOKENIZERS[pre]
    merges = []
    for merge in meta.get("tokenizer.ggml.merges", []):
        # llama.cpp splits at the first space after the first character.
        pos = merge.find(" ", 1)
        if pos < 0:
            fail("malformed merge %r" % merge)
        merges.append((merge[:pos], merge[pos + 1:]))
    vocab = {text: i for i, text in enumerate(tokens)}
    # No unk_token: like llama.cpp, characters without a token are dropped.
    model = models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore_merges)
    tokenizer = tk.Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in regexes]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer, {"pre": pre, "add_bos": add_bos}


def sentencepiece_bpe(tk, meta, tokens):
    """The SentencePiece BPE (tokenizer.ggml.model = llama) pipeline."""
    from tokenizers import decoders, models, normalizers

    scores = meta.get("tokenizer.ggml.scores")
    if scores is None or len(scores) != len(tokens):
        fail("a llama (SentencePiece) vocabulary needs tokenizer.ggml.scores")
    vocab = {text: i for i, text in enumerate(tokens)}
    # llama.cpp merges the adjacent pair whose concatenation is the
    # highest-scoring token; a BPE merge list ranked by that score is the same.
    ranked = []
    for i, text in enumerate(tokens):
        for cut in range(1, len(text)):
            left, right = text[:cut], text[cut:]
            if left in vocab and right in vocab:
                ranked.append((-scores[i], i, vocab[left], (left, right)))
    ranked.sort()
    unk_id = meta.get("tokenizer.ggml.unknown_token_id", 0)
    model = models.BPE(vocab=vocab, merges=[r[3] for r in ranked], byte_fallback=True,
                       unk_token=tokens[unk_id], fuse_unk=True)
    tokenizer = tk.Tokenizer(model)
    add_space_prefix = bool(meta.get("tokenizer.ggml.add_space_prefix", True))
    steps = [normalizers.Prepend("\u2581")] if add_space_prefix else []
    # Every text fragment between added tokens gets the prefix, as in llama.cpp.
    tokenizer.normalizer = normalizers.Sequence(steps + [normalizers.Replace(" ", "\u2581")])
    steps = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    if add_space_prefix:
        steps.append(decoders.Strip(" ", 1, 0))
    tokenizer.decoder = decoders.Sequence(steps)
    return tokenizer, {"pre": None, "add_bos": True}


def build(meta):
    """Returns (tokenizers.Tokenizer, tokenizer_config, special_tokens_map) for GGUF metadata."""
    import tokenizers as tk
    from tokenizers import AddedToken, processors

    kind = meta.get("tokenizer.ggml.model")
    tokens = meta.get("tokenizer.ggml.tokens")
    if not tokens:
        fail("the GGUF has no tokenizer.ggml.tokens")
    if len(set(tokens)) != len(tokens):
        fail("the vocabulary has duplicate tokens")
    if kind == "gpt2":
        tokenizer, info = byte_level_bpe(tk, meta, tokens)
    elif kind == "llama":
        tokenizer, info = sentencepiece_bpe(tk, meta, tokens)
    else:
        fail("tokenizer model %r is not supported (only gpt2 byte-level BPE and llama "
             "SentencePiece)" % kind)

    types = meta.get("tokenizer.ggml.token_type") or [TYPE_NORMAL] * len(tokens)
    special, user_defined = [], []
    for i, t in enumerate(types):
        if t in (TYPE_CONTROL, TYPE_UNKNOWN):
            special.append(tokens[i])
        elif t == TYPE_USER_DEFINED:
            user_defined.append(tokens[i])
    # The tokens are in the vocabulary already, so they keep their ids.
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in special])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in user_defined])

    def token(key):
        i = meta.get("tokenizer.ggml.%s_token_id" % GGUF_ID_KEYS[key])
        return tokens[i] if i is not None and 0 <= i < len(tokens) else None

    bos, eos = token("bos"), token("eos")
    add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", info["add_bos"])) and bos is not None
    add_eos = bool(meta.get("tokenizer.ggml.add_eos_token", False)) and eos is not None
    if add_bos or add_eos:
        def template(seq, type_id):
            return (["%s:%d" % (bos, type_id)] if add_bos else []) + ["%s:%d" % (seq, type_id)] \
                + (["%s:%d" % (eos, type_id)] if add_eos else [])
        ids = {}
        if add_bos:
            ids[bos] = meta["tokenizer.ggml.bos_token_id"]
        if add_eos:
            ids[eos] = meta["tokenizer.ggml.eos_token_id"]
        tokenizer.post_processor = processors.TemplateProcessing(
            single=template("$A", 0), pair=template("$A", 0) + template("$B", 1),
            special_tokens=sorted(ids.items()))

    arch = meta.get("general.architecture", "")
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": add_bos,
        "add_eos_token": add_eos,
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(meta.get(arch + ".context_length", 0)) or 1 << 30,
    }
    special_map = {}
    for key in ("bos", "eos", "unk", "pad"):
        if token(key) is not None:
            special_map[key + "_token"] = token(key)
    # Every control token, so that transformers' all_special_ids covers them
    # all, not just the four above: aiperf leaves those ids out when it
    # samples random tokens for synthetic prompts.
    extra = [t for t in special if t not in special_map.values()]
    if extra:
        special_map["additional_special_tokens"] = extra
    config.update(special_map)
    chat_template = meta.get("tokenizer.chat_template")
    if chat_template:
        config["chat_template"] = chat_template
    config["gguf_source"] = {
        "general.name": meta.get("general.name"),
        "tokenizer.ggml.model": kind,
        "tokenizer.ggml.pre": info["pre"],
        "written_by": "pdserve scripts/make-hf-tokenizer.py",
    }
    return tokenizer, config, special_map


def write_folder(gguf_path, out_dir):
    meta = read_gguf_metadata(gguf_path)
    tokenizer, config, special_map = build(meta)
    os.makedirs(out_dir, exist_ok=True)
    tokenizer.save(os.path.join(out_dir, "tokenizer.json"))
    for name, doc in (("tokenizer_config.json", config), ("special_tokens_map.json", special_map)):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=2)
            f.write("\n")
    return meta, config


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__)
        return 2
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        fail("needs the tokenizers package: pip install tokenizers==0.23.3")
    try:
        meta, config = write_folder(argv[1], argv[2])
    except (OSError, GgufError) as e:
        fail(str(e))
    print("make-hf-tokenizer: wrote %s (%s, %d tokens%s)" % (
        argv[2], meta.get("tokenizer.ggml.model"), len(meta["tokenizer.ggml.tokens"]),
        ", pre-tokenizer " + meta.get("tokenizer.ggml.pre", "default")
        if meta.get("tokenizer.ggml.model") == "gpt2" else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
