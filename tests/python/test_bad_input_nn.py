"""Bad input to tfcore.nn and to the semantics fixed for issue #16, each case in
a fresh interpreter (test_bad_input.py's runner): an exception of the
documented type with a message naming the function and argument, never a
crash, a NaN or a silently wrong result."""
import numpy as np  # noqa: F401  (the cases' code uses np)
import pytest

import tfcore  # noqa: F401
import tfcore.nn  # noqa: F401
from test_bad_input import run_case

# Cases that reach the library run in a fresh interpreter (a crash fails only the case); pure-Python argument checks
# run here, which keeps the suite fast.
IN_LIBRARY = {"add_none", "radd_none", "div_str", "sdpa_mask_and_causal", "linear_wrong_in_features",
              "embedding_float_ids", "embedding_out_of_range", "layernorm_wrong_width", "parameter_int_grad",
              "gpt_module_bad_id", "load_state_dict_shape"}

# name: (code raising the error, exception class the error must be, fragment of its message)
CASES = {
    "add_none": ("tfcore.zeros(2) + None", "TypeError", "NoneType"),
    "radd_none": ("None + tfcore.zeros(2)", "TypeError", "NoneType"),
    "div_str": ("tfcore.zeros(2) / 'a'", "TypeError", "str"),
    "matmul_none": ("tfcore.matmul(tfcore.zeros(2, 2), None)", "TypeError", "tfcore.matmul: b must be a Tensor"),
    "sdpa_none": ("tfcore.scaled_dot_product_attention(tfcore.zeros(1, 1, 2, 2), None, tfcore.zeros(1, 1, 2, 2))",
                  "TypeError", "key must be a Tensor"),
    "sdpa_mask_and_causal": (
        "q = tfcore.zeros(1, 1, 2, 2)\ntfcore.scaled_dot_product_attention(q, q, q, "
        "attn_mask=tfcore.tensor(np.ones((2, 2), bool)), is_causal=True)", "ValueError", "not both"),
    "sample_2d": ("tfcore.gpt.sample(np.zeros((2, 3), np.float32))", "ValueError", "must be 1-D"),
    "sample_none": ("tfcore.gpt.sample(None)", "TypeError", "sample"),
    "linear_forward_none": ("tfcore.nn.Linear(2, 3)(None)", "TypeError", "tfcore.linear: x must be a Tensor"),
    "linear_wrong_in_features": ("tfcore.nn.Linear(2, 3)(tfcore.zeros(4, 5))", "ShapeError", "tfc_linear"),
    "linear_negative": ("tfcore.nn.Linear(-1, 3)", "ValueError", "in_features"),
    "embedding_float_ids": ("tfcore.nn.Embedding(4, 2)(tfcore.zeros(3))", "TypeError", "tfc_embedding"),
    "embedding_out_of_range": ("tfcore.nn.Embedding(4, 2)(tfcore.tensor([4]))", "ValueError", "tfc_embedding"),
    "embedding_padding_idx": ("tfcore.nn.Embedding(4, 2, padding_idx=0)", "ValueError", "padding_idx"),
    "layernorm_wrong_width": ("tfcore.nn.LayerNorm(3)(tfcore.zeros(2, 4))", "ValueError", "layer_norm"),
    "layernorm_two_dims": ("tfcore.nn.LayerNorm((2, 3))", "ValueError", "only the last dim"),
    "gelu_bad_approximate": ("tfcore.nn.GELU('fast')", "ValueError", "approximate"),
    "dropout_p": ("tfcore.nn.Dropout(-0.1)", "ValueError", "between 0 and 1"),
    "parameter_of_list": ("tfcore.nn.Parameter([1.0])", "TypeError", "tfcore.Tensor"),
    "parameter_int_grad": ("tfcore.nn.Parameter(tfcore.zeros(2, dtype=tfcore.int64))", "Error", ""),
    "assign_tensor_over_parameter": ("m = tfcore.nn.Linear(2, 2)\nm.weight = tfcore.zeros(2, 2)", "TypeError",
                                     "Parameter or None"),
    "load_state_dict_none": ("tfcore.nn.Linear(2, 2).load_state_dict(None)", "TypeError", "dict-like"),
    "load_state_dict_shape": ("tfcore.nn.Linear(2, 2).load_state_dict({'weight': np.zeros((3, 2)), "
                              "'bias': np.zeros(2)})", "RuntimeError", "Error(s) in loading state_dict for Linear"),  # details: test_nn.py
    "load_state_dict_not_tensor": ("tfcore.nn.Linear(2, 2).load_state_dict({'weight': 'w', "
                                   "'bias': np.zeros(2)})", "RuntimeError", "Error(s) in loading state_dict for Linear"),
    "init_vector_fan": ("tfcore.nn.init.kaiming_uniform_(tfcore.zeros(3))", "ValueError", "fewer than 2"),
    "init_int_tensor": ("tfcore.nn.init.normal_(tfcore.zeros(3, 3, dtype=tfcore.int64))", "TypeError",
                        "floating point"),
    "module_to_int": ("tfcore.nn.Linear(2, 2).to(tfcore.int64)", "TypeError", "floating point"),
    "sequential_index": ("tfcore.nn.Sequential(tfcore.nn.ReLU())[3]", "IndexError", "out of range"),
    "gpt_module_too_long": ("tfcore.nn.gpt.GPT(n_layer=1, n_head=1, n_embd=4, block_size=4, vocab_size=5)"
                            "(np.zeros((1, 5), np.int64))", "ValueError", "block_size"),
    "gpt_module_bad_id": ("tfcore.nn.gpt.GPT(n_layer=1, n_head=1, n_embd=4, block_size=4, vocab_size=5)"
                          "(np.array([[5]]))", "ValueError", "tfc_embedding"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_raises_the_right_exception(name):
    code, exc, fragment = CASES[name]
    if name not in IN_LIBRARY:
        with pytest.raises(Exception) as info:
            exec(code, {"np": np, "tfcore": tfcore})
        assert exc in [c.__name__ for c in type(info.value).__mro__], repr(info.value)
        assert fragment in str(info.value)
        return
    r = run_case(code)
    assert r.returncode == 0, "the interpreter died (status %d):\n%s" % (r.returncode, r.stderr[-3000:])
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    assert "RAISED" in out, "no exception:\n" + r.stdout + r.stderr
    assert exc in out["RAISED"].split(), "raised %s, wanted %s: %s" % (out["RAISED"], exc, out.get("MESSAGE"))
    assert fragment in out.get("MESSAGE", ""), out.get("MESSAGE")
