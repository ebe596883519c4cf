"""Tokenizer.apply_chat_template and the chat template functions
(include/tfcore/tokenizer.h, docs/TOKENIZER.md "Chat templates").

References, none of them the code under test:
  - strings written here from the models' documentation (the Qwen2 and
    Qwen2.5 model cards, Meta's Llama 3 / 3.1 prompt-format pages, the
    Llama 2 prompt format of Hugging Face's "Llama 2 is here" post);
  - Jinja2 (Debian's python3-jinja2) rendering the models' own
    chat_template strings (chat_templates.json, copied from their
    tokenizer_config.json) in the environment Hugging Face's
    apply_chat_template renders them in (trim_blocks, lstrip_blocks,
    raise_exception, tools=None), on random conversations;
  - Hugging Face's tokenizers (npm, run with node) for the ids, on
    tokenizer.json files in Llama 3's, Qwen2's and Llama 2's layouts built
    from the real vocabularies (tests/tokenizer/hf_reference.mjs), when the
    reference packages are fetched (scripts/fetch-tokenizer-data.sh).
"""
import json
import os
import random
import shutil
import subprocess

import pytest

import tfcore
from conftest import ROOT
from helpers import needs

pytestmark = needs("tfc_chat_render")

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "chat_templates.json"), encoding="utf-8") as _f:
    MODELS = {k: v for k, v in json.load(_f).items() if not k.startswith("_")}
FAMILY_OF = {"Qwen/Qwen2-7B-Instruct": "chatml", "Qwen/Qwen2.5-7B-Instruct": "qwen2.5",
             "meta-llama/Meta-Llama-3-8B-Instruct": "llama3", "meta-llama/Llama-3.1-8B-Instruct": "llama3.1",
             "meta-llama/Llama-2-7b-chat-hf": "llama2"}
NPM = os.path.join(ROOT, ".cache", "npm")

CONV = [{"role": "system", "content": "You are a pirate."},
        {"role": "user", "content": "Hello, how are you?"},
        {"role": "assistant", "content": "I'm doing great. How can I help you today?"},
        {"role": "user", "content": "Tell me a joke."}]


def render(messages, family, gen=False):
    return tfcore.Tokenizer().apply_chat_template(messages, add_generation_prompt=gen, tokenize=False,
                                                  template=family)


# ---- expected strings from the documentation ---------------------------------------------------

def test_documented_formats():
    assert render(CONV[:2], "chatml", gen=True) == (
        "<|im_start|>system\nYou are a pirate.<|im_end|>\n"
        "<|im_start|>user\nHello, how are you?<|im_end|>\n"
        "<|im_start|>assistant\n")
    # no system message: Qwen2's template writes its default one, Qwen2.5's its own
    assert render(CONV[1:3], "qwen2") == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nHello, how are you?<|im_end|>\n"
        "<|im_start|>assistant\nI'm doing great. How can I help you today?<|im_end|>\n")
    assert render(CONV[1:2], "qwen2.5", gen=True) == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nHello, how are you?<|im_end|>\n<|im_start|>assistant\n")
    assert render(CONV, "llama3", gen=True) == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a pirate.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHello, how are you?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nI'm doing great. How can I help you today?<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert render(CONV[1:2], "llama3.1") == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHello, how are you?<|eot_id|>")
    assert render(CONV, "llama2") == (
        "<s>[INST] <<SYS>>\nYou are a pirate.\n<</SYS>>\n\nHello, how are you? [/INST]"
        " I'm doing great. How can I help you today? </s><s>[INST] Tell me a joke. [/INST]")
    assert render(CONV, "llama2", gen=True) == render(CONV, "llama2")  # Llama 2's template has no generation prompt


# ---- against Jinja2 running the models' templates -----------------------------------------------

def jinja_env():
    jinja2 = pytest.importorskip("jinja2", reason="python3-jinja2 (scripts/setup.sh --for test) renders the "
                                                  "models' own templates as the reference")
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    # transformers' _compile_jinja_template
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    return env


_COMPILED = {}


def jinja_render(env, model, messages, gen, template=None):
    m = MODELS[model]
    text = template or m["chat_template"]
    if text not in _COMPILED:
        _COMPILED[text] = env.from_string(text)
    return _COMPILED[text].render(messages=messages, tools=None, add_generation_prompt=gen, bos_token=m["bos_token"],
                                  eos_token=m["eos_token"])


# contents that exercise strip(): Unicode spaces it removes (U+00A0, U+3000, U+0085, U+001C, U+2028) and
# characters it keeps (U+200B), special-token texts, CRLF
PIECES = ["Hi", " ", "  ", "\n", "\t", "\u00a0", "\u3000", "\u200b", "\x1c", "\x85", "\u2028", "é", "日本",
          "<|im_end|>", "<s>", "x y", "", "\r\n", "🙂"]


def random_conversation(rng, family):
    n = rng.randint(1, 6)
    system_first = rng.random() < 0.5
    msgs = []
    for i in range(n):
        if i == 0 and system_first:
            role = "system"
        elif family == "llama2":
            role = "user" if (i - system_first) % 2 == 0 else "assistant"
        else:
            role = rng.choice(["user", "assistant", "system"]) if i else "user"
        msgs.append({"role": role, "content": "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))})
    return msgs


@pytest.mark.parametrize("model", sorted(MODELS))
def test_equals_jinja(model):
    env = jinja_env()
    family = FAMILY_OF[model]
    rng = random.Random(model)
    tok = tfcore.Tokenizer()
    for conv in [CONV, CONV[1:], CONV[:1], CONV[:2]] + [random_conversation(rng, family) for _ in range(150)]:
        for gen in (False, True):
            want = jinja_render(env, model, conv, gen)
            assert tok.apply_chat_template(conv, add_generation_prompt=gen, tokenize=False, template=family) == want
            # the template itself is recognised as its family
            assert tok.apply_chat_template(conv, add_generation_prompt=gen, tokenize=False,
                                           template=MODELS[model]["chat_template"]) == want


def test_llama2_role_order_refused_as_jinja_does():
    env = jinja_env()
    import jinja2
    bad = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    with pytest.raises(jinja2.exceptions.TemplateError, match="Conversation roles must alternate"):
        jinja_render(env, "meta-llama/Llama-2-7b-chat-hf", bad, False)
    with pytest.raises(ValueError, match=r"messages\[1\] is a \"user\" message where the Llama 2 template takes"):
        render(bad, "llama2")
    # a later system message: Jinja's template drops it silently; the library refuses it
    late = [{"role": "user", "content": "a"}, {"role": "system", "content": "s"}]
    assert jinja_render(env, "meta-llama/Llama-2-7b-chat-hf", late, False) == "<s>[INST] a [/INST]"
    with pytest.raises(ValueError, match=r"messages\[1\] is a \"system\" message"):
        render(late, "llama2")


def mutate(rng, t):
    """t with a few random edits: whitespace in and around tags, whitespace control, escapes, quotes."""
    for _ in range(rng.randint(1, 3)):
        op, i = rng.random(), rng.randrange(len(t))
        if op < 0.4:
            t = t[:i] + rng.choice([" ", "\n", "  ", "\t", " \n ", "\n    "]) + t[i:]
        elif op < 0.55:
            t = t.replace("{%", "{%-", 1) if rng.random() < 0.5 else t.replace("{%- ", "{% ", 1)
        elif op < 0.7:
            t = t.replace("%}", "-%}", 1) if rng.random() < 0.5 else t.replace(" -%}", " %}", 1)
        elif op < 0.8:
            t = t.replace("\\n", "\n", 1)
        elif op < 0.9:
            t = t[:i] + t[i + 1:] if t[i] in " \n" else t
        else:
            t = t.replace("'<|im_end|>'", '"<|im_end|>"').replace("'<|eot_id|>'", '"<|eot_id|>"')
    return t


def test_recognition_never_guesses():
    """A template the library recognises renders, under Jinja2, exactly as the library renders its family:
    random edits of the models' templates are either refused or equal to a family in what they write."""
    env = jinja_env()
    rng = random.Random(20260101)
    tok = tfcore.Tokenizer()
    convs = [CONV, CONV[1:2], [{"role": "system", "content": " S \n"}, {"role": "user", "content": "u "}]]
    accepted = 0
    for _ in range(400):
        model = rng.choice(sorted(MODELS))
        t = mutate(rng, MODELS[model]["chat_template"])
        try:
            got = [tok.apply_chat_template(conv, gen, tokenize=False, template=t) for conv in convs
                   for gen in (False, True)]
        except tfcore.ChatTemplateError:
            continue
        accepted += 1
        assert got == [jinja_render(env, model, conv, gen, template=t) for conv in convs for gen in (False, True)], \
            repr(t)
    assert accepted > 100  # most edits are whitespace Jinja ignores


def test_templates_refused():
    tok = tfcore.Tokenizer()
    qwen2 = MODELS["Qwen/Qwen2-7B-Instruct"]["chat_template"]
    # Qwen1.5's default prompt has no full stop: another template
    with pytest.raises(tfcore.ChatTemplateError, match="it has ChatML's <|im_start|>, but it is not Qwen2-Instruct"):
        tok.apply_chat_template(CONV, tokenize=False, template=qwen2.replace("assistant.<", "assistant<"))
    with pytest.raises(tfcore.ChatTemplateError, match="none of the markers looked for"):
        tok.apply_chat_template(CONV, tokenize=False, template="{% for m in messages %}{{ m.content }}{% endfor %}")
    assert issubclass(tfcore.ChatTemplateError, ValueError)
    with pytest.raises(ValueError, match="name is \"zephyr\""):
        tok.apply_chat_template(CONV, tokenize=False, template="zephyr")
    with pytest.raises(TypeError, match="template must be None"):
        tok.apply_chat_template(CONV, tokenize=False, template=3)


def test_bad_messages():
    with pytest.raises(ValueError, match=r"messages\[1\].role is \"tool\""):
        render([{"role": "user", "content": "x"}, {"role": "tool", "content": "42"}], "chatml")
    with pytest.raises(ValueError, match=r"messages\[0\] has tool_calls"):
        render([{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f"}}]}], "qwen2.5")
    with pytest.raises(TypeError, match=r"messages\[0\]\['content'\] is a list"):
        render([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "llama3")
    with pytest.raises(KeyError, match="has no 'content'"):
        render([{"role": "user"}], "llama3")
    with pytest.raises(TypeError, match="messages must be a list"):
        render({"role": "user", "content": "x"}, "llama3")
    with pytest.raises(ValueError, match="NUL"):
        render([{"role": "user", "content": "a\0b"}], "llama3")
    with pytest.raises(ValueError, match="n_messages is 0"):
        render([], "llama3")


# ---- tokenizer.json + tokenizer_config.json ------------------------------------------------------

def added(id, content):
    return {"id": id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def sentencepiece_dir(path):
    """A Llama-2-layout tokenizer.json (<unk> <s> </s>, byte fallback <0x00>..<0xFF> = 3..258, then pieces)."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({"<0x%02X>" % b: 3 + b for b in range(256)})
    vocab.update({"\u2581": 259, "a": 260, "b": 261, "\u2581a": 262, "ab": 263, "\u2581ab": 264})
    doc = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "vocab": vocab,
                  "merges": ["\u2581 a", "a b", "\u2581a b"]},
    }
    path.mkdir(exist_ok=True)
    with open(path / "tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return path / "tokenizer.json"


def write_config(folder, model, **changes):
    cfg = dict(MODELS[model], tokenizer_class="LlamaTokenizer", add_bos_token=True, **changes)
    with open(folder / "tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump(cfg, f)


def byte(b):
    return 3 + b


def test_from_file_reads_tokenizer_config(tmp_path):
    path = sentencepiece_dir(tmp_path / "llama2")
    write_config(tmp_path / "llama2", "meta-llama/Llama-2-7b-chat-hf")
    msgs = [{"role": "user", "content": "ab"}]
    # "<s>" is its special id; the rest, "[INST] ab [/INST]", is one piece of text, normalized as Hugging Face
    # does (Prepend puts "▁" before it, spaces become "▁"), then BPE with byte fallback for [ I N S T ] /
    want = [1, 259] + [byte(ord(c)) for c in "[INST]"] + [264, 259] + [byte(ord(c)) for c in "[/INST]"]
    for add_special in (False, True):  # the template writes BOS; the tokenizer's own BOS is not added again
        tok = tfcore.Tokenizer.from_file(path, add_special_tokens=add_special)
        assert tok.apply_chat_template(msgs, tokenize=False) == "<s>[INST] ab [/INST]"
        assert tok.apply_chat_template(msgs) == want
        assert tok.apply_chat_template(msgs, template="llama2") == want
    assert tok.encode("ab") == [1, 264]  # while encode does add it


def test_from_file_without_config(tmp_path):
    path = sentencepiece_dir(tmp_path / "bare")
    tok = tfcore.Tokenizer.from_file(path)
    with pytest.raises(ValueError, match="no chat template: .*tokenizer_config.json does not exist"):
        tok.apply_chat_template(CONV)
    with pytest.raises(ValueError, match="was not loaded from a tokenizer.json"):
        tfcore.Tokenizer().apply_chat_template(CONV)
    # a tokenizer_config.json without a template (a base model), and one whose template is not rendered
    write_config(tmp_path / "bare", "meta-llama/Llama-2-7b-chat-hf", chat_template=None)
    with pytest.raises(tfcore.ChatTemplateError, match="has no chat_template and there is no"):
        tfcore.Tokenizer.from_file(path).apply_chat_template(CONV)
    write_config(tmp_path / "bare", "meta-llama/Llama-2-7b-chat-hf",
                 chat_template=MODELS["meta-llama/Llama-2-7b-chat-hf"]["chat_template"].replace(" [/INST]", "[/INST]"))
    with pytest.raises(tfcore.ChatTemplateError, match="it has Llama 2's \\[INST\\], but it is not Llama-2-chat's"):
        tfcore.Tokenizer.from_file(path).apply_chat_template(CONV)
    # a Llama 3 template without Llama 3's tokens in the tokenizer
    write_config(tmp_path / "bare", "meta-llama/Meta-Llama-3-8B-Instruct")
    with pytest.raises(ValueError, match="tok has no token \"<\\|begin_of_text\\|>\""):
        tfcore.Tokenizer.from_file(path).apply_chat_template(CONV)


# ---- ids against Hugging Face's tokenizers ---------------------------------------------------------

@pytest.fixture(scope="module")
def reference_files(tmp_path_factory):
    """qwen2.json, llama3.json and llama2.json of tests/tokenizer/hf_reference.mjs (made if not cached)."""
    if not shutil.which("node") or not os.path.exists(os.path.join(NPM, "node_modules", "tokenizers", "package.json")):
        pytest.skip("Hugging Face's tokenizers (npm) not fetched: scripts/fetch-tokenizer-data.sh")
    cached = os.path.join(ROOT, ".cache", "hf_reference")
    if all(os.path.exists(os.path.join(cached, n + ".json")) for n in ("qwen2", "llama3", "llama2")):
        return cached
    out = str(tmp_path_factory.mktemp("hf_reference"))
    r = subprocess.run(["node", os.path.join(ROOT, "tests", "tokenizer", "hf_reference.mjs"), NPM, os.devnull, out,
                        "--files-only"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return out


def hf_ids(path, texts):
    js = ("const {Tokenizer} = require(process.argv[1]);"
          "(async () => { const t = Tokenizer.fromFile(process.argv[2]); const out = [];"
          "for (const s of JSON.parse(process.argv[3])) out.push((await t.encode(s, null, {addSpecialTokens: false})).getIds());"
          "console.log(JSON.stringify(out)); })();")
    r = subprocess.run(["node", "-e", js, os.path.join(NPM, "node_modules", "tokenizers"), path, json.dumps(texts)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("file,families", [("qwen2", ["chatml", "qwen2.5"]), ("llama3", ["llama3", "llama3.1"]),
                                           ("llama2", ["llama2"])])
def test_ids_equal_hf_tokenizers(reference_files, file, families):
    path = os.path.join(reference_files, file + ".json")
    rng = random.Random(file)
    convs = [CONV, CONV[1:], [{"role": "user", "content": "Größenwahn 日本語 🙂 don't\n\n  spaces  "}],
             [{"role": "system", "content": "  Be terse.\r\n"}, {"role": "user", "content": "<|eot_id|> <s> x"}]]
    convs += [random_conversation(rng, families[0]) for _ in range(20)]
    cases = [(f, c, g) for f in families for c in convs for g in (False, True)]
    tok = tfcore.Tokenizer.from_file(path)
    bos = tfcore.Tokenizer.from_file(path, add_special_tokens=True)
    texts = [tok.apply_chat_template(c, g, tokenize=False, template=f) for f, c, g in cases]
    want = hf_ids(path, texts)
    for (f, c, g), w in zip(cases, want):
        assert tok.apply_chat_template(c, g, template=f) == w, (f, c, g)
        assert bos.apply_chat_template(c, g, template=f) == w, (f, c, g)
