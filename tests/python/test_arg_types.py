"""Python argument types as PyTorch 1.13 checks them (issue 41): sizes and
ranks are integers (TypeError, where int() would truncate 8.5 to 8), token
ids are integer arrays, generate_batch checks its arguments before it
allocates its output, a saved tensor modified in place is a RuntimeError,
and nn.Dropout takes p in [0, 1] with p = 1 zeroing everything."""
import numpy as np
import pytest
import torch

import tfcore

CFG = dict(n_layer=1, n_head=2, n_embd=16, block_size=16, vocab_size=20)


@pytest.mark.parametrize("make", [
    lambda nn: nn.Linear(8.5, 3),
    lambda nn: nn.Linear(8, 3.0),
    lambda nn: nn.Linear("8", 3),
    lambda nn: nn.Embedding(4.5, 2),
    lambda nn: nn.Embedding(4, None),
    lambda nn: nn.LayerNorm(3.5),
], ids=["linear_in", "linear_out", "linear_str", "embedding_num", "embedding_dim", "layernorm"])
def test_sizes_must_be_integers_as_in_torch(make):
    with pytest.raises(TypeError):
        make(torch.nn)
    with pytest.raises(TypeError):
        make(tfcore.nn)


def test_numpy_integer_sizes_are_accepted():
    m = tfcore.nn.Linear(np.int64(8), np.int32(3))
    assert m.in_features == 8 and type(m.in_features) is int and m.weight.shape == (3, 8)


@pytest.mark.parametrize("rank", [4.7, "4", None, 4.0])
def test_add_lora_rank_must_be_an_integer(rank):
    m = tfcore.GPT(**CFG)
    with pytest.raises(TypeError, match="rank must be an int"):
        m.add_lora(rank)
    assert m.lora_parameters() == []


def test_add_lora_accepts_numpy_integer_rank():
    m = tfcore.GPT(**CFG)
    params = m.add_lora(np.int64(2))
    assert params and params[0].shape[0] == 2


@pytest.mark.parametrize("ids", [np.array([[1.5, 2.0]]), [[1.0, 2.0]], tfcore.tensor([[1.0, 2.0]])],
                         ids=["numpy_float", "list_float", "tensor_float"])
def test_float_token_ids_are_refused_not_truncated(ids):
    m = tfcore.GPT(**CFG)
    with pytest.raises(TypeError):
        m(ids)
    with pytest.raises(TypeError, match="integer ids"):
        m(np.array([[1, 2]]), targets=np.array([[1.5, 2.0]]))


def test_float_prompts_are_refused_in_generate():
    m = tfcore.GPT(**CFG)
    with pytest.raises(TypeError, match="prompt must hold integer ids"):
        m.generate([1.0, 2.5], 2)
    with pytest.raises(TypeError, match=r"prompts\[1\] must hold integer ids"):
        m.generate_batch([[1], [2.5]], 2)
    with pytest.raises(TypeError, match="max_new_tokens must be an int"):
        m.generate([1, 2], 2.5)
    assert len(m.generate(np.array([1, 2]), 2, temperature=0)) == 2


class _Spy:
    """Records the sizes of the int32 arrays tfcore.gpt allocates through cffi."""

    def __init__(self, real):
        self.real, self.sizes = real, []

    def new(self, ctype, init=None):
        if ctype == "int32_t[]" and isinstance(init, int):
            self.sizes.append(init)
        return self.real.new(ctype) if init is None else self.real.new(ctype, init)

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.mark.parametrize("prompts,match", [([[1], []], r"n_prompts\[1\] is 0"),
                                           ([[1], [2, 20]], r"prompts\[1\]\[1\] is 20"),
                                           ([], "n_seq is 0")])
def test_generate_batch_validates_before_allocating(monkeypatch, prompts, match):
    m = tfcore.GPT(**CFG)
    spy = _Spy(tfcore.gpt.ffi)
    monkeypatch.setattr(tfcore.gpt, "ffi", spy)
    with pytest.raises(ValueError, match=match):
        m.generate_batch(prompts, 2 ** 24)
    assert max(spy.sizes, default=0) < 2 ** 24


def test_generate_batch_refuses_negative_and_float_max_new():
    m = tfcore.GPT(**CFG)
    with pytest.raises(ValueError, match="max_new is -1"):
        m.generate_batch([[1]], -1)
    with pytest.raises(TypeError, match="max_new_tokens must be an int"):
        m.generate_batch([[1]], 2.0)


def _modify_saved(lib):
    a = lib.ones(3, requires_grad=True)
    b = a * 2.0
    c = b * b  # saves b
    with lib.no_grad():
        b.add_(1.0)
    c.sum().backward()


def test_saved_tensor_modified_in_place_is_a_runtime_error_as_in_torch():
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _modify_saved(torch)
    with pytest.raises(RuntimeError, match="modified in place"):
        _modify_saved(tfcore)
    with pytest.raises(tfcore.InvalidArgumentError):  # and still what it was
        _modify_saved(tfcore)


def test_dropout_p_one_zeros_everything_as_in_torch():
    x = np.array([1.0, -2.0, np.nan, 4.0], dtype=np.float32)
    want = torch.nn.Dropout(1.0)(torch.tensor(x))
    d = tfcore.nn.Dropout(1.0)
    got = d(tfcore.tensor(x))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    t = tfcore.tensor(x[[0, 1, 3]], requires_grad=True)
    tfcore.dropout(t, 1.0).sum().backward()
    assert t.grad.numpy().tolist() == [0.0, 0.0, 0.0]
    d.eval()
    np.testing.assert_array_equal(d(tfcore.tensor(x)).numpy(), x)


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_dropout_p_outside_0_1_is_a_value_error_at_construction(p):
    with pytest.raises(ValueError, match="between 0 and 1"):
        torch.nn.Dropout(p)
    with pytest.raises(ValueError, match="between 0 and 1"):
        tfcore.nn.Dropout(p)
    with pytest.raises(ValueError, match="between 0 and 1"):
        tfcore.dropout(tfcore.ones(2), p)


def test_string_index_is_a_type_error_as_in_torch():
    with pytest.raises(TypeError):
        torch.zeros(4)["a"]
    with pytest.raises(TypeError):
        tfcore.zeros(4)["a"]
    with pytest.raises(IndexError):  # and still what it was
        tfcore.zeros(4)["a"]
