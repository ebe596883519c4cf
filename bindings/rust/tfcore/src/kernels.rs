//! Explicit fused kernels on caller-owned buffers, no graph: the entry
//! points another framework (with its own autograd) calls. Outputs are
//! tensors the caller allocated with the right shapes; `accumulate` adds
//! into gradient outputs instead of overwriting (TFC_GRAD_ACCUMULATE).
use std::ptr;

use tfcore_sys as sys;

use crate::error::{check, Result};
use crate::tensor::Tensor;

fn flags(accumulate: bool) -> u32 {
    if accumulate {
        sys::TFC_GRAD_ACCUMULATE
    } else {
        0
    }
}

fn opt(t: Option<&Tensor>) -> *mut sys::tfc_tensor {
    t.map_or(ptr::null_mut(), Tensor::as_ptr)
}

/// out = softmax(scale · q kᵀ + causal mask) v, and the rows' log-sum-exp
/// (`lse`, needed by the backward). q `[B,H,T,D]`, k `[B,H,S,D]`, v `[B,H,S,Dv]`,
/// out `[B,H,T,Dv]`, lse `[B,H,T]`.
pub fn attention_forward(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    causal: bool,
    scale: f64,
    out: &Tensor,
    lse: Option<&Tensor>,
) -> Result<()> {
    check(unsafe {
        sys::tfc_attention_forward(q.as_ptr(), k.as_ptr(), v.as_ptr(), causal as i32, scale, out.as_ptr(), opt(lse))
    })
}

/// Gradients of [`attention_forward`] into dq/dk/dv (each optional).
#[allow(clippy::too_many_arguments)]
pub fn attention_backward(
    dout: &Tensor,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
    lse: &Tensor,
    causal: bool,
    scale: f64,
    dq: Option<&Tensor>,
    dk: Option<&Tensor>,
    dv: Option<&Tensor>,
    accumulate: bool,
) -> Result<()> {
    check(unsafe {
        sys::tfc_attention_backward(
            dout.as_ptr(),
            q.as_ptr(),
            k.as_ptr(),
            v.as_ptr(),
            out.as_ptr(),
            lse.as_ptr(),
            causal as i32,
            scale,
            opt(dq),
            opt(dk),
            opt(dv),
            flags(accumulate),
        )
    })
}

/// y = GELU(x) (tanh_approx: GPT-2's tanh form, else exact erf).
pub fn gelu_forward(x: &Tensor, tanh_approx: bool, y: &Tensor) -> Result<()> {
    check(unsafe { sys::tfc_gelu_forward(x.as_ptr(), tanh_approx as i32, y.as_ptr()) })
}

/// dx = dy · GELU'(x).
pub fn gelu_backward(dy: &Tensor, x: &Tensor, tanh_approx: bool, dx: &Tensor, accumulate: bool) -> Result<()> {
    check(unsafe { sys::tfc_gelu_backward(dy.as_ptr(), x.as_ptr(), tanh_approx as i32, dx.as_ptr(), flags(accumulate)) })
}

/// out = silu(gate) ⊙ up. Every tensor may be a row-strided view (the halves of a `[.., 2F]` buffer).
pub fn swiglu_forward(gate: &Tensor, up: &Tensor, out: &Tensor) -> Result<()> {
    check(unsafe { sys::tfc_swiglu_forward(gate.as_ptr(), up.as_ptr(), out.as_ptr()) })
}

/// dgate = dy · up · σ(g)(1 + g(1 − σ(g))), dup = dy · silu(g), each optional (also views: the halves of one
/// `[.., 2F]` gradient).
pub fn swiglu_backward(
    dy: &Tensor,
    gate: &Tensor,
    up: &Tensor,
    dgate: Option<&Tensor>,
    dup: Option<&Tensor>,
    accumulate: bool,
) -> Result<()> {
    check(unsafe {
        sys::tfc_swiglu_backward(dy.as_ptr(), gate.as_ptr(), up.as_ptr(), opt(dgate), opt(dup), flags(accumulate))
    })
}
