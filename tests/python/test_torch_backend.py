"""tfcore.torch: our explicit kernels as torch.autograd.Functions.

Each function against torch 1.13's own op (forward and gradients, f32 and
f64) and against finite differences (torch.autograd.gradcheck in f64,
which knows nothing of our backward); the modules load torch's
state_dicts; inputs cross without copies; errors arrive as tfcore's
exceptions.
"""
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import tfcore  # noqa: E402
import tfcore.torch as tt  # noqa: E402

DTYPES = [(torch.float64, 1e-12), (torch.float32, 2e-5)]


def leaves(*shapes, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, dtype=dtype, generator=g).requires_grad_() for s in shapes]


def compare(ours, ref, inputs, tol):
    """Outputs and the gradients of a random weighting of them agree."""
    a, b = ours(*inputs), ref(*inputs)
    assert a.shape == b.shape and a.dtype == b.dtype
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    w = torch.randn(a.shape, dtype=a.dtype, generator=torch.Generator().manual_seed(7))
    ga = torch.autograd.grad((a * w).sum(), [t for t in inputs if t.requires_grad])
    gb = torch.autograd.grad((b * w).sum(), [t for t in inputs if t.requires_grad])
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_layer_norm_matches_torch(dtype, tol):
    x, w, b = leaves((3, 5, 16), (16,), (16,), dtype=dtype)
    compare(lambda x, w, b: tt.layer_norm(x, (16,), w, b, 1e-5),
            lambda x, w, b: F.layer_norm(x, (16,), w, b, 1e-5), [x, w, b], tol)
    (x,) = leaves((4, 16), dtype=dtype, seed=1)
    compare(lambda x: tt.layer_norm(x, 16), lambda x: F.layer_norm(x, (16,)), [x], tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_torch(dtype, tol, causal):
    q, k, v = leaves((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4), dtype=dtype)

    def ref(q, k, v):
        s = q @ k.transpose(-1, -2) / 8 ** 0.5
        if causal:  # bottom-right aligned: query i sees keys j <= i + S - T
            T, S = q.shape[-2], k.shape[-2]
            keep = torch.ones(T, S, dtype=torch.bool).tril(S - T)
            s = s.masked_fill(~keep, float("-inf"))
        return torch.softmax(s, -1) @ v

    compare(lambda q, k, v: tt.scaled_dot_product_attention(q, k, v, is_causal=causal), ref, [q, k, v], tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("hkv,window", [(1, None), (2, None), (2, 3), (4, 2)])
def test_grouped_query_attention_matches_hf(dtype, tol, hkv, window):
    q, k, v = leaves((2, 4, 6, 8), (2, hkv, 6, 8), (2, hkv, 6, 8), dtype=dtype)

    def ref(q, k, v):  # HF: repeat_kv by expand + reshape, an explicit causal (+ sliding window) mask
        g = q.shape[1] // hkv
        kk = k[:, :, None].expand(2, hkv, g, 6, 8).reshape(2, 4, 6, 8)
        vv = v[:, :, None].expand(2, hkv, g, 6, 8).reshape(2, 4, 6, 8)
        i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
        keep = j <= i if window is None else (j <= i) & (j > i - window)
        s = (q @ kk.transpose(-1, -2) / 8 ** 0.5).masked_fill(~keep, float("-inf"))
        return torch.softmax(s, -1) @ vv

    compare(lambda q, k, v: tt.scaled_dot_product_attention(q, k, v, is_causal=True, window=window), ref,
            [q, k, v], tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_cross_entropy_matches_torch(dtype, tol):
    (lg,) = leaves((6, 9), dtype=dtype)
    t = torch.tensor([0, 8, -100, 3, 3, 1])
    a, b = tt.cross_entropy(lg, t), F.cross_entropy(lg, t)
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    ga, = torch.autograd.grad(a * 1.5, [lg])
    gb, = torch.autograd.grad(b * 1.5, [lg])
    torch.testing.assert_close(ga, gb, rtol=tol, atol=tol)
    assert torch.all(ga[2] == 0)  # the ignored row


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_torch(dtype, tol, approximate):
    (x,) = leaves((4, 11), dtype=dtype)
    compare(lambda x: tt.gelu(x, approximate), lambda x: F.gelu(x, approximate=approximate), [x], tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_embedding_matches_torch(dtype, tol):
    (table,) = leaves((7, 5), dtype=dtype)
    ids = torch.tensor([[1, 6, 1], [0, 2, 1]])
    compare(lambda t: tt.embedding(ids, t), lambda t: F.embedding(ids, t), [table], tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_rms_norm_matches_the_published_equation(dtype, tol):
    x, w = leaves((3, 5, 16), (16,), dtype=dtype)

    def ref(x, w):  # y = x / sqrt(mean(x^2) + eps) * w, as HF's LlamaRMSNorm writes it
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    compare(lambda x, w: tt.rms_norm(x, 16, w, 1e-6), ref, [x, w], tol)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_rope_matches_transformers_form(dtype, tol):
    (x,) = leaves((2, 3, 5, 8), dtype=dtype)
    inv = 1.0 / (10000.0 ** (torch.arange(0, 8, 2, dtype=torch.float64) / 8))
    inv = inv.to(dtype)
    pos = torch.tensor([[3, 4, 5, 6, 7], [0, 1, 2, 3, 4]])  # per sequence: a cache's offset, then a fresh one

    def ref(x):  # transformers' apply_rotary_pos_emb with cos/sin of position_ids · inv_freq
        ang = pos[:, None, :, None].to(dtype) * inv
        emb = torch.cat((ang, ang), dim=-1)
        return x * emb.cos() + rotate_half(x) * emb.sin()

    compare(lambda x: tt.rope(x, pos, inv), ref, [x], tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_swiglu_matches_llama_mlp(dtype, tol):
    g, u = leaves((4, 6), (4, 6), dtype=dtype)
    compare(tt.swiglu, lambda g, u: F.silu(g) * u, [g, u], tol)


def lce_reference(h, w, t, ignore_index=-100):
    """The unfused LM head as a model writes it: logits = h @ wᵀ, then torch's cross-entropy."""
    logits = h @ w.T
    return F.cross_entropy(logits.reshape(-1, w.shape[0]), t.reshape(-1), ignore_index=ignore_index)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("ignore_index", [-100, 3])
def test_linear_cross_entropy_matches_torch(dtype, tol, ignore_index):
    h, w = leaves((2, 5, 8), (11, 8), dtype=dtype)
    t = torch.tensor([[0, 10, 4, 3, 3], [4, 1, 7, 7, 2]])
    t[t == 4] = ignore_index  # rows 2 and 5 ignored (and the 3s, when ignore_index is 3)
    a, b = tt.linear_cross_entropy(h, w, t, ignore_index), lce_reference(h, w, t, ignore_index)
    assert a.shape == () and a.dtype == dtype
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    ga = torch.autograd.grad(a * 1.5, [h, w])
    gb = torch.autograd.grad(b * 1.5, [h, w])
    for x, y in zip(ga, gb):
        assert x.shape == y.shape
        torch.testing.assert_close(x, y, rtol=tol, atol=tol)
    ignored = t == ignore_index
    assert ignored.any() and torch.all(ga[0][ignored] == 0)  # ignored rows get no gradient


def test_linear_cross_entropy_in_several_chunks():
    """600 rows of a 4200-word vocabulary in f64: 256-row chunks (8 MiB of logits each), the last one partial."""
    h, w = leaves((600, 6), (4200, 6), seed=3)
    t = torch.randint(0, 4200, (600,), generator=torch.Generator().manual_seed(4))
    t[::7] = -100
    a, b = tt.linear_cross_entropy(h, w, t), lce_reference(h, w, t)
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    for x, y in zip(torch.autograd.grad(a, [h, w]), torch.autograd.grad(b, [h, w])):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)


def test_linear_cross_entropy_gradients_only_where_wanted():
    h, w = leaves((4, 6), (9, 6), seed=5)
    t = torch.tensor([1, 8, 0, -100])
    frozen = w.detach()
    (gh,) = torch.autograd.grad(tt.linear_cross_entropy(h, frozen, t), [h])
    (ref,) = torch.autograd.grad(lce_reference(h, frozen, t), [h])
    torch.testing.assert_close(gh, ref, rtol=1e-12, atol=1e-12)
    with torch.no_grad():
        loss = tt.linear_cross_entropy(h, w, t)
    assert not loss.requires_grad
    torch.testing.assert_close(loss, lce_reference(h, w, t).detach(), rtol=1e-12, atol=1e-12)
    # backward twice through one retained graph accumulates twice, as torch's own ops do
    loss = tt.linear_cross_entropy(h, w, t)
    loss.backward(retain_graph=True)
    loss.backward()
    ref_h, ref_w = torch.autograd.grad(lce_reference(h, w, t), [h, w])
    torch.testing.assert_close(h.grad, 2 * ref_h, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(w.grad, 2 * ref_w, rtol=1e-12, atol=1e-12)


def test_linear_cross_entropy_all_rows_ignored():
    h, w = leaves((3, 4), (5, 4), seed=6)
    loss = tt.linear_cross_entropy(h, w, torch.full((3,), -100))
    assert torch.isnan(loss)
    gh, gw = torch.autograd.grad(loss, [h, w])
    assert torch.all(gh == 0) and torch.all(gw == 0)


def test_linear_cross_entropy_module_is_an_lm_head():
    torch.manual_seed(1)
    ref = torch.nn.Linear(8, 13, bias=False)
    head = tt.LinearCrossEntropy(8, 13)
    head.load_state_dict(ref.state_dict())  # lm_head.weight as HF stores it
    h = torch.randn(2, 3, 8, requires_grad=True)
    t = torch.tensor([[1, 12, 0], [-100, 5, 5]])
    torch.testing.assert_close(head(h), ref(h))  # no targets: the logits
    a, b = head(h, t), F.cross_entropy(ref(h).view(-1, 13), t.view(-1))
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    a.backward()
    b.backward()
    torch.testing.assert_close(head.weight.grad, ref.weight.grad, rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError, match="bias"):
        tt.LinearCrossEntropy(8, 13, bias=True)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_silu_and_swiglu_modules_match_torch(dtype, tol):
    (x,) = leaves((3, 4, 6), dtype=dtype)
    compare(tt.silu, F.silu, [x], tol)
    compare(tt.SiLU(), torch.nn.SiLU(), [x], tol)
    g, u = leaves((5, 7), (5, 7), dtype=dtype, seed=1)
    compare(tt.SwiGLU(), lambda g, u: F.silu(g) * u, [g, u], tol)
    (gu,) = leaves((2, 3, 14), dtype=dtype, seed=2)  # a fused gate_up projection, gate first
    compare(tt.SwiGLU(), lambda gu: F.silu(gu[..., :7]) * gu[..., 7:], [gu], tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_apply_rotary_pos_emb_matches_transformers(dtype, tol):
    """transformers' LlamaRotaryEmbedding (cos/sin from f32 inv_freq · positions, cast to the model's dtype)
    and apply_rotary_pos_emb, on grouped q [B,H,T,D] and k [B,Hkv,T,D]."""
    q, k = leaves((2, 4, 5, 8), (2, 2, 5, 8), dtype=dtype)
    inv = 1.0 / (10000.0 ** (torch.arange(0, 8, 2, dtype=torch.int64).float() / 8))  # f32, as HF computes it
    pos = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])

    def ref(q, k):
        freqs = (inv[None, :, None] @ pos[:, None, :].float()).transpose(1, 2)  # [B, T, D/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]  # unsqueeze_dim=1
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    ours = tt.apply_rotary_pos_emb(q, k, pos, inv.to(dtype))
    theirs = ref(q, k)
    for a, b in zip(ours, theirs):
        # f64: HF rounds cos/sin to f32 before widening them; the f64 kernel forms them in f64 (~1e-7 apart)
        torch.testing.assert_close(a, b, rtol=tol if dtype == torch.float32 else 1e-6, atol=tol if dtype ==
                                   torch.float32 else 1e-6)
    compare(lambda q: tt.apply_rotary_pos_emb(q, k, pos, inv.to(dtype))[0],
            lambda q: tt.rope(q, pos, inv.to(dtype)), [q], 0)


def test_gradcheck_f64():
    """Finite differences in f64 (torch.autograd.gradcheck) through every Function."""
    x, w, b = leaves((3, 6), (6,), (6,))
    assert torch.autograd.gradcheck(lambda x, w, b: tt.layer_norm(x, 6, w, b), (x, w, b))
    q, k, v = leaves((1, 2, 4, 3), (1, 2, 4, 3), (1, 2, 4, 3), seed=2)
    assert torch.autograd.gradcheck(lambda q, k, v: tt.scaled_dot_product_attention(q, k, v, True), (q, k, v))
    (lg,) = leaves((5, 4), seed=3)
    t = torch.tensor([0, 3, -100, 1, 1])
    assert torch.autograd.gradcheck(lambda lg: tt.cross_entropy(lg, t), (lg,))
    (x,) = leaves((2, 5), seed=4)
    assert torch.autograd.gradcheck(lambda x: tt.gelu(x, "tanh"), (x,))
    x, w = leaves((3, 6), (6,), seed=5)
    assert torch.autograd.gradcheck(lambda x, w: tt.rms_norm(x, 6, w, 1e-6), (x, w))
    (x,) = leaves((1, 2, 3, 4), seed=6)
    inv = torch.tensor([1.0, 0.01], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x: tt.rope(x, torch.tensor([2, 5, 9]), inv), (x,))
    g, u = leaves((3, 4), (3, 4), seed=7)
    assert torch.autograd.gradcheck(tt.swiglu, (g, u))
    (x,) = leaves((3, 4), seed=8)
    assert torch.autograd.gradcheck(tt.silu, (x,))
    h, w = leaves((4, 3), (5, 3), seed=9)
    t = torch.tensor([4, -100, 0, 2])
    assert torch.autograd.gradcheck(lambda h, w: tt.linear_cross_entropy(h, w, t), (h, w))


def test_modules_are_drop_in():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Embedding(11, 8), torch.nn.LayerNorm(8), torch.nn.GELU("tanh"))
    ours = torch.nn.Sequential(tt.Embedding(11, 8), tt.LayerNorm(8), tt.GELU("tanh"))
    ours.load_state_dict(ref.state_dict())
    ids = torch.tensor([[1, 2, 10], [3, 3, 0]])
    a, b = ours(ids), ref(ids)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    a.sum().backward()
    b.sum().backward()
    for pa, pb in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-5, atol=1e-5)
    lg = torch.randn(4, 11)
    t = torch.tensor([1, -100, 3, 10])
    torch.testing.assert_close(tt.CrossEntropyLoss()(lg, t), torch.nn.CrossEntropyLoss()(lg, t))


def test_rmsnorm_module_takes_hf_state_dict():
    m = tt.RMSNorm(8, eps=1e-5)
    m.load_state_dict({"weight": torch.linspace(0.5, 1.5, 8)})
    x = torch.randn(2, 3, 8)
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * m.weight
    torch.testing.assert_close(m(x), ref, rtol=1e-5, atol=1e-6)


def test_inputs_cross_without_copies():
    x = torch.randn(4, 8)
    assert tt._in(x).data_ptr() == x.data_ptr()  # contiguous: read in place
    y = tt.layer_norm(x, 8)
    # the result is a torch tensor over the memory the kernel wrote: writing through it is visible to a re-import
    assert tt._in(y).data_ptr() == y.data_ptr()


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_projection_views_cross_in_place(dtype, tol):
    """q, k, v as a model makes them — [B,T,H,D] projections viewed [B,H,T,D] — are read where they lie
    (no copy), with the same results as their contiguous copies; other layouts are still copied."""
    q, k, v = (t.view(2, 5, h, 8).transpose(1, 2) for t, h in
               zip(leaves((2, 5, 32), (2, 5, 16), (2, 5, 16), dtype=dtype), (4, 2, 2)))
    assert not q.is_contiguous() and tt._in_rows(q).data_ptr() == q.data_ptr()
    assert tt._in(q).data_ptr() != q.data_ptr()  # the contiguous door copies
    cont = [t.detach().contiguous().requires_grad_() for t in (q, k, v)]
    a = tt.scaled_dot_product_attention(q, k, v, is_causal=True)
    b = tt.scaled_dot_product_attention(*cont, is_causal=True)
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    dout = torch.randn(2, 5, 4, 8, dtype=dtype).transpose(1, 2)  # the upstream gradient as a view too
    for x, y in zip(torch.autograd.grad(a, [q, k, v], dout), torch.autograd.grad(b, cont, dout.contiguous())):
        torch.testing.assert_close(x, y, rtol=tol, atol=tol)
    inv = (1.0 / 10000.0 ** (torch.arange(0, 8, 2, dtype=torch.float64) / 8)).to(dtype)
    pos = torch.arange(5)
    torch.testing.assert_close(tt.rope(q, pos, inv), tt.rope(cont[0], pos, inv), rtol=0, atol=0)
    gate_up = leaves((3, 10), dtype=dtype, seed=4)[0]
    g, u = gate_up[:, :5], gate_up[:, 5:]  # row-strided halves
    compare(tt.swiglu, lambda g, u: F.silu(g) * u, [g, u], tol)
    t = torch.randn(4, 6, dtype=dtype).t()  # last dim not unit-stride: copied
    assert tt._in_rows(t).data_ptr() != t.data_ptr()


def test_errors_are_tfcore_exceptions():
    x = torch.randn(4, 8, dtype=torch.float64)
    with pytest.raises(tfcore.ShapeError, match="tfc_layernorm_forward"):
        tt.layer_norm(x, 8, torch.ones(7, dtype=torch.float64))
    with pytest.raises(ValueError, match="normalized_shape"):
        tt.layer_norm(x, (4, 8))
    with pytest.raises(TypeError, match="torch.Tensor"):
        tt.layer_norm([1.0, 2.0], 2)
    with pytest.raises(tfcore.Error):
        tt.cross_entropy(torch.randn(3, 4), torch.tensor([0, 4, 1]))  # target out of range
    with pytest.raises(tfcore.DtypeError, match="tfc_linear_cross_entropy"):
        tt.linear_cross_entropy(torch.randn(3, 4), torch.randn(5, 4, dtype=torch.float64), torch.tensor([0, 4, 1]))
    with pytest.raises(tfcore.ShapeError, match="tfc_linear_cross_entropy"):
        tt.linear_cross_entropy(torch.randn(3, 4), torch.randn(5, 3), torch.tensor([0, 4, 1]))
    with pytest.raises(tfcore.InvalidArgumentError, match="targets"):
        tt.linear_cross_entropy(torch.randn(3, 4, requires_grad=True), torch.randn(5, 4), torch.tensor([0, 5, 1]))
