//! Optimizers (optim.h): SGD, Adam, AdamW over a set of parameters.
use std::ptr::{self, NonNull};

use tfcore_sys as sys;

use crate::error::{check, Error, Result};
use crate::tensor::Tensor;

/// Which update rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptimKind {
    Sgd,
    Adam,
    /// Adam with decoupled weight decay (Loshchilov & Hutter).
    AdamW,
}

impl OptimKind {
    fn raw(self) -> sys::tfc_optim_kind {
        match self {
            OptimKind::Sgd => sys::TFC_OPTIM_SGD,
            OptimKind::Adam => sys::TFC_OPTIM_ADAM,
            OptimKind::AdamW => sys::TFC_OPTIM_ADAMW,
        }
    }
}

/// Hyperparameters with PyTorch's names; `Options::new(kind)` gives the
/// kind's defaults (AdamW: lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 1e-2).
#[derive(Debug, Clone, Copy)]
pub struct Options {
    raw: sys::tfc_optim_options,
}

impl Options {
    pub fn new(kind: OptimKind) -> Options {
        // Zeroed, then the library's defaults for kind (cannot fail for a known kind).
        let mut raw: sys::tfc_optim_options = unsafe { std::mem::zeroed() };
        let _ = unsafe { sys::tfc_optim_options_default(kind.raw(), &mut raw) };
        raw.struct_size = std::mem::size_of::<sys::tfc_optim_options>() as u32;
        Options { raw }
    }
    pub fn lr(mut self, lr: f64) -> Self {
        self.raw.lr = lr;
        self
    }
    pub fn weight_decay(mut self, wd: f64) -> Self {
        self.raw.weight_decay = wd;
        self
    }
    pub fn betas(mut self, beta1: f64, beta2: f64) -> Self {
        self.raw.beta1 = beta1;
        self.raw.beta2 = beta2;
        self
    }
    pub fn eps(mut self, eps: f64) -> Self {
        self.raw.eps = eps;
        self
    }
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.raw.momentum = momentum;
        self
    }
}

/// An optimizer holding references to its parameters; dropped with release.
pub struct Optimizer {
    raw: NonNull<sys::tfc_optim>,
}

impl Drop for Optimizer {
    fn drop(&mut self) {
        unsafe { sys::tfc_optim_release(self.raw.as_ptr()) }
    }
}

impl Optimizer {
    /// A new optimizer of `kind` over `params` (leaf, contiguous f32/f64 CPU tensors).
    pub fn new(kind: OptimKind, params: &[&Tensor], opts: &Options) -> Result<Optimizer> {
        let mut raw: *mut sys::tfc_optim = ptr::null_mut();
        check(unsafe { sys::tfc_optim_new(kind.raw(), &opts.raw, &mut raw) })?;
        let opt = Optimizer {
            raw: NonNull::new(raw).ok_or_else(|| Error::new(sys::TFC_ERR_INTERNAL, "tfc_optim_new gave no optimizer"))?,
        };
        let ptrs: Vec<*mut sys::tfc_tensor> = params.iter().map(|t| t.as_ptr()).collect();
        check(unsafe { sys::tfc_optim_add_params(opt.p(), ptrs.as_ptr(), ptrs.len() as i32, ptr::null_mut()) })?;
        Ok(opt)
    }

    fn p(&self) -> *mut sys::tfc_optim {
        self.raw.as_ptr()
    }

    /// One update of every parameter that has a gradient.
    pub fn step(&mut self) -> Result<()> {
        check(unsafe { sys::tfc_optim_step(self.p()) })
    }

    pub fn zero_grad(&mut self, set_to_none: bool) -> Result<()> {
        check(unsafe { sys::tfc_optim_zero_grad(self.p(), set_to_none as i32) })
    }

    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        check(unsafe { sys::tfc_optim_set_lr(self.p(), lr) })
    }

    pub fn lr(&self) -> Result<f64> {
        let mut lr = 0.0;
        check(unsafe { sys::tfc_optim_get_lr(self.p(), &mut lr) })?;
        Ok(lr)
    }

    pub fn step_count(&self) -> Result<i64> {
        let mut n = 0;
        check(unsafe { sys::tfc_optim_step_count(self.p(), &mut n) })?;
        Ok(n)
    }

    /// Scale all gradients so their global L2 norm is at most max_norm; returns the norm before.
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> Result<f64> {
        let mut total = 0.0;
        check(unsafe { sys::tfc_optim_clip_grad_norm(self.p(), max_norm, &mut total) })?;
        Ok(total)
    }
}
