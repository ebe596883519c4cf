"""tfcore chat: a Llama directory (config.json + model.safetensors written by
the library, a Llama-2-layout tokenizer.json and tokenizer_config.json
written here) answers two user lines; the conversation each turn renders is
Llama-2-chat's template written out from its documentation, with the first
reply inside the second prompt; greedy replies are the model's own greedy
continuation of that prompt, stopped at </s>; a directory without a chat
template is refused by name."""
import json
import os
import subprocess

import numpy as np
import pytest

import tfcore
from helpers import needs
from test_chat_template import sentencepiece_dir, write_config
from test_load_model import _cli, needs_cli

pytestmark = [needs("tfc_chat_encode", "tfc_gpt_load_hf"), needs_cli]


def llama_dir(path):
    sentencepiece_dir(path)
    cfg = tfcore.GPTConfig(arch="llama", n_layer=2, n_head=4, n_kv_head=2, n_embd=32, mlp_hidden=48,
                           vocab_size=265, block_size=128, tie_weights=False)
    model = tfcore.GPT(cfg, seed=4)
    model.save_hf(path, bos_token_id=1, eos_token_id=2)
    return model


def chat(path, stdin, *flags):
    r = subprocess.run([_cli(), "chat", "--ckpt", str(path), "--temperature", "0", "--max-new-tokens", "6",
                        "--show-prompt", *flags], input=stdin, capture_output=True, text=True, timeout=120)
    return r


def test_two_turns_in_llama2s_template(tmp_path):
    d = tmp_path / "m"
    model = llama_dir(d)
    write_config(d, "meta-llama/Llama-2-7b-chat-hf")
    r = chat(d, "ab\nab ab\n")
    assert r.returncode == 0, r.stderr
    replies = r.stdout.split("\n")
    assert len(replies) == 3 and replies[2] == ""
    first = "<s>[INST] ab [/INST]"
    second = first + " " + replies[0].strip() + " </s><s>[INST] ab ab [/INST]"
    assert r.stderr == first + second
    # the first reply is the model's greedy continuation of the first prompt's ids, up to </s>
    tok = tfcore.Tokenizer.from_file(d / "tokenizer.json")
    ids = tok.apply_chat_template([{"role": "user", "content": "ab"}])
    want = model.generate(ids, 6, temperature=0)
    if 2 in want:
        want = want[:want.index(2)]
    assert replies[0] == tok.decode(want)


def test_template_flag_and_refusals(tmp_path):
    d = tmp_path / "m"
    llama_dir(d)
    r = chat(d, "ab\n")
    assert r.returncode == 2 and "no tokenizer_config.json" in r.stderr and "--template" in r.stderr
    r = chat(d, "ab\n", "--template", "llama2")
    assert r.returncode == 0 and r.stderr.startswith("<s>[INST] ab [/INST]")
    r = chat(d, "ab\n", "--template", "chatml")  # the tokenizer has no <|im_end|>: not that model's
    assert r.returncode == 2 and "<|im_end|>" in r.stderr
    r = chat(d, "ab\n", "--template", "mystery")
    assert r.returncode != 0 and "mystery" in r.stderr
