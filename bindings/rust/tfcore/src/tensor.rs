//! Tensor: one reference to a tfc_tensor, released on drop.
use std::fmt;
use std::ptr::{self, NonNull};

use tfcore_sys as sys;

use crate::error::{check, Error, Result};

/// Element types, numbered as `tfc_dtype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    F64,
    BF16,
    F16,
    I32,
    I64,
    U8,
    Bool,
}

impl DType {
    pub fn raw(self) -> sys::tfc_dtype {
        match self {
            DType::F32 => sys::TFC_DTYPE_F32,
            DType::F64 => sys::TFC_DTYPE_F64,
            DType::BF16 => sys::TFC_DTYPE_BF16,
            DType::F16 => sys::TFC_DTYPE_F16,
            DType::I32 => sys::TFC_DTYPE_I32,
            DType::I64 => sys::TFC_DTYPE_I64,
            DType::U8 => sys::TFC_DTYPE_U8,
            DType::Bool => sys::TFC_DTYPE_BOOL,
        }
    }

    pub fn from_raw(d: sys::tfc_dtype) -> Option<DType> {
        [DType::F32, DType::F64, DType::BF16, DType::F16, DType::I32, DType::I64, DType::U8, DType::Bool]
            .into_iter()
            .find(|x| x.raw() == d)
    }
}

/// Device kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Cuda,
}

impl Device {
    pub fn raw(self) -> sys::tfc_device_type {
        match self {
            Device::Cpu => sys::TFC_DEVICE_CPU,
            Device::Cuda => sys::TFC_DEVICE_CUDA,
        }
    }
}

/// True when CUDA tensors can be created in this process.
pub fn cuda_available() -> bool {
    unsafe { sys::tfc_cuda_available() != 0 }
}

/// Rust element types that map one-to-one onto a tfcore dtype.
pub trait Element: Copy + Default + 'static {
    const DTYPE: DType;
}
impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for f64 {
    const DTYPE: DType = DType::F64;
}
impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
impl Element for i64 {
    const DTYPE: DType = DType::I64;
}
impl Element for u8 {
    const DTYPE: DType = DType::U8;
}

/// A tensor handle. `Clone` takes another reference to the SAME tensor
/// (like `Rc`); [`Tensor::deep_clone`] copies the data.
pub struct Tensor {
    raw: NonNull<sys::tfc_tensor>,
}

impl Drop for Tensor {
    fn drop(&mut self) {
        unsafe { sys::tfc_tensor_release(self.raw.as_ptr()) }
    }
}

impl Clone for Tensor {
    fn clone(&self) -> Tensor {
        unsafe { sys::tfc_tensor_retain(self.raw.as_ptr()) };
        Tensor { raw: self.raw }
    }
}

/// Run a C constructor with an out-pointer and wrap what it returns.
pub(crate) fn make(f: impl FnOnce(*mut *mut sys::tfc_tensor) -> sys::tfc_status) -> Result<Tensor> {
    let mut out: *mut sys::tfc_tensor = ptr::null_mut();
    check(f(&mut out))?;
    NonNull::new(out)
        .map(|raw| Tensor { raw })
        .ok_or_else(|| Error::new(sys::TFC_ERR_INTERNAL, "tfcore: call succeeded without a result"))
}

fn ndim_of(shape: &[i64]) -> Result<i32> {
    i32::try_from(shape.len()).map_err(|_| Error::new(sys::TFC_ERR_INVALID_ARG, "tfcore: too many dims"))
}

impl Tensor {
    /// Take ownership of one reference (e.g. from a raw `tfcore_sys` call).
    ///
    /// # Safety
    /// `raw` must be a valid tensor reference the caller owns.
    pub unsafe fn from_raw(raw: *mut sys::tfc_tensor) -> Option<Tensor> {
        NonNull::new(raw).map(|raw| Tensor { raw })
    }

    /// The raw handle, borrowed (still owned by self).
    pub fn as_ptr(&self) -> *mut sys::tfc_tensor {
        self.raw.as_ptr()
    }

    /// A new tensor holding a copy of `data` (row-major) with `shape`.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        let n: i64 = shape.iter().product();
        if n != data.len() as i64 {
            return Err(Error::new(
                sys::TFC_ERR_SHAPE,
                format!("Tensor::from_slice: {} values for shape {:?} ({} elements)", data.len(), shape, n),
            ));
        }
        let nd = ndim_of(shape)?;
        make(|o| unsafe { sys::tfc_tensor_from_data(data.as_ptr().cast(), shape.as_ptr(), nd, T::DTYPE.raw(), o) })
    }

    pub fn zeros(shape: &[i64], dtype: DType) -> Result<Tensor> {
        let nd = ndim_of(shape)?;
        make(|o| unsafe { sys::tfc_tensor_zeros(shape.as_ptr(), nd, dtype.raw(), o) })
    }

    pub fn ones(shape: &[i64], dtype: DType) -> Result<Tensor> {
        let nd = ndim_of(shape)?;
        make(|o| unsafe { sys::tfc_tensor_ones(shape.as_ptr(), nd, dtype.raw(), o) })
    }

    pub fn full(shape: &[i64], dtype: DType, value: f64) -> Result<Tensor> {
        let nd = ndim_of(shape)?;
        make(|o| unsafe { sys::tfc_tensor_full(shape.as_ptr(), nd, dtype.raw(), value, o) })
    }

    /// Standard normal values from the Philox stream (seed, offset).
    pub fn randn(shape: &[i64], dtype: DType, seed: u64, offset: u64) -> Result<Tensor> {
        let nd = ndim_of(shape)?;
        make(|o| unsafe { sys::tfc_tensor_randn(shape.as_ptr(), nd, dtype.raw(), seed, offset, o) })
    }

    /// Uniform [low, high) values from the Philox stream (seed, offset).
    pub fn uniform(shape: &[i64], dtype: DType, low: f64, high: f64, seed: u64, offset: u64) -> Result<Tensor> {
        let nd = ndim_of(shape)?;
        make(|o| unsafe { sys::tfc_tensor_uniform(shape.as_ptr(), nd, dtype.raw(), low, high, seed, offset, o) })
    }

    pub fn arange(start: f64, end: f64, step: f64, dtype: DType) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_tensor_arange(start, end, step, dtype.raw(), o) })
    }

    pub fn shape(&self) -> Vec<i64> {
        let mut dims = [0i64; sys::TFC_MAX_DIMS as usize];
        let nd = self.ndim();
        // Cannot fail on a live handle with a full-size buffer.
        let _ = unsafe { sys::tfc_tensor_shape(self.as_ptr(), dims.as_mut_ptr(), sys::TFC_MAX_DIMS) };
        dims[..nd].to_vec()
    }

    pub fn ndim(&self) -> usize {
        unsafe { sys::tfc_tensor_ndim(self.as_ptr()) }.max(0) as usize
    }

    pub fn numel(&self) -> usize {
        unsafe { sys::tfc_tensor_numel(self.as_ptr()) }.max(0) as usize
    }

    pub fn dtype(&self) -> DType {
        DType::from_raw(unsafe { sys::tfc_tensor_dtype(self.as_ptr()) }).unwrap_or(DType::F32)
    }

    pub fn is_contiguous(&self) -> bool {
        unsafe { sys::tfc_tensor_is_contiguous(self.as_ptr()) != 0 }
    }

    /// All values, row-major, converted to T when the dtype differs.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let src = if self.dtype() == T::DTYPE {
            self.clone()
        } else {
            make(|o| unsafe { sys::tfc_cast(ptr::null_mut(), self.as_ptr(), T::DTYPE.raw(), o) })?
        };
        let mut out = vec![T::default(); self.numel()];
        let bytes = std::mem::size_of_val(out.as_slice());
        check(unsafe { sys::tfc_tensor_copy_to_host(src.as_ptr(), out.as_mut_ptr().cast(), bytes) })?;
        Ok(out)
    }

    /// The value of a 1-element tensor.
    pub fn item(&self) -> Result<f64> {
        let mut v = 0.0;
        check(unsafe { sys::tfc_tensor_item(self.as_ptr(), &mut v) })?;
        Ok(v)
    }

    /// Mark a leaf as requiring a gradient; returns self for chaining.
    pub fn requires_grad(self, on: bool) -> Result<Tensor> {
        check(unsafe { sys::tfc_tensor_set_requires_grad(self.as_ptr(), on as i32) })?;
        Ok(self)
    }

    pub fn is_requires_grad(&self) -> bool {
        unsafe { sys::tfc_tensor_requires_grad(self.as_ptr()) != 0 }
    }

    pub fn is_leaf(&self) -> bool {
        unsafe { sys::tfc_tensor_is_leaf(self.as_ptr()) != 0 }
    }

    /// The accumulated gradient, or None before any backward.
    pub fn grad(&self) -> Result<Option<Tensor>> {
        let mut out: *mut sys::tfc_tensor = ptr::null_mut();
        check(unsafe { sys::tfc_tensor_grad(self.as_ptr(), &mut out) })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// Drop the gradient (set_to_none) or fill it with zeros.
    pub fn zero_grad(&self, set_to_none: bool) -> Result<()> {
        check(unsafe { sys::tfc_tensor_zero_grad(self.as_ptr(), set_to_none as i32) })
    }

    /// Same storage, cut from the graph.
    pub fn detach(&self) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_tensor_detach(self.as_ptr(), o) })
    }

    /// A contiguous copy of the data (never shares storage).
    pub fn deep_clone(&self) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_tensor_clone(self.as_ptr(), o) })
    }

    /// self[...] = src[...] (broadcast, converted); not recorded on a graph.
    pub fn copy_from(&self, src: &Tensor) -> Result<()> {
        check(unsafe { sys::tfc_tensor_copy_from(self.as_ptr(), src.as_ptr()) })
    }

    pub fn fill(&self, value: f64) -> Result<()> {
        check(unsafe { sys::tfc_tensor_fill(self.as_ptr(), value) })
    }

    /// A copy on `device` (index 0 for the CPU); self's reference when already there.
    pub fn to_device(&self, device: Device, index: i32) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_tensor_to_device(self.as_ptr(), device.raw(), index, o) })
    }

    /// Where the tensor's memory lives, and the device index.
    pub fn device(&self) -> (Device, i32) {
        let d = unsafe { sys::tfc_tensor_device_type(self.as_ptr()) };
        let kind = if d == sys::TFC_DEVICE_CUDA { Device::Cuda } else { Device::Cpu };
        (kind, unsafe { sys::tfc_tensor_device_index(self.as_ptr()) })
    }

    /// The library's one-line description (`"tensor f32 [2,3] ..."`).
    pub fn describe(&self) -> Result<String> {
        let mut s: *mut std::ffi::c_char = ptr::null_mut();
        check(unsafe { sys::tfc_tensor_describe(self.as_ptr(), &mut s) })?;
        let text = unsafe { std::ffi::CStr::from_ptr(s) }.to_string_lossy().into_owned();
        unsafe { sys::tfc_free(s.cast()) };
        Ok(text)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.describe() {
            Ok(s) => f.write_str(&s),
            Err(e) => write!(f, "tensor (describe failed: {e})"),
        }
    }
}

macro_rules! compare_ops {
    ($($(#[$doc:meta])* $name:ident, $sname:ident => $cfn:ident, $scfn:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
            make(|o| unsafe { sys::$cfn(self.as_ptr(), other.as_ptr(), o) })
        }
        $(#[$doc])*
        pub fn $sname(&self, s: f64) -> Result<Tensor> {
            make(|o| unsafe { sys::$scfn(self.as_ptr(), s, o) })
        }
    )*};
}

/// Non-differentiable ops of issue #16 (bool / i64 results): nothing is recorded.
impl Tensor {
    compare_ops! {
        /// self < other (broadcast; or against a scalar) as a bool tensor.
        lt, lt_scalar => tfc_lt, tfc_lt_scalar;
        /// self <= other as a bool tensor.
        le, le_scalar => tfc_le, tfc_le_scalar;
        /// self > other as a bool tensor.
        gt, gt_scalar => tfc_gt, tfc_gt_scalar;
        /// self >= other as a bool tensor.
        ge, ge_scalar => tfc_ge, tfc_ge_scalar;
        /// self == other as a bool tensor.
        eq, eq_scalar => tfc_eq, tfc_eq_scalar;
        /// self != other as a bool tensor.
        ne, ne_scalar => tfc_ne, tfc_ne_scalar;
    }

    /// Whether any element is non-zero over dims (empty = all), as bool.
    pub fn any(&self, dims: &[i32], keepdim: bool) -> Result<Tensor> {
        let p = if dims.is_empty() { ptr::null() } else { dims.as_ptr() };
        make(|o| unsafe { sys::tfc_any(self.as_ptr(), p, dims.len() as i32, keepdim as i32, o) })
    }

    /// Whether every element is non-zero over dims (empty = all), as bool.
    pub fn all(&self, dims: &[i32], keepdim: bool) -> Result<Tensor> {
        let p = if dims.is_empty() { ptr::null() } else { dims.as_ptr() };
        make(|o| unsafe { sys::tfc_all(self.as_ptr(), p, dims.len() as i32, keepdim as i32, o) })
    }

    /// i64 positions that sort self along dim (stable).
    pub fn argsort(&self, dim: i32, descending: bool) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_argsort(self.as_ptr(), dim, descending as i32, o) })
    }

    /// One-hot i64 `[..., num_classes]` of integer ids (-1: max + 1 classes).
    pub fn one_hot(&self, num_classes: i64) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_one_hot(self.as_ptr(), num_classes, o) })
    }

    /// num_samples category ids per row of these weights, from the Philox stream (seed, offset).
    pub fn multinomial(&self, num_samples: i64, replacement: bool, seed: u64, offset: u64) -> Result<Tensor> {
        make(|o| unsafe { sys::tfc_multinomial(self.as_ptr(), num_samples, replacement as i32, seed, offset, o) })
    }
}
