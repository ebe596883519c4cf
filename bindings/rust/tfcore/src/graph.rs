//! Graph: the autograd tape, and the differentiable ops recorded on it.
//!
//! An op whose inputs require grad records a node on the graph it is
//! called through; with recording off (`set_grad_enabled(false)`) nothing
//! is recorded — the C API's no_grad. `backward` accumulates into the
//! leaves' gradients; call `clear` afterwards to free the saved tensors.
use std::ptr::{self, NonNull};

use tfcore_sys as sys;

use crate::error::{check, Error, Result};
use crate::tensor::{make, DType, Tensor};

pub struct Graph {
    raw: NonNull<sys::tfc_graph>,
}

impl Drop for Graph {
    fn drop(&mut self) {
        unsafe { sys::tfc_graph_release(self.raw.as_ptr()) }
    }
}

macro_rules! unary_ops {
    ($($(#[$doc:meta])* $name:ident => $cfn:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, x: &Tensor) -> Result<Tensor> {
            make(|o| unsafe { sys::$cfn(self.g(), x.as_ptr(), o) })
        }
    )*};
}

macro_rules! binary_ops {
    ($($(#[$doc:meta])* $name:ident => $cfn:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
            make(|o| unsafe { sys::$cfn(self.g(), a.as_ptr(), b.as_ptr(), o) })
        }
    )*};
}

macro_rules! scalar_ops {
    ($($(#[$doc:meta])* $name:ident => $cfn:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, x: &Tensor, s: f64) -> Result<Tensor> {
            make(|o| unsafe { sys::$cfn(self.g(), x.as_ptr(), s, o) })
        }
    )*};
}

macro_rules! reduce_ops {
    ($($(#[$doc:meta])* $name:ident => $cfn:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, x: &Tensor, dims: &[i32], keepdim: bool) -> Result<Tensor> {
            let p = if dims.is_empty() { ptr::null() } else { dims.as_ptr() };
            make(|o| unsafe { sys::$cfn(self.g(), x.as_ptr(), p, dims.len() as i32, keepdim as i32, o) })
        }
    )*};
}

impl Graph {
    /// A new, empty graph with recording on.
    pub fn new() -> Result<Graph> {
        let mut g: *mut sys::tfc_graph = ptr::null_mut();
        check(unsafe { sys::tfc_graph_new(&mut g) })?;
        NonNull::new(g)
            .map(|raw| Graph { raw })
            .ok_or_else(|| Error::new(sys::TFC_ERR_INTERNAL, "tfc_graph_new returned no graph"))
    }

    fn g(&self) -> *mut sys::tfc_graph {
        self.raw.as_ptr()
    }

    /// The raw handle, borrowed.
    pub fn as_ptr(&self) -> *mut sys::tfc_graph {
        self.g()
    }

    /// Backpropagate from a 1-element loss into the leaves' gradients (+=).
    pub fn backward(&self, loss: &Tensor) -> Result<()> {
        check(unsafe { sys::tfc_graph_backward(self.g(), loss.as_ptr(), ptr::null()) })
    }

    /// Backpropagate with an explicit seed d(objective)/d(loss) of loss's shape.
    pub fn backward_with(&self, loss: &Tensor, seed: &Tensor) -> Result<()> {
        check(unsafe { sys::tfc_graph_backward(self.g(), loss.as_ptr(), seed.as_ptr()) })
    }

    /// Free every recorded node's saved tensors.
    pub fn clear(&self) -> Result<()> {
        check(unsafe { sys::tfc_graph_clear(self.g()) })
    }

    pub fn set_grad_enabled(&self, on: bool) -> Result<()> {
        check(unsafe { sys::tfc_graph_set_grad_enabled(self.g(), on as i32) })
    }

    pub fn is_grad_enabled(&self) -> bool {
        unsafe { sys::tfc_graph_is_grad_enabled(self.g()) != 0 }
    }

    pub fn num_nodes(&self) -> i64 {
        unsafe { sys::tfc_graph_num_nodes(self.g()) }
    }

    binary_ops! {
        /// a + b, broadcast.
        add => tfc_add;
        /// a − b, broadcast.
        sub => tfc_sub;
        /// a ⊙ b, broadcast.
        mul => tfc_mul;
        /// a / b, broadcast.
        div => tfc_div;
        /// numpy.matmul semantics.
        matmul => tfc_matmul;
    }

    scalar_ops! {
        /// x + s
        add_scalar => tfc_add_scalar;
        /// x · s
        mul_scalar => tfc_mul_scalar;
        /// s − x
        rsub_scalar => tfc_rsub_scalar;
        /// s / x
        rdiv_scalar => tfc_rdiv_scalar;
        /// x^s
        pow_scalar => tfc_pow_scalar;
    }

    unary_ops! {
        neg => tfc_neg;
        exp => tfc_exp;
        log => tfc_log;
        sqrt => tfc_sqrt;
        tanh => tfc_tanh;
        sigmoid => tfc_sigmoid;
        relu => tfc_relu;
        /// x itself when contiguous, else a contiguous copy.
        contiguous => tfc_contiguous;
    }

    reduce_ops! {
        /// Sum over dims (empty = all).
        sum => tfc_sum;
        /// Mean over dims (empty = all).
        mean => tfc_mean;
        /// Max over dims (empty = all).
        max => tfc_max;
    }

    /// GELU; `tanh_approx` selects GPT-2's tanh form over the exact erf one.
    pub fn gelu(&self, x: &Tensor, tanh_approx: bool) -> Result<Tensor> {
        let mode = if tanh_approx { sys::TFC_GELU_TANH } else { sys::TFC_GELU_ERF };
        make(|o| unsafe { sys::tfc_gelu(self.g(), x.as_ptr(), mode, o) })
    }

    /// SiLU, x · σ(x).
    pub fn silu(&self, x: &Tensor) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_silu(self.g(), x.as_ptr(), o) })
    }

    /// SwiGLU, silu(gate) ⊙ up (gate and up of one shape; views of a wider tensor are read in place).
    pub fn swiglu(&self, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_swiglu(self.g(), gate.as_ptr(), up.as_ptr(), o) })
    }

    /// SwiGLU of one `[.., 2F]` tensor holding gate then up along its last dim; the output is `[.., F]`.
    pub fn swiglu_fused(&self, gate_up: &Tensor) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_swiglu_fused(self.g(), gate_up.as_ptr(), o) })
    }

    pub fn reshape(&self, x: &Tensor, shape: &[i64]) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_reshape(self.g(), x.as_ptr(), shape.as_ptr(), shape.len() as i32, o) })
    }

    pub fn transpose(&self, x: &Tensor, dim0: i32, dim1: i32) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_transpose(self.g(), x.as_ptr(), dim0, dim1, o) })
    }

    pub fn permute(&self, x: &Tensor, perm: &[i32]) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_permute(self.g(), x.as_ptr(), perm.as_ptr(), perm.len() as i32, o) })
    }

    /// Softmax over dim (numerically stable).
    pub fn softmax(&self, x: &Tensor, dim: i32) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_softmax(self.g(), x.as_ptr(), dim, o) })
    }

    pub fn log_softmax(&self, x: &Tensor, dim: i32) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_log_softmax(self.g(), x.as_ptr(), dim, o) })
    }

    /// LayerNorm over the last dim; weight and bias optional.
    pub fn layernorm(&self, x: &Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> Result<Tensor> {
        let w = weight.map_or(ptr::null(), |t| t.as_ptr() as *const _);
        let b = bias.map_or(ptr::null(), |t| t.as_ptr() as *const _);
        make(|o| unsafe { sys::tfc_layernorm(self.g(), x.as_ptr(), w, b, eps, o) })
    }

    /// Rows of `table` picked by integer `ids`.
    pub fn embedding(&self, table: &Tensor, ids: &Tensor) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_embedding(self.g(), table.as_ptr(), ids.as_ptr(), o) })
    }

    /// Mean cross-entropy of logits `[N, C]` against integer targets `[N]`.
    pub fn cross_entropy(&self, logits: &Tensor, targets: &Tensor, ignore_index: i64) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_cross_entropy(self.g(), logits.as_ptr(), targets.as_ptr(), ignore_index, o) })
    }

    /// softmax(scale · q kᵀ + mask) v, q `[B,H,T,D]` (flash-style, saves only out and lse).
    pub fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, scale: f64) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_attention(self.g(), q.as_ptr(), k.as_ptr(), v.as_ptr(), causal as i32, scale, o) })
    }

    /// Convert to dtype (gradient converted back for float dtypes).
    pub fn cast(&self, x: &Tensor, dtype: DType) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_cast(self.g(), x.as_ptr(), dtype.raw(), o) })
    }

    /// Entries of x along dim named by a 1-D integer index (torch.index_select; no negative indices).
    pub fn index_select(&self, x: &Tensor, dim: i32, index: &Tensor) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_index_select(self.g(), x.as_ptr(), dim, index.as_ptr(), o) })
    }

    /// torch.gather: out has index's shape, out[p] = x[p with p[dim] = index[p]].
    pub fn gather(&self, x: &Tensor, dim: i32, index: &Tensor) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_gather(self.g(), x.as_ptr(), dim, index.as_ptr(), o) })
    }

    /// Out-of-place torch.scatter_add: a copy of x with src added where index points along dim.
    pub fn scatter_add(&self, x: &Tensor, dim: i32, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_scatter_add(self.g(), x.as_ptr(), dim, index.as_ptr(), src.as_ptr(), o) })
    }

    /// The elements of x where the bool mask (broadcast to x) is set, 1-D (differentiable).
    pub fn masked_select(&self, x: &Tensor, mask: &Tensor) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_masked_select(self.g(), x.as_ptr(), mask.as_ptr(), o) })
    }

    /// In place: x's elements at flat (row-major) positions index get values (or += with accumulate).
    /// Refused while this graph records and x requires grad (the write is not differentiated).
    pub fn index_put(&self, x: &Tensor, index: &Tensor, values: &Tensor, accumulate: bool) -> Result<()> {
        check(unsafe { sys::tfc_index_put(self.g(), x.as_ptr(), index.as_ptr(), values.as_ptr(), accumulate as i32) })
    }

    unary_ops! {
        /// |x| (gradient sgn(x), 0 at 0).
        abs => tfc_abs;
        /// sgn(x): −1, 0 or 1 (0 for NaN); gradient 0.
        sign => tfc_sign;
        sin => tfc_sin;
        cos => tfc_cos;
        /// ⌊x⌋; gradient 0.
        floor => tfc_floor;
        /// ⌈x⌉; gradient 0.
        ceil => tfc_ceil;
        /// Round half to even; gradient 0.
        round => tfc_round;
    }

    binary_ops! {
        /// Elementwise max, broadcast; a tie splits the gradient in half (torch 1.13).
        maximum => tfc_maximum;
        /// Elementwise min, broadcast; a tie splits the gradient in half.
        minimum => tfc_minimum;
    }

    /// min(max(x, min), max); `f64::NEG_INFINITY` / `f64::INFINITY` for a missing bound.
    pub fn clamp(&self, x: &Tensor, min: f64, max: f64) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_clamp(self.g(), x.as_ptr(), min, max, o) })
    }

    /// Inclusive prefix sum along dim.
    pub fn cumsum(&self, x: &Tensor, dim: i32) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_cumsum(self.g(), x.as_ptr(), dim, o) })
    }

    /// x with the elements below diagonal k of each matrix (last two dims) zeroed.
    pub fn triu(&self, x: &Tensor, diagonal: i64) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_triu(self.g(), x.as_ptr(), diagonal, o) })
    }

    /// x with the elements above diagonal k of each matrix zeroed.
    pub fn tril(&self, x: &Tensor, diagonal: i64) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_tril(self.g(), x.as_ptr(), diagonal, o) })
    }

    /// Stable sort along dim: (values, i64 indices); values are differentiable.
    pub fn sort(&self, x: &Tensor, dim: i32, descending: bool) -> Result<(Tensor, Tensor)> {
        let mut idx: *mut sys::tfc_tensor = ptr::null_mut();
        let values = make(|o| unsafe { sys::tfc_sort(self.g(), x.as_ptr(), dim, descending as i32, o, &mut idx) })?;
        let indices = unsafe { Tensor::from_raw(idx) }
            .ok_or_else(|| Error::new(sys::TFC_ERR_INTERNAL, "tfc_sort returned no indices"))?;
        Ok((values, indices))
    }
}
