//! Safe Rust over libtfcore's C ABI.
//!
//! Handles are RAII types ([`Tensor`], [`Graph`]) whose `Drop` releases
//! their reference; every fallible call returns [`Result`] with an
//! [`Error`] carrying the status and `tfc_last_error()`'s message. Ops
//! record on an explicit [`Graph`] (the C API's autograd tape), so training
//! code reads like the C or Python one:
//!
//! ```ignore
//! let g = Graph::new()?;
//! let w = Tensor::randn(&[3, 1], DType::F32, 0, 0)?.requires_grad(true)?;
//! let loss = g.mean(&g.matmul(&x, &w)?, &[], false)?;
//! g.backward(&loss)?;
//! let dw = w.grad()?.unwrap();
//! ```
//!
//! Dims are 0-based (negative counts from the end), shapes outermost first.
//! Types here are not `Send`: a tensor handle may be shared across threads
//! in C, but a graph may not, and keeping both single-threaded is simplest.
mod error;
mod gpt;
mod graph;
pub mod kernels;
mod optim;
mod tensor;
mod tokenizer;

pub use error::{Error, Result};
pub use gpt::{load_model, Arch, Gpt, GptConfig, Rope, Sampling};
pub use graph::Graph;
pub use optim::{OptimKind, Optimizer, Options};
pub use tensor::{cuda_available, DType, Device, Element, Tensor};
pub use tokenizer::{Special, SplitPattern, Tokenizer};
pub use tfcore_sys as sys;

/// The library's version string, e.g. "1.0.0".
pub fn version() -> String {
    unsafe { std::ffi::CStr::from_ptr(sys::tfc_version_string()) }.to_string_lossy().into_owned()
}
